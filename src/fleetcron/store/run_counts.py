"""Runs per minute and status (``run_counts``), for the day's counts of health.

The rows are written by triggers on ``runs`` (migration 0022), in the transaction of each
run write, whatever writes it: this module only reads them. Counting the day's runs by
status from the runs reads every run of the day (750,000 index entries at 5,000 targets ×
50 jobs: 70-190 ms per health call, and ten times that at 7.2 million runs a day); the
counts are at most 1,440 rows per status. Queued runs are not counted (migration 0022 says
why).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session

from fleetcron.core.statuses import RunStatus
from fleetcron.store.schema import Run, RunCount

QUEUED = RunStatus.QUEUED.value


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def counts_since(session: Session, since: datetime) -> dict[str, int]:
    """Runs scheduled at or after ``since`` by status (not counting queued ones): the
    whole minutes from the counts, the part of a minute before them from the runs (a few
    index entries: slots are on the minute)."""
    whole = _minute(since) if _minute(since) == since else _minute(since) + timedelta(minutes=1)
    out: Counter[str] = Counter()
    for status, n in session.execute(
        select(RunCount.status, func.sum(RunCount.n))
        .where(RunCount.minute >= whole)
        .group_by(RunCount.status)
    ):
        out[status] += int(n)
    if whole > since:
        for status, n in session.execute(
            select(Run.status, func.count())
            .where(Run.scheduled_for >= since, Run.scheduled_for < whole, Run.status != QUEUED)
            .group_by(Run.status)
        ):
            out[str(status)] += n
    return {status: n for status, n in out.items() if n}


def stale(session: Session) -> dict[tuple[datetime, str], tuple[int, int]]:
    """The (minute, status) counts that disagree with the runs, as (kept, true): empty
    when the triggers kept every count. Reads every run: for tests and checks, not pages."""
    truth: Counter[tuple[datetime, str]] = Counter(
        (_minute(at), str(status))
        for at, status in session.execute(
            select(Run.scheduled_for, Run.status).where(Run.status != QUEUED)
        )
    )
    kept = {
        (m, s): n
        for m, s, n in session.execute(select(RunCount.minute, RunCount.status, RunCount.n))
    }
    return {
        key: (kept.get(key, 0), truth.get(key, 0))
        for key in set(truth) | set(kept)
        if kept.get(key, 0) != truth.get(key, 0)
    }


#: The minute of a run's slot, as the triggers of migration 0022 compute it.
MINUTE_SQL = {
    "sqlite": "substr(scheduled_for, 1, 17) || '00.000000'",
    "postgresql": "date_trunc('minute', scheduled_for)",
}


def recount(session: Session) -> None:
    """Count every minute anew from the runs, in the caller's transaction: after rows were
    written with the triggers off (a bulk load), or to repair counts :func:`stale` found."""
    minute = MINUTE_SQL[session.get_bind().dialect.name]
    session.execute(delete(RunCount))
    session.execute(
        text(
            f"INSERT INTO run_counts (minute, status, n) SELECT {minute}, status, count(*)"
            " FROM runs WHERE status <> 'queued' GROUP BY 1, 2"
        )
    )
