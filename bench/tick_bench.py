"""Tick cost: one ``RunStore.claim_due(now)`` against a naive scan of every assignment.

For each size (default 1k, 10k and 100k assignments, each an individual job on one of up
to 1,000 local targets) exactly 100 assignments are due: their ``next_fire_at`` is the
current minute and their schedule fires in it; every other assignment has a schedule
that does not fire in this minute and its true next fire time, in the future.

Two designs run side by side in the same process, on the same database, alternating tick
by tick:

* **fleetcron**: ``RunStore.claim_due(now)``, the scheduler's find-due-and-decide
  transaction (indexed read of due assignments, planning, run rows, next_fire_at update).
* **naive**: one transaction that loads every enabled assignment with its job and target,
  checks with the cron engine whether each one's schedule fires in the current minute
  (parsed schedules cached per expression, as fleetcron does) and that it has not fired
  in this minute yet, then writes the same run rows (ORM, flushed for their ids) and
  ``last_fire_at`` for the due ones.

Between ticks, outside the timed section, the 100 due rows are set back and the run rows
created are deleted. Each tick must find exactly 100 due, or the script stops.

Run by hand: ``.venv/bin/python bench/tick_bench.py [--sizes 1000,10000,100000]
[--ticks 20] [--backends sqlite,postgresql] [--explain]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.orm import Session

from _common import (
    catch_up_sequences,
    core_table,
    job_row,
    loadavg,
    make_app,
    median,
    percentile,
    running_postgres,
    table,
    work_dir,
)
from fleetcron.app import App
from fleetcron.cron import CronSchedule, parse
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Assignment, Job, Run, Target

NOW = datetime(2026, 3, 2, 9, 30, 5, tzinfo=UTC)  # a Monday
MINUTE = NOW.replace(second=0)
DUE = 100
MAX_TARGETS = 1000
BATCH = 5000
# Schedules that fire at 09:30 UTC on a Monday (the due ones cycle through these).
DUE_SCHEDULES = ("30 9 * * *", "*/5 * * * *", "30 * * * *", "30 9 * * 1-5", "*/10 9 * * *")

T_TARGETS = core_table(Target)
T_JOBS = core_table(Job)
T_ASSIGNMENTS = core_table(Assignment)


def not_due_schedule(i: int) -> str:
    """A daily (or weekday) schedule at one of the 1,439 minutes other than 09:30."""
    slot = i % 1439
    slot += slot >= 9 * 60 + 30  # skip 09:30
    hour, minute = divmod(slot, 60)
    return f"{minute} {hour} * * {'1-5' if (i // 1439) % 2 else '*'}"


def fill(app: App, n: int) -> list[int]:
    """Insert targets, n individual jobs and n assignments; return the due assignment ids."""
    n_targets = min(n, MAX_TARGETS)
    due_index = {i * n // DUE for i in range(DUE)}
    parsed: dict[str, CronSchedule] = {}

    def schedule(expr: str) -> CronSchedule:
        if expr not in parsed:
            parsed[expr] = parse(expr, "UTC")
        return parsed[expr]

    created = NOW - timedelta(days=1)
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(T_TARGETS),
            [
                {
                    "id": t + 1,
                    "name": f"host{t:05d}",
                    "kind": "local",
                    "host": None,
                    "port": None,
                    "user": None,
                    "private_key_enc": None,
                    "host_key": None,
                    "labels": {},
                    "notes": "",
                    "paired": True,
                    "paired_at": created,
                    "unpaired_at": None,
                    "created_at": created,
                    "updated_at": created,
                }
                for t in range(n_targets)
            ],
        )
        for start in range(0, n, BATCH):
            stop = min(n, start + BATCH)
            jobs, assignments = [], []
            for i in range(start, stop):
                due = i in due_index
                expr = DUE_SCHEDULES[i % len(DUE_SCHEDULES)] if due else not_due_schedule(i)
                target_id = i % n_targets + 1
                jobs.append(
                    job_row(
                        created,
                        id=i + 1,
                        name=f"job{i:06d}",
                        origin="individual",
                        schedule=expr,
                        timezone="UTC",
                        command=f"/usr/local/bin/task-{i % 97} --quiet",
                        target_id=target_id,
                    )
                )
                assignments.append(
                    {
                        "id": i + 1,
                        "job_id": i + 1,
                        "target_id": target_id,
                        "enabled": True,
                        "last_fire_at": None,
                        "next_fire_at": MINUTE if due else schedule(expr).next_after(NOW),
                        "created_at": created,
                        "updated_at": created,
                    }
                )
            # executemany: SQLAlchemy batches it into multi-row INSERTs, compiled once.
            conn.execute(insert(T_JOBS), jobs)
            conn.execute(insert(T_ASSIGNMENTS), assignments)
        if app.db.dialect == "postgresql":
            # Explicit ids leave the sequences behind; autovacuum would analyze in time.
            catch_up_sequences(conn)
    if app.db.dialect == "postgresql":
        with app.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    return sorted(i + 1 for i in due_index)


class NaiveTick:
    """The simple design: every tick, load every enabled assignment and evaluate its cron."""

    COLUMNS = (
        Assignment.id.label("assignment_id"),
        Assignment.last_fire_at,
        Job.id.label("job_id"),
        Job.name.label("job_name"),
        Job.origin,
        Job.schedule,
        Job.timezone,
        Job.command,
        Job.timeout_s,
        Job.overlap,
        Job.catchup,
        Job.jitter_s,
        Job.retries,
        Job.retry_on,
        Job.retry_backoff_s,
        Target.id.label("target_id"),
        Target.name.label("target_name"),
        Target.kind.label("target_kind"),
        Target.host,
        Target.port,
        Target.user,
        Target.private_key_enc,
        Target.host_key,
    )

    def __init__(self, app: App) -> None:
        self.app = app
        self.schedules: dict[tuple[str, str], CronSchedule] = {}

    def schedule(self, expression: str, timezone: str) -> CronSchedule:
        key = (expression, timezone)
        found = self.schedules.get(key)
        if found is None:
            found = self.schedules[key] = parse(expression, timezone)
        return found

    def tick(self, now: datetime) -> int:
        minute = now.replace(second=0, microsecond=0)
        just_before = minute - timedelta(microseconds=1)
        with self.app.db.session() as session:
            rows = session.execute(
                select(*self.COLUMNS)
                .join(Job, Job.id == Assignment.job_id)
                .join(Target, Target.id == Assignment.target_id)
                .where(Assignment.enabled.is_(True))
            ).all()
            due = [
                row
                for row in rows
                if self.schedule(row.schedule, row.timezone).next_after(just_before) == minute
                and (row.last_fire_at is None or row.last_fire_at < minute)
            ]
            runs = [self._run(row, minute, now) for row in due]
            session.add_all(runs)
            session.flush()
            if due:
                session.execute(
                    update(Assignment)
                    .where(Assignment.id.in_([r.assignment_id for r in due]))
                    .values(last_fire_at=now)
                )
            return len(runs)

    def _run(self, row: Any, slot: datetime, now: datetime) -> Run:
        return Run(
            assignment_id=row.assignment_id,
            job_id=row.job_id,
            job_name=row.job_name,
            origin=row.origin,
            command=row.command,
            target_id=row.target_id,
            target_name=row.target_name,
            scheduled_for=slot,
            trigger="schedule",
            attempt=1,
            node="bench",
            actor="scheduler",
            created_at=now,
            status="running",
            started_at=now,
            deadline_at=now + timedelta(seconds=row.timeout_s + 60),
        )


def reset(app: App, due_ids: list[int]) -> None:
    with app.db.session() as session:
        session.execute(delete(Run))
        session.execute(
            update(Assignment)
            .where(Assignment.id.in_(due_ids))
            .values(next_fire_at=MINUTE, last_fire_at=None)
        )


def explain(app: App, session: Session) -> str:
    """The query plan of claim_due's read, as the database prints it."""
    from fleetcron.store.run_dispatch import dispatch_query

    query = (
        dispatch_query()
        .where(Assignment.enabled.is_(True), Assignment.next_fire_at <= NOW)
        .order_by(Assignment.next_fire_at)
        .limit(500)
    )
    compiled = query.compile(dialect=app.db.engine.dialect, compile_kwargs={"literal_binds": True})
    prefix = "EXPLAIN QUERY PLAN " if app.db.dialect == "sqlite" else "EXPLAIN "
    rows = session.execute(text(prefix + str(compiled))).all()
    return "\n".join("    " + " ".join(str(c) for c in row) for row in rows)


