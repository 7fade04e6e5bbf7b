"""Alerts: deciding what to tell whom, and telling them.

Owns ``evaluation`` (each assignment's alert state), ``incidents`` (the targets sharing a
cause on a job, and the messages due about them), ``incident_ops`` (listing and
acknowledging incidents), ``silences`` (muting them), ``channels`` (administration of
channels and rules), ``deliveries`` (the delivery queue) and ``runner`` (the scheduler's
round of evaluation and delivery).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
