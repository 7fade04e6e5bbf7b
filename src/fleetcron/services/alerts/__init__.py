"""Alerts: deciding what to tell whom, and telling them.

Owns ``evaluation`` (each assignment's alert state), ``incidents`` (the targets sharing a
cause on a job, and the messages due about them), ``incident_ops`` (listing and
acknowledging incidents), ``silences`` (muting them), ``channels`` (administration of
channels and rules), ``deliveries`` (the delivery queue) and ``runner`` (the scheduler's
round of evaluation and delivery).

A round's cost follows what changed, not how long an outage has lasted: evaluation loads
only the runs from the first one that may change an assignment's stored state, and tells
a halted rollout already recorded from its incident (``evaluation``'s docstring says how).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