def measure(app: App, n: int, ticks: int, warmup: int, show_plan: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    due_ids = fill(app, n)
    fill_s = time.perf_counter() - t0
    store = RunStore(app.db, node="bench")
    naive = NaiveTick(app)
    if show_plan:
        with app.db.session() as session:
            print(f"  claim_due plan ({app.db.dialect}, {n} assignments):")
            print(explain(app, session))
    fleet_times: list[float] = []
    naive_times: list[float] = []
    for i in range(warmup + ticks):
        t = time.perf_counter()
        claimed = store.claim_due(NOW)
        elapsed = time.perf_counter() - t
        if len(claimed.dispatches) != DUE:
            raise SystemExit(f"claim_due dispatched {len(claimed.dispatches)}, expected {DUE}")
        reset(app, due_ids)
        if i >= warmup:
            fleet_times.append(elapsed)
        t = time.perf_counter()
        fired = naive.tick(NOW)
        elapsed = time.perf_counter() - t
        if fired != DUE:
            raise SystemExit(f"naive tick fired {fired}, expected {DUE}")
        reset(app, due_ids)
        if i >= warmup:
            naive_times.append(elapsed)
    return {
        "fill_s": fill_s,
        "fleet": (median(fleet_times), percentile(fleet_times, 95)),
        "naive": (median(naive_times), percentile(naive_times, 95)),
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--explain", action="store_true", help="print claim_due's query plan")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",")
    print(f"load average at start: {loadavg()}")
    print(f"{DUE} due per tick; {args.ticks} timed ticks per design ({args.warmup} warm-up)")
    rows: list[list[object]] = []
    work = work_dir("fleetcron-tick-bench-")
    pg_ctx = running_postgres() if "postgresql" in backends else None
    server = pg_ctx.__enter__() if pg_ctx is not None else None
    try:
        for backend in backends:
            if backend == "postgresql" and server is None:
                print("PostgreSQL binaries not found: skipping PostgreSQL")
                continue
            for n in sizes:
                data_dir = work / f"{backend}-{n}"
                if backend == "sqlite":
                    url = f"sqlite:///{data_dir / 'fleetcron.db'}"
                else:
                    url = server.create_database(f"tick_{n}")  # type: ignore[attr-defined]
                app = make_app(url, data_dir, clock=lambda: NOW)
                try:
                    result = measure(app, n, args.ticks, args.warmup, args.explain)
                finally:
                    app.close()
                    if backend == "postgresql":
                        server.drop_database(f"tick_{n}")  # type: ignore[attr-defined]
                f_med, f_p95 = result["fleet"]
                n_med, n_p95 = result["naive"]
                rows.append(
                    [
                        backend,
                        f"{n:,}",
                        ms(f_med),
                        ms(f_p95),
                        ms(n_med),
                        ms(n_p95),
                        f"{n_med / f_med:.1f}x",
                    ]
                )
                print(
                    f"  {backend} {n:>7,}: filled in {result['fill_s']:.1f} s; "
                    f"fleetcron {ms(f_med)} ms, naive {ms(n_med)} ms (median)",
                    flush=True,
                )
    finally:
        if pg_ctx is not None:
            pg_ctx.__exit__(None, None, None)
    print()
    print(
        table(
            [
                "database",
                "assignments",
                "fleetcron median ms",
                "fleetcron p95 ms",
                "naive median ms",
                "naive p95 ms",
                "naive / fleetcron",
            ],
            rows,
            right=1,
        )
    )
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    main()
