"""The newest run of each assignment, kept on the assignment.

How a target stands on a job is its newest run (the dashboard's counts, the fleet grid, the
job page, a targeted run's selection) or its newest *finished* run (health: failing or
not). Read from the runs, that is an index seek per assignment on every request: 250,000
seeks on a dashboard of 5,000 targets × 50 jobs (2.3 s), and a probe per candidate for
health. So each assignment carries both, with their statuses: ``newest_run_id``,
``newest_status``, ``newest_finished_run_id`` and ``newest_finished_status`` (migration
0021), and the pages read those columns (an index on ``newest_finished_status`` finds the
failing assignments at once).

**Written with the runs.** Every store function that inserts a run, changes a status or
deletes runs calls :func:`refresh` (by assignment) or :func:`refresh_for_runs` (by run) in
the same transaction, so a reader never sees a run without its assignment agreeing.
The refresh *recomputes* the columns from the runs (the newest by ``scheduled_for,
attempt``, the order of the slot index), set-based and idempotent: it does not depend on
the order in which runs are written, and a second refresh changes nothing. :func:`stale`
is the check that the columns agree with the runs (the test suite runs it after every
test; a negative control shows it finds a wrong column).

A deleted newest run (retention) is recomputed too: the assignment then points at the
newest run left, or at nothing.

**Queued runs do not count.** A "run now" request inserts a ``queued`` run, on any node of
a replicated pair (``services/writer.py``: ``job.run`` only inserts rows, so either
node may write it). Refreshing the assignment there would update the assignment row on a
node that is not the owner, and logical replication applies whole rows: the owner's
``next_fire_at`` could be overwritten. So the newest run is the newest one the scheduler
has taken up (any status but ``queued``, nor ``pending`` for a manual run that follows
the job's rollout); the owner refreshes the assignment when it starts the run (within a
tick) or the rollout skips it.

**Lock order.** On PostgreSQL a refresh locks its assignments in id order before it
updates them, as the ORM's flush of an operator's edit does, so a completion and an edit
of the same job's assignments cannot deadlock (a deadlock would abort the completion).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import Select, String, Table, bindparam, delete, or_, select, type_coerce, update
from sqlalchemy.orm import Session

from fleetcron.core import statuses
from fleetcron.store.bulk import among
from fleetcron.store.schema import Assignment, Run

ASSIGNMENTS = cast(Table, Assignment.__table__)

#: Ids per ``IN (...)`` list (SQLite allows 32,766 parameters; stay well below).
CHUNK = 5000


def unindexed(status: Any) -> Any:
    """``status`` as an expression no index serves (``status || ''``), on every database.

    The newest-run reads go through one assignment's runs by the (assignment, slot, attempt)
    index and stop at the first match; given a bare ``status IN (...)`` term, a planner
    without statistics may pick an index that starts with the status instead and walk every
    run of those statuses in the table (seconds, at a few hundred thousand runs)."""
    return type_coerce(status, String()).concat("")


def _newest(column: Any, *, finished: bool) -> Any:
    """``column`` of the newest run taken up (finished: of the newest finished run) of the
    assignment being updated: a short backward scan of the slot index."""
    a = ASSIGNMENTS.c
    query = select(column).where(Run.assignment_id == a.id)
    if finished:
        query = query.where(unindexed(Run.status).in_(statuses.FINISHED_VALUES))
    else:
        query = query.where(
            unindexed(Run.status) != statuses.RunStatus.QUEUED.value,
            # A manual run that follows the rollout waits ``pending`` from the request on:
            # not counted until the owner starts or skips it, like a queued one.
            or_(unindexed(Run.status) != statuses.RunStatus.PENDING.value, Run.trigger != "manual"),
        )
    return (
        query.order_by(Run.scheduled_for.desc(), Run.attempt.desc())
        .limit(1)
        .correlate(ASSIGNMENTS)
        .scalar_subquery()
    )


def _status_of(run_id: Any) -> Any:
    return select(Run.status).where(Run.id == run_id).correlate(ASSIGNMENTS).scalar_subquery()


def _refresh_where(session: Session, where: Any) -> None:
    """Recompute the columns of the assignments matching ``where``: the ids first, then
    their statuses by primary key (SQLite's ``SET`` reads a row's old values, so the two
    cannot share one statement without repeating the scans)."""
    a = ASSIGNMENTS.c
    session.execute(
        update(ASSIGNMENTS)
        .where(where)
        .values(
            newest_run_id=_newest(Run.id, finished=False),
            newest_finished_run_id=_newest(Run.id, finished=True),
        )
    )
    session.execute(
        update(ASSIGNMENTS)
        .where(where)
        .values(
            newest_status=_status_of(a.newest_run_id),
            newest_finished_status=_status_of(a.newest_finished_run_id),
        )
    )


def refresh(session: Session, assignment_ids: Iterable[int]) -> None:
    """Recompute the newest-run columns of these assignments from their runs, in the
    caller's transaction (after its run writes are flushed)."""
    ids = sorted(set(assignment_ids))
    session.flush()
    postgres = session.get_bind().dialect.name == "postgresql"
    for start in range(0, len(ids), CHUNK):
        chunk = among(session, ASSIGNMENTS.c.id, ids[start : start + CHUNK])
        if postgres:
            session.execute(
                select(ASSIGNMENTS.c.id).where(chunk).order_by(ASSIGNMENTS.c.id).with_for_update()
            ).all()
        _refresh_where(session, chunk)


