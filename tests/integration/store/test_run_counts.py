"""Runs per minute and status (``run_counts``), kept by the triggers of migrations 0022 and
0041: every run write moves one count of its shard, queued runs are not counted until they
start, the day's counts cut at the exact time, concurrent writers (of one shard or of
several) lose no count, compaction folds old minutes into one row that a late change still
adds to, the migrations fill them, and the check the suite runs after every test finds a
wrong count (negative controls)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import cast

from alembic import command
from sqlalchemy import Table, delete, insert, text, update

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
    """The counts by minute and status, summed over the shards."""
    out: dict[tuple[datetime, str], int] = {}
    for (minute, status, _), n in rows(app).items():
        out[(minute, status)] = out.get((minute, status), 0) + n
    return {key: n for key, n in out.items() if n}


def rows(app: App) -> dict[tuple[datetime, str, int], int]:
    """The count rows as stored, by (minute, status, shard)."""
    with app.db.read() as session:
        return {
            (r.minute, r.status, r.shard): r.n
            for r in session.query(RunCount.minute, RunCount.status, RunCount.shard, RunCount.n)
        }


def stale(app: App) -> dict[tuple[datetime, str], tuple[int, int]]:
    with app.db.read() as session:
        return run_counts.stale(session)


def result(status: str, clock: FakeClock) -> ExecResult:
    code = 0 if status == "succeeded" else 1 if status == "failed" else None
    return ExecResult(
        cast(ExecutorStatus, status), code, EMPTY_OUTPUT, EMPTY_OUTPUT, clock.now, clock.now, 5
    )


def row(slot: datetime, status: str, attempt: int = 1, shard: int = 0) -> dict[str, object]:
    return {
        "assignment_id": 1, "job_id": 1, "target_id": 1, "job_name": "j", "target_name": "t",
        "origin": "individual", "command": "true", "scheduled_for": slot,
        "trigger": "schedule", "attempt": attempt, "status": status, "node": "test",
        "actor": "scheduler", "created_at": slot, "shard": shard,
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


def at_once(step: Callable[[int], None], n: int) -> None:
    threads = [threading.Thread(target=step, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def compact(app: App, before: datetime, limit: int = 1000) -> int:
    with app.db.session() as session:
        return run_counts.compact(session, before=before, limit=limit)


def test_writers_of_several_shards_keep_a_row_each_and_the_sums_exact(
    app: App, clock: FakeClock
) -> None:
    """Four writers, each of its own shard (as a node's workers are), insert runs of one
    minute at once, then change their status at once: each shard has its own count row
    (no two writers share one), and the sums are exact."""
    slot = clock.now.replace(second=0, microsecond=0)

    def write(shard: int) -> None:
        for k in range(20):
            with app.db.session() as session:
                session.execute(insert(RUNS).values(**row(slot, "running", shard * 100 + k, shard)))

    def finish(shard: int) -> None:
        with app.db.session() as session:
            session.execute(
                update(Run)
                .where(Run.shard == shard, Run.attempt < shard * 100 + 5)
                .values(status="succeeded")
            )

    at_once(write, 4)
    at_once(finish, 4)
    assert rows(app) == {
        **{(slot, "running", shard): 15 for shard in range(4)},
        **{(slot, "succeeded", shard): 5 for shard in range(4)},
    }
    assert counts(app) == {(slot, "running"): 60, (slot, "succeeded"): 20}
    assert stale(app) == {}
    with app.db.read() as session:
        assert run_counts.counts_since(session, slot) == {"running": 60, "succeeded": 20}


def test_compaction_folds_old_minutes_and_a_late_change_still_counts(
    app: App, clock: FakeClock
) -> None:
    """Old minutes become one row per status (shard -1); the recent ones keep their shards.
    A run of a compacted minute that finishes later moves its shard's row again (to -1 for
    ``running``: its +1 is in the compacted row), and the sums stay exact through another
    round, a deletion of the minute's runs, and a count that goes back to 0."""
    old = clock.now.replace(second=0, microsecond=0) - timedelta(minutes=10)
    new = old + timedelta(minutes=9)
    with app.db.session() as session:
        for k, (slot, status, shard) in enumerate(
            [(old, "running", 1), (old, "succeeded", 1), (old, "succeeded", 2), (new, "failed", 3)]
        ):
            session.execute(insert(RUNS).values(**row(slot, status, k, shard)))
    with app.db.read() as session:
        before = run_counts.counts_since(session, old)
    assert compact(app, new) == 3
    assert rows(app) == {
        (old, "running", -1): 1,
        (old, "succeeded", -1): 2,
        (new, "failed", 3): 1,
    }
    assert stale(app) == {}
    with app.db.read() as session:
        assert run_counts.counts_since(session, old) == before
    assert compact(app, new) == 0  # nothing left to fold

    with app.db.session() as session:  # the long run of the compacted minute finishes
        session.execute(update(Run).where(Run.attempt == 0).values(status="failed"))
    assert rows(app) == {
        (old, "running", -1): 1,
        (old, "running", 1): -1,
        (old, "failed", 1): 1,
        (old, "succeeded", -1): 2,
        (new, "failed", 3): 1,
    }
    assert stale(app) == {}
    assert compact(app, new) == 2
    assert rows(app) == {  # running folded to 0 and removed
        (old, "failed", -1): 1,
        (old, "succeeded", -1): 2,
        (new, "failed", 3): 1,
    }
    with app.db.session() as session:  # retention deletes the old minute's runs
        session.execute(delete(Run).where(Run.scheduled_for == old))
    assert stale(app) == {}
    assert compact(app, new) == 3  # failed of shard 1, succeeded of shards 1 and 2: -1 each
    assert rows(app) == {(new, "failed", 3): 1}


