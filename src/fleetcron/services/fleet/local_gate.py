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
logged, and the target change goes on.
"""

from __future__ import annotations

import logging
import os
import pwd

from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.labels import format_selector
from fleetcron.core.permissions import ROLE_RANK
from fleetcron.errors import PermissionDenied
from fleetcron.services.audit import AuditNote, record
from fleetcron.store.schema import Job, Target

log = logging.getLogger(__name__)

#: The audit action and log action of an extension the gate refused.
REFUSED_ACTION = "job.extend_refused"


class LocalRefused(PermissionDenied):
    """A job's command may not run on a local target with the scheduler's privileges."""


def local_commands_privileged(app: App) -> bool:
    """Whether a command on a local target runs with the scheduler's own privileges.

    Without ``local_run_as`` a local command runs as the scheduler's user, who owns the data
    dir, the database and the master key: whoever writes such a command can make themselves
    admin. With ``local_run_as`` naming another (unprivileged) user it cannot."""
    run_as = app.settings.local_run_as
    if run_as is None:
        return True
    try:
        return pwd.getpwnam(run_as).pw_uid == os.geteuid()
    except KeyError:
        return False  # the executor refuses such runs with its own error


def stamp_author(job: Job, actor: Actor) -> None:
    """Record ``actor`` as the author of the job's command and selector (call it after
    setting them: setting them clears the author)."""
    job.command_by, job.command_role = actor.name, actor.role


def refusal(app: App, job: Job, target: Target) -> str | None:
    """Why ``job`` may not be assigned to ``target``; None when it may."""
    if target.kind != "local" or not local_commands_privileged(app):
        return None
    least = app.settings.local_job_role
    if ROLE_RANK.get(job.command_role or "", -1) >= ROLE_RANK[least]:
        return None
    author = (
        f"{job.command_by} ({job.command_role})"
        if job.command_by and job.command_role
        else "a writer not recorded (a job saved before authors were recorded)"
    )
    return (
        f"{author} may not put a command on the local target {target.name} (job "
        f"{job.name}): local commands run as the scheduler's own user, which needs the "
        f"{least} role (settings local_run_as, local_job_role); narrow the job's selector, "
        "or ask an admin to save the job"
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
