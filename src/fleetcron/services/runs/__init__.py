"""Runs: what ran, when, and what is kept.

Owns ``reads`` (run now, list and show runs), ``search`` (searching recorded output),
``history`` (charts and strips of past slots), ``failures`` (the recent failures grouped by
job) and ``retention`` (pruning old runs and audit rows).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
