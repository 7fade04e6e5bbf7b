"""Projects: what each team owns, and who sees it.

Owns ``scope`` (the project an object belongs to, the projects an actor sees, the actor
of a user with its roles in projects) and ``admin`` (adding projects, granting roles in
them, sharing targets between them: global admins only, audited).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
