"""The one gate for local execution: which jobs may be assigned to a local target.

A command on a local target without ``local_run_as`` (or with it naming the scheduler's own
user) runs with the scheduler's privileges, beside the database and the master key: whoever
wrote it can make themselves admin. The rule: a job may be assigned to such a target only
when the author of its current command and selector (``jobs.command_by``/``command_role``,
stamped by :func:`stamp_author` whenever they are written, cleared by the schema whenever
they change otherwise) held the role ``local_job_role`` names (admin by default).

:func:`refusal` is the check, and it is asked in two places only: by
:func:`fleetcron.services.fleet.assignments.new_assignment`, the one constructor of assignments (job
add, edit, revert, schedule files, and the bulk extension on label, edit and pair), and by
:func:`require_cleared` when what runs on existing assignments changes (a job's command or
selector). A direct path (writing a job) fails with :class:`LocalRefused` (403); an
extension a target change brings (label, edit, pair) leaves that job out, audited and
logged, and the target change goes on. The scheduler asks the same rule before it starts
a local run (``local_run_as`` may have changed since the assignment was made).
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.labels import format_selector
from fleetcron.core.local_clearance import local_refusal
from fleetcron.errors import PermissionDenied
from fleetcron.executors.local import runs_privileged
from fleetcron.services.audit import AuditNote, record
from fleetcron.store.schema import Job, Target

log = logging.getLogger(__name__)

#: The audit action and log action of an extension the gate refused.
REFUSED_ACTION = "job.extend_refused"


class LocalRefused(PermissionDenied):
    """A job's command may not run on a local target with the scheduler's privileges."""


def local_commands_privileged(app: App) -> bool:
    """Whether a command on a local target runs with the scheduler's own privileges
    (:func:`fleetcron.executors.local.runs_privileged` of ``local_run_as``)."""
    return runs_privileged(app.settings.local_run_as)


def stamp_author(job: Job, actor: Actor) -> None:
    """Record ``actor`` as the author of the job's command and selector (call it after
    setting them: setting them clears the author)."""
    job.command_by, job.command_role = actor.name, actor.role


def refusal(app: App, job: Job, target: Target) -> str | None:
    """Why ``job`` may not be assigned to ``target``; None when it may (the rule is
    :func:`fleetcron.core.local_clearance.local_refusal`, which dispatch asks too)."""
    return local_refusal(
        target_kind=target.kind,
        privileged=local_commands_privileged(app),
        least_role=app.settings.local_job_role,
        command_by=job.command_by,
        command_role=job.command_role,
        job_name=job.name,
        target_name=target.name,
    )


def admit(app: App, job: Job, target: Target) -> None:
    """Raise :class:`LocalRefused` unless ``job`` may be assigned to ``target``."""
    reason = refusal(app, job, target)
    if reason is not None:
        raise LocalRefused(reason)


def require_cleared(app: App, job: Job) -> None:
    """After the command or selector of ``job`` changed: every local target it covers (its
    assignments, and an individual job's target even while unpaired) must admit it."""
    targets = {a.target.id: a.target for a in job.assignments}
    if job.target is not None:
        targets[job.target.id] = job.target
    for target in sorted(targets.values(), key=lambda t: t.name):
        admit(app, job, target)


def record_refusal(
    session: Session, app: App, actor: Actor, job: Job, target: Target, reason: str
) -> None:
    """Audit (in the caller's transaction) and log an extension the gate refused."""
    note = AuditNote(
        REFUSED_ACTION,
        job_id=job.id,
        job_name=job.name,
        target_id=target.id,
        target_name=target.name,
        detail={
            "selector": format_selector(job.selector),
            "command_by": job.command_by,
            "command_role": job.command_role,
            "error": reason,
        },
    )
    record(session, app, actor, note, success=False)
    log.warning(
        "local gate: job %s not extended to local target %s: %s",
        job.name,
        target.name,
        reason,
        extra={"action": REFUSED_ACTION, "actor": actor.name},
    )
