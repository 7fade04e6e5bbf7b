"""The replicated pair: two nodes, each with its own PostgreSQL.

Owns ``replication`` (publications and subscriptions), ``peer`` (the other node), ``transfer``
(handing ownership over) and ``writer`` (which node writes).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
