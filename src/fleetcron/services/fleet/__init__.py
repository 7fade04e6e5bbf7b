"""The fleet: which targets a job runs on, and what the job's fleet looks like.

Owns ``assignments`` (the one place that creates, extends and ends assignments),
``local_gate`` (the check every assignment to a local target passes), ``states`` (each
assignment's state), ``grid`` (the jobs × targets grid) and ``job_page`` (the job page's
view of its targets and rollout).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
