"""The replicated pair: two nodes, each with its own PostgreSQL.

Owns ``replication`` (publications and subscriptions) and ``peer`` (calling the other node).
Which node may write is :mod:`fleetcron.services.writer`, below every package.

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
