"""The cluster: nodes, ownership, handoff and takeover as operators drive them.

Owns ``status`` (nodes, ownership, handoff, forced takeover, maintenance), ``registry`` (the
nodes known), ``lease`` (the owner's lease as shown), ``peers`` (approving a node through
its endpoint), ``cleanup`` (ending an expired owner's work), ``secrets`` (the cluster
secret and its rotation), ``pins`` (an operator's pin of a shard to a node, with the
members placement) and ``pair_transfer`` (a handoff asked of either node of a replicated
pair, forwarded to the node that writes).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
