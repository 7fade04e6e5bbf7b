"""Jobs: what a job is and how it changes.

Owns ``edit`` (add, edit, pause, remove; validation of every job option), ``versions`` and
``version_writes`` (every saved version and reverting to one), ``slots`` (a job's slots and
their outcome, and the halted ones), ``selection`` (the targets a run or a pause selects,
and those that did not succeed), ``plan`` (the preview of a manual run, and the choices
the run makes from the same code) and ``upcoming`` (what fires in the next hours).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
