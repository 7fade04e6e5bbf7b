"""Jobs: what a job is and how it changes.

Owns ``edit`` (add, edit, pause, remove; validation of every job option), ``versions`` and
``version_writes`` (every saved version and reverting to one), ``slots`` (a job's slots and
their outcome), ``selection`` (pausing and resuming a job on a selection of its targets) and
``upcoming`` (what fires in the next hours).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