def test_compaction_beside_concurrent_writers_keeps_the_sums_exact(
    app: App, clock: FakeClock
) -> None:
    """Writers of four shards change the status of runs of an old minute, one transaction
    per run, while rounds of compaction of a few rows each fold that minute (on PostgreSQL
    truly at once: a round skips the rows a writer holds). After the last round: one row
    per status, and exact."""
    old = clock.now.replace(second=0, microsecond=0) - timedelta(minutes=10)
    with app.db.session() as session:
        session.execute(
            insert(RUNS),
            [row(old, "running", shard * 100 + k, shard) for shard in range(4) for k in range(15)],
        )
    done = threading.Event()

    def change(shard: int) -> None:
        for k in range(15):
            with app.db.session() as session:
                session.execute(
                    update(Run)
                    .where(Run.attempt == shard * 100 + k)
                    .values(status="failed" if k % 3 else "succeeded")
                )

    def rounds() -> None:
        while not done.is_set():  # sleep-in-loop: none; each round is a transaction
            compact(app, old + timedelta(minutes=1), limit=3)

    compactor = threading.Thread(target=rounds)
    compactor.start()
    at_once(change, 4)
    done.set()
    compactor.join()
    assert stale(app) == {}
    while compact(app, old + timedelta(minutes=1), limit=3):
        pass
    assert rows(app) == {(old, "failed", -1): 40, (old, "succeeded", -1): 20}


def test_the_check_finds_a_wrong_compacted_count_and_a_lost_decrement(
    app: App, clock: FakeClock
) -> None:
    """Negative controls for the sums: a compacted row changed by hand is found, and so is
    a shard's negative row dropped (what deleting rows at ``n <= 0``, the rule before
    compaction, would do to a late change)."""
    old = clock.now.replace(second=0, microsecond=0) - timedelta(minutes=10)
    with app.db.session() as session:
        session.execute(insert(RUNS).values(**row(old, "running", 1, shard=5)))
    compact(app, old + timedelta(minutes=1))
    with app.db.session() as session:
        session.execute(update(Run).values(status="succeeded"))
    assert stale(app) == {}
    with app.db.session() as session:
        session.execute(delete(RunCount).where(RunCount.shard == 5, RunCount.n < 0))
    assert stale(app) == {(old, "running"): (1, 0)}
    with app.db.session() as session:
        run_counts.recount(session)
    assert stale(app) == {}
    with app.db.session() as session:
        session.execute(update(RunCount).where(RunCount.shard == -1).values(n=RunCount.n + 1))
    assert stale(app) == {(old, "succeeded"): (2, 1)}
    with app.db.session() as session:
        run_counts.recount(session)
    assert rows(app) == {(old, "succeeded", -1): 1}


def test_housekeeping_compacts_the_counts_and_the_migration_down_folds_them(
    app: App, clock: FakeClock
) -> None:
    """The node's housekeeping folds the minutes older than five minutes; migrated down to
    0040 (one row per minute and status) and up again, the counts are the same."""
    from fleetcron.scheduler.housekeeping import Housekeeping

    now = clock.now.replace(second=0, microsecond=0)
    old, new = now - timedelta(minutes=6), now - timedelta(minutes=4)
    with app.db.session() as session:
        session.execute(
            insert(RUNS),
            [row(slot, "succeeded", k, shard) for k, (slot, shard) in enumerate(
                [(old, 0), (old, 7), (new, 0), (new, 7)]
            )],
        )  # fmt: skip
    Housekeeping(app)()
    assert rows(app) == {
        (old, "succeeded", -1): 2,
        (new, "succeeded", 0): 1,
        (new, "succeeded", 7): 1,
    }
    before = counts(app)
    command.downgrade(alembic_config(engine=app.db.engine), "0040")
    with app.db.read() as session:
        folded = session.execute(text("SELECT minute, status, n FROM run_counts")).all()
    assert len(folded) == 2
    app.db.upgrade()
    assert counts(app) == before
    assert stale(app) == {}