def refresh_for_runs(session: Session, run_ids: Iterable[int]) -> None:
    """:func:`refresh` for the assignments of these runs (whose rows still exist)."""
    ids = sorted(set(run_ids))
    session.flush()
    owners: set[int] = set()
    for start in range(0, len(ids), CHUNK):
        owners.update(
            session.scalars(select(Run.assignment_id).where(Run.id.in_(ids[start : start + CHUNK])))
        )
    refresh(session, owners)


def finished(session: Session, run_ids: Iterable[int]) -> None:
    """The completion path's :func:`refresh`, after these runs were recorded. A run that is
    its assignment's newest (nearly every completion) and now has a finished status is
    also its newest finished run, so its columns are set directly (one statement for all,
    by primary key, from the status the row has now); the rest are recomputed."""
    ids = sorted(set(run_ids))
    if not ids:
        return
    session.flush()
    a = ASSIGNMENTS.c
    rows = session.execute(
        select(Run.id, Run.assignment_id, type_coerce(Run.status, String()), a.newest_run_id)
        .join(ASSIGNMENTS, a.id == Run.assignment_id)
        .where(Run.id.in_(ids))
        .order_by(Run.assignment_id)
    ).all()
    direct = [
        {"aid": aid, "rid": rid, "status": status}
        for rid, aid, status, newest in rows
        if newest == rid and status in statuses.FINISHED_VALUES
    ]
    others = {row[1] for row in rows} - {d["aid"] for d in direct}
    if direct:
        if session.get_bind().dialect.name == "postgresql":
            session.execute(
                select(a.id)
                .where(among(session, a.id, [d["aid"] for d in direct]))
                .order_by(a.id)
                .with_for_update()
            ).all()
        session.connection().execute(
            update(ASSIGNMENTS)
            .where(a.id == bindparam("aid"), a.newest_run_id == bindparam("rid"))
            .values(
                newest_status=bindparam("status"),
                newest_finished_run_id=bindparam("rid"),
                newest_finished_status=bindparam("status"),
            ),
            direct,
        )
    refresh(session, others)


def delete_runs(session: Session, run_ids: Sequence[int]) -> None:
    """Delete these runs, and repoint the assignments whose newest (or newest finished)
    run is among them at the newest one left."""
    a = ASSIGNMENTS.c
    owners = select(Run.assignment_id).where(Run.id.in_(run_ids))
    pointing = list(
        session.scalars(
            select(a.id).where(
                a.id.in_(owners),
                or_(a.newest_run_id.in_(run_ids), a.newest_finished_run_id.in_(run_ids)),
            )
        )
    )
    session.execute(delete(Run).where(Run.id.in_(run_ids)))
    if pointing:
        refresh(session, pointing)


def stale(session: Session, limit: int = 100) -> list[int]:
    """The assignments (up to ``limit``) whose newest-run columns disagree with their runs:
    empty when every run write kept them."""
    return list(session.scalars(_STALE, {"limit": limit}))


def _stale_query() -> Select[tuple[int]]:
    """:func:`stale`'s statement, built once (its subquery's columns take longer to build
    than the check of a small database takes to run)."""
    a = ASSIGNMENTS.c
    truth = select(
        a.id.label("id"),
        a.newest_run_id.label("run_id"),
        a.newest_status.label("status"),
        a.newest_finished_run_id.label("finished_id"),
        a.newest_finished_status.label("finished_status"),
        _newest(Run.id, finished=False).label("true_run_id"),
        _newest(Run.id, finished=True).label("true_finished_id"),
    ).subquery("truth")
    newest = Run.__table__.alias("newest_run")
    finished = Run.__table__.alias("finished_run")
    return (
        select(truth.c.id)
        .outerjoin(newest, newest.c.id == truth.c.true_run_id)
        .outerjoin(finished, finished.c.id == truth.c.true_finished_id)
        .where(
            or_(
                truth.c.run_id.is_distinct_from(truth.c.true_run_id),
                truth.c.finished_id.is_distinct_from(truth.c.true_finished_id),
                truth.c.status.is_distinct_from(newest.c.status),
                truth.c.finished_status.is_distinct_from(finished.c.status),
            )
        )
        .order_by(truth.c.id)
        .limit(bindparam("limit"))
    )


_STALE = _stale_query()


def refresh_all(session: Session) -> None:
    """Recompute every assignment's columns (for rows written in bulk outside the store,
    e.g. a benchmark's installation)."""
    _refresh_where(session, ASSIGNMENTS.c.id.is_not(None))
