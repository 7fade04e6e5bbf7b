"""Alerts: deciding what to tell whom, and telling them.

Owns ``evaluation`` (each assignment's alert state and the messages it causes), ``channels``
(administration of channels and rules), ``deliveries`` (the delivery queue) and ``runner``
(the scheduler's round of evaluation and delivery).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
