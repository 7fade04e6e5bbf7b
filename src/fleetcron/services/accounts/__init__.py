"""Accounts: users, passwords, tokens and sessions.

Owns ``users`` (users, roles, passwords, API tokens) and ``sessions`` (web sessions).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
