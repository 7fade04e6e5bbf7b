"""Runs: ask for a run now, list and show what ran.

"Run now" records a ``queued`` run (trigger ``manual``); the scheduler that may run jobs
picks it up on its next tick, so a request made on any node never runs outside the
scheduler and its guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, or_, select

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core import validation as v
from fleetcron.core.statuses import RunStatusName
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.jobs import get_job
from fleetcron.services.job_fleet import Selection, select_assignments
from fleetcron.services.targets import get_target
from fleetcron.store.schema import Run

RunStatus = RunStatusName
"""The status strings an API filter accepts (the vocabulary lives in ``core/statuses.py``)."""
RUN_STATUSES: tuple[str, ...] = tuple(s.value for s in statuses.ALL)
"""Plain strings (not enum members), so the CLI choices and the page list show the values."""
FINISHED_STATUSES = frozenset(statuses.TERMINAL)


def request_run(
    app: App,
    actor: Actor,
    job: str,
    *,
    target: str | None = None,
    selection: Selection | None = None,
) -> list[int]:
    """Queue a manual run of ``job`` on one target, or on every enabled target of it, or
    on the targets a :class:`~fleetcron.services.job_fleet.Selection` names (audited with
    it; a selection that matches nothing queues nothing and raises InvalidInput).

    Naming a target runs it there even when the job is paused on that target."""
    note = AuditNote("job.run", job_name=job, target_name=target)
    with audited(app, actor, note) as session:
        actor.authorize("job.run")
        the_job = get_job(session, job)
        note.job_id = the_job.id
        assignments = [a for a in the_job.assignments if a.enabled]
        if target is not None:
            the_target = get_target(session, target)
            note.target_id = the_target.id
            assignments = [a for a in the_job.assignments if a.target_id == the_target.id]
            if not assignments:
                raise NotFound(f"assignment of job {job} on target", target)
        if selection is not None and selection.given:
            note.detail["selection"] = selection.audit_detail()
            assignments = select_assignments(session, the_job, selection)
        if not assignments:
            raise InvalidInput(
                f"job {job} is not enabled on any target",
                field="job",
                value=job,
                allowed="a job with at least one enabled target, or --target",
            )
        now = app.now()
        runs = [
            Run(
                assignment_id=a.id,
                job_id=the_job.id,
                target_id=a.target_id,
                job_name=the_job.name,
                target_name=a.target.name,
                origin=the_job.origin,
                command=the_job.command,
                scheduled_for=now,
                trigger="manual",
                attempt=1,
                status=statuses.RunStatus.QUEUED,
                node=app.node_name,
                actor=actor.name,
                created_at=now,
            )
            for a in assignments
        ]
        session.add_all(runs)
        session.flush()
        note.detail.update({"runs": len(runs)})
        return [r.id for r in runs]


@dataclass(frozen=True)
class RunFilter:
    job: str | None = None
    target: str | None = None
    status: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    grep: str | None = None
    run_ids: Sequence[int] | None = None
    statuses: Sequence[str] | None = None


def _filtered(query: Select[Any], f: RunFilter) -> Select[Any]:
    if f.job:
        query = query.where(Run.job_name == f.job)
    if f.target:
        query = query.where(Run.target_name == f.target)
    if f.status:
        query = query.where(Run.status == v.validate_choice(f.status, RUN_STATUSES, field="status"))
    if f.statuses:
        for status in f.statuses:
            v.validate_choice(status, RUN_STATUSES, field="status")
        query = query.where(Run.status.in_(f.statuses))
    if f.since:
        query = query.where(Run.scheduled_for >= f.since)
    if f.until:
        query = query.where(Run.scheduled_for < f.until)
    if f.grep:
        pattern = f"%{f.grep}%"
        query = query.where(
            or_(
                Run.stdout_head.contains(f.grep, autoescape=True),
                Run.stdout_tail.contains(f.grep, autoescape=True),
                Run.stderr_head.contains(f.grep, autoescape=True),
                Run.stderr_tail.contains(f.grep, autoescape=True),
                Run.error.like(pattern),
            )
        )
    if f.run_ids is not None:
        query = query.where(Run.id.in_(f.run_ids))
    return query


def list_runs(
    app: App, actor: Actor, f: RunFilter, *, limit: int = 50, offset: int = 0
) -> tuple[Sequence[Run], int]:
    """Runs matching the filter, newest first, and how many match in all."""
    actor.authorize("run.read")
    with app.db.read() as session:
        total: int = session.scalar(_filtered(select(func.count(Run.id)), f)) or 0
        rows: Sequence[Run] = session.scalars(
            _filtered(select(Run), f)
            .order_by(Run.scheduled_for.desc(), Run.id.desc())
            .limit(limit)
            .offset(offset)
        ).all()
        return rows, total


def get_run(app: App, actor: Actor, run_id: int) -> Run:
    actor.authorize("run.read")
    with app.db.read() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise NotFound("run", run_id)
        return run
