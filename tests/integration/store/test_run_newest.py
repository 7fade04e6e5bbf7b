"""The newest run of each assignment, kept on the assignment (``store/run_newest.py``):
every run write moves it, in any order of writes; retention repoints it; migration 0021
fills it; and the check the suite runs after every test (:func:`run_newest.stale`) finds
a column that is wrong (the negative controls)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any, cast

from alembic import command
from sqlalchemy import Table, delete, insert, select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.statuses import ExecutorStatus, RunStatus
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs_svc
from fleetcron.services.runs import retention
from fleetcron.services.targets import edit as targets
from fleetcron.store import run_newest
from fleetcron.store.db import alembic_config
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Assignment, Run
from integration.history.runs_helper import fire_minutes
from sql_statements import statements

RUNS = cast(Table, Run.__table__)

Columns = tuple[int | None, RunStatus | None, int | None, RunStatus | None]


def columns(app: App) -> dict[int, Columns]:
    """assignment id -> (newest run, its status, newest finished run, its status)."""
    with app.db.read() as session:
        return {
            row[0]: (row[1], row[2], row[3], row[4])
            for row in session.execute(
                select(
                    Assignment.id,
                    Assignment.newest_run_id,
                    Assignment.newest_status,
                    Assignment.newest_finished_run_id,
                    Assignment.newest_finished_status,
                )
            )
        }


def truth(app: App) -> dict[int, Columns]:
    """The same, computed in Python from every run (the oracle)."""
    with app.db.read() as session:
        runs = session.execute(
            select(Run.id, Run.assignment_id, Run.scheduled_for, Run.attempt, Run.status)
        ).all()
        ids = list(session.scalars(select(Assignment.id)))
    out: dict[int, Columns] = {}
    for aid in ids:
        mine = sorted((r for r in runs if r.assignment_id == aid), key=lambda r: (r[2], r[3]))
        finished = [r for r in mine if r.status in statuses.FINISHED]
        newest, done = (mine[-1] if mine else None), (finished[-1] if finished else None)
        out[aid] = (
            newest.id if newest else None,
            newest.status if newest else None,
            done.id if done else None,
            done.status if done else None,
        )
    return out


def result(status: str, clock: FakeClock) -> ExecResult:
    code = 0 if status == "succeeded" else 1 if status == "failed" else None
    return ExecResult(
        cast(ExecutorStatus, status), code, EMPTY_OUTPUT, EMPTY_OUTPUT, clock.now, clock.now, 5
    )


def one_job(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", JobSpec("* * * * *", "true"), target="box")


def test_each_write_of_a_run_moves_the_columns(app: App, admin: Actor, clock: FakeClock) -> None:
    one_job(app, admin)
    store = RunStore(app.db, node="test", clock=clock)
    [aid] = columns(app)
    assert columns(app)[aid] == (None, None, None, None)  # never ran

    clock.advance(minutes=1)
    [first] = store.claim_due(clock.now).dispatches
    assert columns(app)[aid] == (first.run_id, RunStatus.RUNNING, None, None)
    store.finish([(first.run_id, result("failed", clock))])
    failed = (first.run_id, RunStatus.FAILED)
    assert columns(app)[aid] == (*failed, *failed)

    clock.advance(minutes=1)
    [second] = store.claim_due(clock.now).dispatches
    # Running: the newest run, but the newest *finished* one is still the failure.
    assert columns(app)[aid] == (second.run_id, RunStatus.RUNNING, *failed)
    store.cancel([(second.run_id, result("failed", clock), "olivia")])
    # Cancelled is not finished (it did not run to an outcome): health still sees the failure.
    assert columns(app)[aid] == (second.run_id, RunStatus.CANCELLED, *failed)

    clock.advance(minutes=1)
    [third] = store.claim_due(clock.now).dispatches
    store.finish([(third.run_id, result("succeeded", clock))])
    ok = (third.run_id, RunStatus.SUCCEEDED)
    assert columns(app)[aid] == (*ok, *ok)
    assert columns(app) == truth(app)


def test_a_run_now_request_writes_no_assignment_and_its_start_moves_the_columns(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    """A queued "run now" may be written on either node of a replicated pair, where an
    assignment row written by a node that is not the owner would replace the owner's
    (logical replication applies whole rows): the request only inserts, and the queued
    run is counted once the owner starts it."""
    one_job(app, admin)
    fire_minutes(app, clock, [[("failed", 5)]])
    [aid] = columns(app)
    before = columns(app)[aid]
    with statements(app) as issued:
        [queued] = runs_svc.request_run(app, admin, "reload")
    assert not [s for s in issued if "assignments" in s and not s.lstrip().startswith("SELECT")]
    assert columns(app)[aid] == before

    store = RunStore(app.db, node="test", clock=clock)
    [started] = store.claim_queued(clock.now)
    assert started.run_id == queued
    assert columns(app)[aid] == (queued, RunStatus.RUNNING, *before[2:])


def test_runs_written_in_any_order_give_the_same_columns(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    """Slots and attempts inserted shuffled (a retry of an older slot written after a newer
    slot, a status changed after newer rows exist): the refresh recomputes, so the order
    of the writes does not matter; a second refresh changes nothing."""
    one_job(app, admin)
    [aid] = columns(app)
    base = clock.now.replace(second=0, microsecond=0)
    shapes = [
        (base + timedelta(minutes=slot), attempt, status)
        for slot, attempt, status in [
            (0, 1, "failed"),
            (0, 2, "succeeded"),
            (1, 1, "connect_error"),
            (2, 1, "skipped"),
            (2, 2, "missed"),
            (3, 1, "timed_out"),
            (3, 2, "running"),
        ]
    ]
    rng = random.Random(7)
    for trial in range(5):
        with app.db.session() as session:
            session.execute(delete(Run))
        order = shapes[:]
        rng.shuffle(order)
        for slot, attempt, status in order:
            with app.db.session() as session:
                run_id = session.scalar(
                    insert(RUNS)
                    .values(**_run_row(aid, slot, attempt, status, clock))
                    .returning(RUNS.c.id)
                )
                assert run_id is not None
                run_newest.refresh_for_runs(session, [run_id])
            assert columns(app) == truth(app), (trial, order)
        newest = columns(app)[aid]
        assert newest[1] is RunStatus.RUNNING and newest[3] is RunStatus.TIMED_OUT
        with app.db.session() as session:
            run_newest.refresh(session, [aid])
        assert columns(app)[aid] == newest


def test_retention_repoints_an_assignment_whose_newest_run_it_deletes(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    one_job(app, admin)
    [aid] = columns(app)
    fire_minutes(app, clock, [[("failed", 5)], [("succeeded", 5)]])
    with app.db.read() as session:
        older, newer = session.scalars(select(Run.id).order_by(Run.id)).all()
    assert columns(app)[aid] == (newer, RunStatus.SUCCEEDED, newer, RunStatus.SUCCEEDED)

    # Keep one run per assignment: the older goes, nothing points at it.
    object.__setattr__(app.settings, "retention_max_runs", 1)
    assert retention.prune(app, admin).runs_by_count == 1
    assert columns(app)[aid] == (newer, RunStatus.SUCCEEDED, newer, RunStatus.SUCCEEDED)

    # Past the retention age, the newest goes too: the assignment points at nothing.
    clock.advance(days=app.settings.retention_days + 1)
    assert retention.prune(app, admin).runs_by_age == 1
    assert columns(app)[aid] == (None, None, None, None)
    assert older != newer


def test_the_check_finds_a_column_no_run_write_kept(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    """Negative controls for the check the suite runs after every test: a wrong status, a
    pointer at a deleted run, and a run written past the store are each found; a refresh
    puts them right."""
    one_job(app, admin)
    [aid] = columns(app)
    fire_minutes(app, clock, [[("succeeded", 5)], [("failed", 5)]])
    with app.db.read() as session:
        assert run_newest.stale(session) == []

    with app.db.session() as session:
        session.execute(
            update(Assignment).where(Assignment.id == aid).values(newest_status="succeeded")
        )
    with app.db.read() as session:
        assert run_newest.stale(session) == [aid]

    with app.db.session() as session:
        run_newest.refresh(session, [aid])
        newest = session.scalar(select(Assignment.newest_run_id))
        session.execute(delete(Run).where(Run.id == newest))  # past the store
    with app.db.read() as session:
        assert run_newest.stale(session) == [aid]

    with app.db.session() as session:
        run_newest.refresh(session, [aid])
        slot = clock.now.replace(second=0, microsecond=0) + timedelta(minutes=5)
        session.execute(insert(RUNS).values(**_run_row(aid, slot, 1, "running", clock)))
    with app.db.read() as session:
        assert run_newest.stale(session) == [aid]
    with app.db.session() as session:
        run_newest.refresh(session, [aid])
    with app.db.read() as session:
        assert run_newest.stale(session) == []


def test_the_migration_fills_the_columns_from_the_runs(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    """Migrated down to 0020 (the columns go) and up again: 0021 computes them from the
    runs, and they agree with the oracle."""
    targets.add_target(app, admin, TargetSpec("box2", TargetKind.LOCAL))
    one_job(app, admin)
    jobs.add_job(app, admin, "bulk", JobSpec("* * * * *", "echo bulk"), bulk=True)
    fire_minutes(
        app,
        clock,
        [[("failed", 5)] * 3, [("succeeded", 5), ("timed_out", 5), ("failed", 5)]],
    )
    expected = truth(app)
    assert any(c[3] is RunStatus.TIMED_OUT for c in expected.values())
    command.downgrade(alembic_config(engine=app.db.engine), "0020")
    app.db.upgrade()
    assert columns(app) == expected
    with app.db.read() as session:
        assert run_newest.stale(session) == []


def _run_row(aid: int, slot: Any, attempt: int, status: str, clock: FakeClock) -> dict[str, object]:
    ended = status not in ("queued", "pending", "running")
    return {
        "assignment_id": aid,
        "job_id": 1,
        "target_id": 1,
        "job_name": "reload",
        "target_name": "box",
        "origin": "individual",
        "command": "true",
        "scheduled_for": slot,
        "trigger": "schedule",
        "attempt": attempt,
        "status": status,
        "started_at": slot,
        "finished_at": slot if ended else None,
        "node": "test",
        "actor": "scheduler",
        "created_at": clock.now,
    }
