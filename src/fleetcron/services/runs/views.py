"""What the CLI and the web show of a run: :class:`RunView`, plain values copied from its
row, and the reads that return it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, or_, select

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.statuses import RunStatus
from fleetcron.services.projects.scope import runs_in
from fleetcron.services.runs.reads import RUN_STATUSES, RunFilter, run_row
from fleetcron.store.schema import Run


@dataclass(frozen=True)
class RunView:
    """One run as shown: what ran where, its outcome and the excerpts of its output."""

    id: int
    job_id: int
    target_id: int
    job_name: str
    target_name: str
    origin: str
    command: str
    scheduled_for: datetime
    trigger: str
    attempt: int
    status: RunStatus
    reason: str | None
    skip_kind: str | None
    exit_code: int | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    node: str
    actor: str
    #: The version of the job's definition the run ran.
    job_version: int | None
    stdout_head: str
    stdout_tail: str
    stdout_bytes: int
    stdout_truncated: bool
    stderr_head: str
    stderr_tail: str
    stderr_bytes: int
    stderr_truncated: bool
    #: Who asked to stop it and when (None: nobody did).
    stop_requested_by: str | None = None
    stop_requested_at: datetime | None = None

    @classmethod
    def of(cls, row: Run) -> RunView:
        return cls(
            id=row.id,
            job_id=row.job_id,
            target_id=row.target_id,
            job_name=row.job_name,
            target_name=row.target_name,
            origin=row.origin,
            command=row.command,
            scheduled_for=row.scheduled_for,
            trigger=row.trigger,
            attempt=row.attempt,
            status=row.status,
            reason=row.reason,
            skip_kind=row.skip_kind,
            exit_code=row.exit_code,
            error=row.error,
            started_at=row.started_at,
            finished_at=row.finished_at,
            duration_ms=row.duration_ms,
            node=row.node,
            actor=row.actor,
            job_version=row.job_version,
            stdout_head=row.stdout_head,
            stdout_tail=row.stdout_tail,
            stdout_bytes=row.stdout_bytes,
            stdout_truncated=row.stdout_truncated,
            stderr_head=row.stderr_head,
            stderr_tail=row.stderr_tail,
            stderr_bytes=row.stderr_bytes,
            stderr_truncated=row.stderr_truncated,
            stop_requested_by=row.stop_requested_by,
            stop_requested_at=row.stop_requested_at,
        )


def show_run(app: App, actor: Actor, run_id: int) -> RunView:
    """One run as shown (``NotFound`` for an unknown id)."""
    return RunView.of(run_row(app, actor, run_id))


def _scoped(query: Select[Any], f: RunFilter, scope: ColumnElement[bool] | None) -> Select[Any]:
    """``query`` with the filter, confined to the runs of ``scope`` (None: every run)."""
    return _filtered(query if scope is None else query.where(scope), f)


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
        v.validate_search_text(f.grep, field="grep")
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


def list_run_views(
    app: App, actor: Actor, f: RunFilter, *, limit: int = 50, offset: int = 0
) -> tuple[list[RunView], int]:
    """Runs matching the filter, newest first, as shown, and how many match in all."""
    actor.authorize_in("run.read")
    with app.db.read() as session:
        scope = runs_in(session, actor)
        total: int = session.scalar(_scoped(select(func.count(Run.id)), f, scope)) or 0
        rows = session.scalars(
            _scoped(select(Run), f, scope)
            .order_by(Run.scheduled_for.desc(), Run.id.desc())
            .limit(limit)
            .offset(offset)
        ).all()
        return [RunView.of(r) for r in rows], total
