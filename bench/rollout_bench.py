"""Rollout cost: one slot of a bulk job rolled out over N targets (default 5,000).

What the owner pays for a rollout, on SQLite and PostgreSQL:

* **fire**: ``RunStore.claim_due(now)`` recording every target's row as ``pending`` (in
  batches of ``claim_batch``, as the scheduler's tick does);
* **start wave**: ``RunStore.advance_rollouts(now)`` deciding the slot and starting the
  next wave (``batch: 10%``: 500 rows become ``running`` with their claims);
* **idle tick**: the same call while the wave is still running, when nothing can start:
  what every tick costs during a rollout;
* **halt**: the call that finds ``max_failures`` reached and skips every pending row.

Targets and the job are inserted directly (like ``tick_bench.py``); the rows go through
the run store. Run by hand: ``.venv/bin/python bench/rollout_bench.py [--targets 5000]
[--backends sqlite,postgresql] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import delete, insert, text, update

from _common import (
    catch_up_sequences,
    core_table,
    job_row,
    loadavg,
    make_app,
    median,
    running_postgres,
    table,
    work_dir,
)
from fleetcron.app import App
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Assignment, Job, Run, Target

NOW = datetime(2026, 3, 2, 9, 30, 5, tzinfo=UTC)
SLOT = NOW.replace(second=0)
T_TARGETS = core_table(Target)
T_JOBS = core_table(Job)
T_ASSIGNMENTS = core_table(Assignment)


def fill(app: App, n: int) -> None:
    created = NOW - timedelta(days=1)
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(T_TARGETS),
            [
                {
                    "id": t + 1,
                    "name": f"host{t:05d}",
                    "kind": "local",
                    "labels": {},
                    "notes": "",
                    "paired": True,
                    "paired_at": created,
                    "created_at": created,
                    "updated_at": created,
                }
                for t in range(n)
            ],
        )
        conn.execute(
            insert(T_JOBS),
            [
                job_row(
                    created,
                    id=1,
                    name="reload",
                    origin="bulk",
                    schedule="30 9 * * *",
                    timezone="UTC",
                    command="/usr/sbin/fwconsole reload",
                    batch="10%",
                    batch_pause_s=0,
                    max_failures="1",
                    canary="",
                )
            ],
        )
        conn.execute(
            insert(T_ASSIGNMENTS),
            [
                {
                    "id": t + 1,
                    "job_id": 1,
                    "target_id": t + 1,
                    "enabled": True,
                    "next_fire_at": SLOT,
                    "created_at": created,
                    "updated_at": created,
                }
                for t in range(n)
            ],
        )
        if app.db.dialect == "postgresql":
            catch_up_sequences(conn)


def reset(app: App) -> None:
    with app.db.session() as session:
        session.execute(delete(Run))
        session.execute(update(Assignment).values(next_fire_at=SLOT))
    if app.db.dialect == "postgresql":
        with app.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))


def result(ok: bool) -> ExecResult:
    return ExecResult(
        "succeeded" if ok else "failed", 0 if ok else 1, EMPTY_OUTPUT, EMPTY_OUTPUT, NOW, NOW, 5
    )


class Timer:
    """Wall time and this thread's CPU time (the part a loaded machine does not inflate)."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.thread_time() - self.cpu


def one_round(app: App, n: int) -> dict[str, Timer]:
    store = RunStore(app.db, node="bench")
    reset(app)
    with Timer() as fire:
        while store.claim_due(NOW, limit=app.settings.claim_batch).assignments:
            pass
    with Timer() as start:
        wave = store.advance_rollouts(NOW).dispatches
    assert len(wave) == -(-n // 10), len(wave)
    with Timer() as idle:
        assert store.advance_rollouts(NOW).dispatches == []
    store.finish([(d.run_id, result(i != 0)) for i, d in enumerate(wave)])
    with Timer() as halt:
        step = store.advance_rollouts(NOW + timedelta(seconds=1))
    assert step.halted and step.halted[0].skipped == n - len(wave), step.halted
    return {"fire": fire, "start": start, "idle": idle, "halt": halt}


def run(backend: str, url: str, n: int, rounds: int) -> list[list[object]]:
    app = make_app(url, work_dir(f"rollout-{backend}"), lambda: NOW)
    try:
        fill(app, n)
        samples = [one_round(app, n) for _ in range(rounds)]
    finally:
        app.close()
    return [
        [
            backend,
            n,
            what,
            f"{median([s[what].wall for s in samples]) * 1000:.0f}",
            f"{median([s[what].cpu for s in samples]) * 1000:.0f}",
        ]
        for what in ("fire", "start", "idle", "halt")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=5000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: list[list[object]] = []
    backends = args.backends.split(",")
    if "sqlite" in backends:
        directory = work_dir("rollout-sqlite-db")
        rows += run("sqlite", f"sqlite:///{directory / 'bench.db'}", args.targets, args.rounds)
    if "postgresql" in backends:
        with running_postgres() as server:
            if server is None:
                print("PostgreSQL binaries not found; skipped", file=sys.stderr)
            else:
                url = server.create_database("rollout_bench")  # type: ignore[attr-defined]
                rows += run("postgresql", url, args.targets, args.rounds)
    print(f"load average before: {loadavg()}")
    print(table(["backend", "targets", "step", "wall ms", "CPU ms"], rows, right=3))


if __name__ == "__main__":
    main()
