"""Runs per minute and status (``run_counts``), for the day's counts of health.

The rows are written by triggers on ``runs`` (migration 0022), in the transaction of each
run write, whatever writes it: this module only reads them. Counting the day's runs by
status from the runs reads every run of the day (750,000 index entries at 5,000 targets ×
50 jobs: 70-190 ms per health call, and ten times that at 7.2 million runs a day); the
counts are at most 1,440 rows per status. Queued runs are not counted (migration 0022 says
why).

The triggers count by the run's shard too (migration 0041: a node's workers own disjoint
shards and so never write the same row), and :func:`compact` folds the shards of minutes
older than a few minutes into one row of shard :data:`COMPACTED`; a count is the sum of
its minute's rows (a shard's row may be negative after a late change of a compacted
minute).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from fleetcron.core.statuses import RunStatus
from fleetcron.store.schema import Run, RunCount

QUEUED = RunStatus.QUEUED.value
#: The shard of a compacted count (every shard's runs of its minute and status).
COMPACTED = -1
_TABLE = cast(Table, RunCount.__table__)


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
        (m, s): int(n)
        for m, s, n in session.execute(
            select(RunCount.minute, RunCount.status, func.sum(RunCount.n)).group_by(
                RunCount.minute, RunCount.status
            )
        )
        if n
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
            f"INSERT INTO run_counts (minute, status, shard, n) SELECT {minute}, status,"
            f" {COMPACTED}, count(*) FROM runs WHERE status <> 'queued' GROUP BY 1, 2"
        )
    )


def _upsert(session: Session) -> Any:
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(_TABLE)
    return statement.on_conflict_do_update(
        index_elements=["minute", "status", "shard"],
        set_={"n": _TABLE.c.n + statement.excluded.n},
    )


def _key(prefix: str = "") -> Any:
    return (
        (_TABLE.c.minute == bindparam(f"{prefix}minute"))
        & (_TABLE.c.status == bindparam(f"{prefix}status"))
        & (_TABLE.c.shard == bindparam(f"{prefix}shard"))
    )


def compact(session: Session, *, before: datetime, limit: int) -> int:
    """Fold up to ``limit`` shard rows of minutes before ``before`` into their minute's
    :data:`COMPACTED` row, in the caller's transaction; returns how many were folded (fewer
    than ``limit``: nothing is left). On PostgreSQL the rows a writer holds are skipped
    (``SKIP LOCKED``: a later round takes them), so compaction never waits for a claim;
    a writer waits at most for this small transaction. A late change of a folded minute
    writes its shard's row anew, which the next round folds: the sums stay exact."""
    picked: Sequence[Any] = session.execute(
        select(RunCount.minute, RunCount.status, RunCount.shard, RunCount.n)
        .where(RunCount.shard != COMPACTED, RunCount.minute < before)
        .order_by(RunCount.minute, RunCount.status, RunCount.shard)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    if not picked:
        return 0
    keys = [{"k_minute": m, "k_status": s, "k_shard": shard} for m, s, shard, _ in picked]
    session.execute(delete(_TABLE).where(_key("k_")), keys)
    sums: Counter[tuple[datetime, str]] = Counter()
    for m, s, _, n in picked:
        sums[(m, s)] += int(n)
    # In key order, so that two nodes' rounds lock the compacted rows in the same order.
    folded = [
        {"minute": m, "status": s, "shard": COMPACTED, "n": n} for (m, s), n in sorted(sums.items())
    ]
    session.execute(_upsert(session), folded)
    zero = [
        {"k_minute": f["minute"], "k_status": f["status"], "k_shard": COMPACTED} for f in folded
    ]
    session.execute(delete(_TABLE).where(_key("k_") & (_TABLE.c.n == 0)), zero)
    return len(picked)
