"""Health of the schedules: what failed, what is late or missing, what is stuck.

Owns ``report`` (the health answer), ``assignments`` (each assignment's failing, late and stuck
state), ``failures`` (failures by cause) and ``failure_streak`` (a streak's bounded length).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
