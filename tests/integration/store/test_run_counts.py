"""Runs per minute and status (``run_counts``), kept by the triggers of migration 0022:
every run write moves one count, queued runs are not counted until they start, the day's
counts cut at the exact time, concurrent writers lose no count, the migration fills them,
and the check the suite runs after every test finds a wrong count (negative controls)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import cast

from alembic import command
from sqlalchemy import Table, insert, text, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.statuses import ExecutorStatus
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs_svc
from fleetcron.services.runs import retention
from fleetcron.services.targets import edit as targets
from fleetcron.store import run_counts
from fleetcron.store.db import alembic_config
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Run, RunCount

RUNS = cast(Table, Run.__table__)


def counts(app: App) -> dict[tuple[datetime, str], int]:
    with app.db.read() as session:
        return {
            (r.minute, r.status): r.n
            for r in session.query(RunCount.minute, RunCount.status, RunCount.n)
        }


def stale(app: App) -> dict[tuple[datetime, str], tuple[int, int]]:
    with app.db.read() as session:
        return run_counts.stale(session)


def result(status: str, clock: FakeClock) -> ExecResult:
    code = 0 if status == "succeeded" else 1 if status == "failed" else None
    return ExecResult(
        cast(ExecutorStatus, status), code, EMPTY_OUTPUT, EMPTY_OUTPUT, clock.now, clock.now, 5
    )


def row(slot: datetime, status: str, attempt: int = 1) -> dict[str, object]:
    return {
        "assignment_id": 1, "job_id": 1, "target_id": 1, "job_name": "j", "target_name": "t",
        "origin": "individual", "command": "true", "scheduled_for": slot,
        "trigger": "schedule", "attempt": attempt, "status": status, "node": "test",
        "actor": "scheduler", "created_at": slot,
    }  # fmt: skip


def test_each_run_write_moves_one_count_and_queued_runs_wait_for_their_start(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", JobSpec("* * * * *", "true"), target="box")
    store = RunStore(app.db, node="test", clock=clock)
    clock.advance(minutes=1)
    minute = clock.now.replace(second=0, microsecond=0)
    [first] = store.claim_due(clock.now).dispatches
    assert counts(app) == {(minute, "running"): 1}
    store.finish([(first.run_id, result("failed", clock))])
    assert counts(app) == {(minute, "failed"): 1}  # the running count went to 0 and away

    [queued] = runs_svc.request_run(app, admin, "reload")
    assert counts(app) == {(minute, "failed"): 1}  # not counted while queued
    [started] = store.claim_queued(clock.now)
    manual_minute = clock.now.replace(second=0, microsecond=0)  # "run now" is for now
    assert started.run_id == queued
    store.cancel([(queued, result("failed", clock), "olivia")])
    expected = {(minute, "failed"): 1, (manual_minute, "cancelled"): 1}
    assert counts(app) == expected
    assert stale(app) == {}

    clock.advance(days=app.settings.retention_days + 1)
    assert retention.prune(app, admin).runs_by_age == 2
    assert counts(app) == {}


def test_the_days_counts_cut_at_the_exact_time(app: App, clock: FakeClock) -> None:
    base = clock.now.replace(second=0, microsecond=0)
    with app.db.session() as session:
        for slot, status in [
            (base, "succeeded"),  # before the cut, in its minute
            (base + timedelta(seconds=40), "failed"),  # after it, in the same minute
            (base + timedelta(minutes=1), "succeeded"),
            (base + timedelta(minutes=2), "queued"),  # never counted
        ]:
            session.execute(insert(RUNS).values(**row(slot, status)))
    with app.db.read() as session:
        assert run_counts.counts_since(session, base + timedelta(seconds=20)) == {
            "failed": 1,
            "succeeded": 1,
        }
        assert run_counts.counts_since(session, base) == {"failed": 1, "succeeded": 2}
        assert run_counts.counts_since(session, base + timedelta(minutes=3)) == {}


def test_concurrent_writers_lose_no_count(app: App, clock: FakeClock) -> None:
    """Four writers insert runs of one minute at once, each in its own transactions (on
    PostgreSQL truly at once: the increments of one row wait for each other, never replace
    each other); then half of them change status at once."""
    slot = clock.now.replace(second=0, microsecond=0)

    def write(offset: int) -> None:
        for k in range(25):
            with app.db.session() as session:
                session.execute(insert(RUNS).values(**row(slot, "running", offset * 100 + k)))

    def finish(offset: int) -> None:
        with app.db.session() as session:
            session.execute(
                update(Run)
                .where(Run.attempt >= offset * 100, Run.attempt < offset * 100 + 25)
                .values(status="succeeded")
            )

    for step, n in ((write, 4), (finish, 2)):
        threads = [threading.Thread(target=step, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert counts(app) == {(slot, "running"): 50, (slot, "succeeded"): 50}
    assert stale(app) == {}


def test_the_check_finds_a_wrong_count_and_a_write_no_trigger_counted(
    app: App, clock: FakeClock
) -> None:
    """Negative controls: a count changed by hand, and a run written while the triggers
    are off, are both found."""
    slot = clock.now.replace(second=0, microsecond=0)
    with app.db.session() as session:
        session.execute(insert(RUNS).values(**row(slot, "succeeded")))
    assert stale(app) == {}
    with app.db.session() as session:
        session.execute(update(RunCount).values(n=2))
    assert stale(app) == {(slot, "succeeded"): (2, 1)}
    with app.db.session() as session:
        session.execute(update(RunCount).values(n=1))
        off = (
            "DROP TRIGGER run_counts_insert"
            if app.db.dialect == "sqlite"
            else "ALTER TABLE runs DISABLE TRIGGER run_counts_insert"
        )
        session.execute(text(off))
        session.execute(insert(RUNS).values(**row(slot, "failed", attempt=2)))
    assert stale(app) == {(slot, "failed"): (0, 1)}
    # Migrated down and up: the triggers again, and the counts made anew from the runs.
    if app.db.dialect == "postgresql":
        with app.db.session() as session:
            session.execute(text("ALTER TABLE runs ENABLE TRIGGER run_counts_insert"))
    command.downgrade(alembic_config(engine=app.db.engine), "0021")
    app.db.upgrade()
    assert stale(app) == {}


def test_the_migration_counts_the_runs_there_are(app: App, admin: Actor, clock: FakeClock) -> None:
    base = clock.now.replace(second=0, microsecond=0)
    with app.db.session() as session:
        for k, status in enumerate(["succeeded", "failed", "failed", "queued", "missed"]):
            session.execute(insert(RUNS).values(**row(base + timedelta(minutes=k % 2), status, k)))
    before = counts(app)
    assert sum(before.values()) == 4
    command.downgrade(alembic_config(engine=app.db.engine), "0021")
    app.db.upgrade()
    assert counts(app) == before
