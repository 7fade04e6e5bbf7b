"""What the CLI and the web show of a run: :class:`RunView`, plain values copied from its
row, and the reads that return it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetcron.app import Actor, App
from fleetcron.core.statuses import RunStatus
from fleetcron.services.runs.reads import RunFilter, get_run, list_runs
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
        )


def show_run(app: App, actor: Actor, run_id: int) -> RunView:
    """One run (:func:`~fleetcron.services.runs.reads.get_run`) as shown."""
    return RunView.of(get_run(app, actor, run_id))


def list_run_views(
    app: App, actor: Actor, f: RunFilter, *, limit: int = 50, offset: int = 0
) -> tuple[list[RunView], int]:
    """Runs matching the filter, newest first, as shown, and how many match in all."""
    rows, total = list_runs(app, actor, f, limit=limit, offset=offset)
    return [RunView.of(r) for r in rows], total
