"""Recent failures by job: which jobs failed in the last hours, how often, on how many
targets, and their newest failure (the dashboard's *Recent failures*).

Read from the newest failed runs of the window, at most ``cap`` of them: one seek per
failed status on ``ix_runs_status_slot`` (status, slot, id), merged newest first. A fleet
whose every target fails every minute has millions of failures a day; the counts then say
"at least" (:class:`~fleetcron.core.bounded.Bounded`), and the exact day's total comes from
``run_counts`` (health's ``failures_24h``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Any

from sqlalchemy import ColumnElement, select, true
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.bounded import Bounded
from fleetcron.core.statuses import FAILED
from fleetcron.services.projects.scope import runs_in
from fleetcron.store.schema import Run

#: The window the dashboard groups (the same day as its run counts).
WINDOW = timedelta(hours=24)
#: Failed runs read at most (the newest of the window).
CAP = 2_000
#: Jobs listed at most (the most recently failed first).
JOBS_SHOWN = 10


@dataclass(frozen=True)
class JobFailures:
    """One job's failures in the window: how many, on how many targets, the newest."""

    job: str
    origin: str
    failures: Bounded
    targets: Bounded
    #: The newest failure: its run, slot, target, status and exit code.
    run_id: int
    at: datetime
    target: str
    status: str
    exit_code: int | None
    #: Its newest failures by status (``{"failed": 3, "connect_error": 1}``).
    by_status: dict[str, int]


@dataclass(frozen=True)
class RecentFailures:
    """The jobs that failed since ``since``, the most recently failed first."""

    jobs: list[JobFailures]
    #: Every job with a failure among the runs read (``jobs`` lists at most ``JOBS_SHOWN``).
    total_jobs: int
    #: Failed runs read; ``capped``: the window held more than were read.
    read: int
    capped: bool
    since: datetime

    @property
    def more_jobs(self) -> int:
        return self.total_jobs - len(self.jobs)


def recent_failures(
    app: App,
    actor: Actor,
    *,
    window: timedelta = WINDOW,
    cap: int = CAP,
    jobs: int = JOBS_SHOWN,
) -> RecentFailures:
    """The failed runs of the last ``window`` grouped by job, newest failure first."""
    actor.authorize_in("run.read")
    since = app.now() - window
    with app.db.read() as session:
        rows = _newest_failures(session, since, cap + 1, runs_in(session, actor))
    capped = len(rows) > cap
    rows = rows[:cap]
    grouped: dict[str, list[Any]] = {}
    for row in rows:
        grouped.setdefault(row.job_name, []).append(row)
    # in order of each job's newest failure
    listed = [_job_failures(name, runs, capped) for name, runs in islice(grouped.items(), jobs)]
    return RecentFailures(
        jobs=listed, total_jobs=len(grouped), read=len(rows), capped=capped, since=since
    )


def _newest_failures(
    session: Session, since: datetime, limit: int, scope: ColumnElement[bool] | None
) -> list[Any]:
    """The newest ``limit`` failed runs since ``since`` within ``scope`` (the project's
    runs; None: every run), newest first: read per failed status (each an index range)
    and merged."""
    columns = (
        Run.id,
        Run.job_name,
        Run.origin,
        Run.target_name,
        Run.scheduled_for,
        Run.status,
        Run.exit_code,
    )
    rows: list[Any] = []
    for status in FAILED:
        rows.extend(
            session.execute(
                select(*columns)
                .where(Run.status == status, Run.scheduled_for >= since)
                .where(true() if scope is None else scope)
                .order_by(Run.scheduled_for.desc(), Run.id.desc())
                .limit(limit)
            ).all()
        )
    rows.sort(key=lambda r: (r.scheduled_for, r.id), reverse=True)
    return rows


def _status_text(status: object) -> str:
    return str(getattr(status, "value", status))


def _job_failures(name: str, runs: list[Any], capped: bool) -> JobFailures:
    """One job's line: its failures and targets counted, its newest failure, and how many
    of each failed status."""
    newest = runs[0]
    by_status: dict[str, int] = {}
    for r in runs:
        key = _status_text(r.status)
        by_status[key] = by_status.get(key, 0) + 1
    return JobFailures(
        job=name,
        origin=newest.origin,
        failures=Bounded(len(runs), capped),
        targets=Bounded(len({r.target_name for r in runs}), capped),
        run_id=newest.id,
        at=newest.scheduled_for,
        target=newest.target_name,
        status=_status_text(newest.status),
        exit_code=newest.exit_code,
        by_status=by_status,
    )


__all__ = ["CAP", "JOBS_SHOWN", "WINDOW", "JobFailures", "RecentFailures", "recent_failures"]
