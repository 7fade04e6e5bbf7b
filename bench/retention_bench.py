"""Retention by outcome at a million runs: the scheduler's budgeted rounds until every run
past its limit is gone, on SQLite and PostgreSQL, with a tick's claim measured meanwhile.

The installation: ``--targets`` local targets (default 1,000) and ``--jobs`` bulk jobs on
all of them (default 20: 20,000 assignments), ``--runs`` finished runs per assignment
(default 50: a million rows), their slots spread evenly over the last 120 days. Outcomes:
8 in 10 succeeded, 1 in 10 failed, 1 in 10 skipped. Retention: successes 14 days, failures
90 days, the rest (``retention_days``) 30 days, the newest 5 runs of each assignment always
kept, and job 1 keeping its failures 365 days (its own ``keep_failures_days``): about 870,000
rows to delete.

Each round is ``services.runs.retention.prune`` with the housekeeping's budget
(``PRUNE_BUDGET_S``, 0.25 s), as the scheduler calls it before a tick. Reported per backend:
the rounds, the longest and p95 round (how long one holds the scheduler's database thread),
the longest single write transaction (every transaction's begin-to-commit on the app's
engine, timed by SQLAlchemy events), the wall and the CPU time (user + system, this
process: the Python side; the PostgreSQL server's own CPU is not in it) of all rounds,
rows deleted per CPU second, and a tick's claim (``RunStore.claim_due``, nothing due)
measured from a second thread every 50 ms while the rounds run: p50 and the slowest, which
is how long a tick waits for the database behind a retention transaction. The machine is
shared: CPU time is the figure to compare; wall times are given with the load average.

    .venv/bin/python bench/retention_bench.py [--targets 1000] [--jobs 20] [--runs 50] \\
        [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import event, func, insert, select

from _common import (
    after_bulk_load,
    catch_up_sequences,
    core_table,
    counting_off,
    databases,
    job_row,
    loadavg,
    make_app,
    percentile,
    table,
)
from fleetcron.app import SYSTEM, App
from fleetcron.store.schema import Assignment, Job, Run, Target

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BATCH = 20_000
SPAN = timedelta(days=120)
SETTINGS: dict[str, object] = {
    "retention_days": 30,
    "retention_success_days": 14,
    "retention_failure_days": 90,
    "retention_keep_last": 5,
    # the cap per assignment stays out of the way: this measures the pass by age
    "retention_max_runs": 10_000,
}


def status_of(k: int) -> str:
    return "failed" if k % 10 == 3 else "skipped" if k % 10 == 7 else "succeeded"


def fill(app: App, n_targets: int, n_jobs: int, n_runs: int) -> int:
    """The installation of the module docstring; returns the rows inserted."""
    created = NOW - SPAN - timedelta(days=1)
    total = 0
    with app.db.engine.begin() as conn:
        counting_off(conn)
        conn.execute(
            insert(core_table(Target)),
            [
                {"id": t + 1, "name": f"host{t:05d}", "kind": "local", "paired": True}
                | {"paired_at": created, "created_at": created, "updated_at": created}
                | {"labels": {}, "notes": ""}
                for t in range(n_targets)
            ],
        )
        conn.execute(
            insert(core_table(Job)),
            [
                job_row(
                    created,
                    id=j + 1,
                    name=f"bulk{j:02d}",
                    origin="bulk",
                    schedule="0 * * * *",
                    timezone="UTC",
                    command=f"/usr/local/bin/task-{j}",
                    keep_failures_days=365 if j == 0 else 0,
                )
                for j in range(n_jobs)
            ],
        )
        step = SPAN / n_runs
        n = n_targets * n_jobs
        for start in range(0, n, BATCH // n_runs or 1):
            ids = range(start, min(n, start + (BATCH // n_runs or 1)))
            conn.execute(
                insert(core_table(Assignment)),
                [
                    {"id": i + 1, "job_id": i // n_targets + 1, "target_id": i % n_targets + 1}
                    | {"enabled": True, "next_fire_at": NOW + timedelta(hours=1)}
                    | {"created_at": created, "updated_at": created}
                    for i in ids
                ],
            )
            runs = [
                run_row(i, n_targets, k, NOW - step * (n_runs - k) + timedelta(seconds=i % 60))
                for i in ids
                for k in range(n_runs)
            ]
            conn.execute(insert(core_table(Run)), runs)
            total += len(runs)
        if app.db.dialect == "postgresql":
            catch_up_sequences(conn)
    after_bulk_load(app)
    return total


def run_row(i: int, n_targets: int, k: int, slot: datetime) -> dict[str, Any]:
    job, target = i // n_targets, i % n_targets
    status = status_of(k)
    return (
        {"assignment_id": i + 1, "job_id": job + 1, "target_id": target + 1}
        | {"job_name": f"bulk{job:02d}", "target_name": f"host{target:05d}", "origin": "bulk"}
        | {"command": f"/usr/local/bin/task-{job}", "scheduled_for": slot}
        | {"trigger": "schedule", "attempt": 1, "status": status}
        | {"exit_code": {"succeeded": 0, "failed": 1}.get(status)}
        | {"started_at": slot, "finished_at": slot + timedelta(seconds=1), "duration_ms": 1000}
        | {"node": "bench", "actor": "system", "created_at": slot}
    )


class Transactions:
    """Every transaction's begin-to-commit time on the app's engine (this thread's)."""

    def __init__(self, app: App) -> None:
        self.times: list[float] = []
        self._started: dict[int, float] = {}
        self.thread = threading.get_ident()
        event.listen(app.db.engine, "begin", self._begin)
        event.listen(app.db.engine, "commit", self._end)
        event.listen(app.db.engine, "rollback", self._end)

    def _begin(self, conn: Any) -> None:
        if threading.get_ident() == self.thread:
            self._started[id(conn)] = time.perf_counter()

    def _end(self, conn: Any) -> None:
        started = self._started.pop(id(conn), None)
        if started is not None:
            self.times.append(time.perf_counter() - started)


class Ticks(threading.Thread):
    """A tick's claim (``claim_due`` with nothing due) every 50 ms, timed, until stopped."""

    def __init__(self, app: App) -> None:
        super().__init__(daemon=True)
        from fleetcron.scheduler.service import policy_from
        from fleetcron.store.runs import RunStore

        self.store = RunStore(app.db, node="bench", policy=policy_from(app), clock=lambda: NOW)
        self.times: list[float] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            t0 = time.perf_counter()
            self.store.claim_due(NOW)
            self.times.append(time.perf_counter() - t0)


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def measure(app: App) -> dict[str, Any]:
    """Budgeted rounds until one completes, with the ticks measured meanwhile."""
    from fleetcron.scheduler.housekeeping import PRUNE_BUDGET_S
    from fleetcron.services.runs import retention

    with app.db.read() as session:
        before = session.scalar(select(func.count()).select_from(Run)) or 0
    expected = retention.prune(app, SYSTEM, dry_run=True)
    ticks = Ticks(app)
    transactions = Transactions(app)
    rounds: list[float] = []
    by_outcome = dict.fromkeys(retention.OUTCOMES, 0)
    ticks.start()
    cpu0, wall0 = cpu_s(), time.perf_counter()
    while True:
        r0 = time.perf_counter()
        result = retention.prune(app, SYSTEM, budget_s=PRUNE_BUDGET_S)
        rounds.append(time.perf_counter() - r0)
        for outcome, n in result.by_outcome.items():
            by_outcome[outcome] += n
        if result.complete:
            break
    cpu, wall = cpu_s() - cpu0, time.perf_counter() - wall0
    ticks.stopping.set()
    ticks.join()
    with app.db.read() as session:
        after = session.scalar(select(func.count()).select_from(Run)) or 0
    deleted = before - after
    assert deleted == expected.runs_by_age, (deleted, expected)
    return {
        "before": before,
        "deleted": deleted,
        "by_outcome": by_outcome,
        "rounds": len(rounds),
        "longest_round_ms": max(rounds) * 1000,
        "p95_round_ms": percentile(rounds, 95) * 1000,
        "longest_tx_ms": max(transactions.times) * 1000,
        "wall_s": wall,
        "cpu_s": cpu,
        "rows_per_cpu_s": deleted / cpu if cpu else 0.0,
        "tick_p50_ms": percentile(ticks.times, 50) * 1000 if ticks.times else 0.0,
        "tick_max_ms": max(ticks.times) * 1000 if ticks.times else 0.0,
        "ticks": len(ticks.times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    print(f"load average at start: {loadavg()}")
    rows = []
    for backend, url, directory in databases(args.backends, "retention-bench"):
        app = make_app(url, directory, clock=lambda: NOW, **SETTINGS)
        t0 = time.perf_counter()
        total = fill(app, args.targets, args.jobs, args.runs)
        print(f"  {backend}: {total:,} runs in {time.perf_counter() - t0:.0f} s", flush=True)
        m = measure(app)
        outcome = m["by_outcome"]
        rows.append(
            [
                backend,
                f"{m['before']:,}",
                f"{m['deleted']:,} ({outcome['succeeded']:,} / {outcome['failed']:,} / "
                f"{outcome['other']:,})",
                f"{m['rounds']:,}",
                f"{m['p95_round_ms']:.0f} / {m['longest_round_ms']:.0f}",
                f"{m['longest_tx_ms']:.0f}",
                f"{m['wall_s']:.1f}",
                f"{m['cpu_s']:.1f}",
                f"{m['rows_per_cpu_s']:,.0f}",
                f"{m['tick_p50_ms']:.1f} / {m['tick_max_ms']:.0f} ({m['ticks']:,})",
            ]
        )
        print(f"  {rows[-1]}", flush=True)
        app.close()
    print(f"load average at end: {loadavg()}")
    print()
    print(
        table(
            [
                "backend",
                "runs",
                "deleted (succeeded / failed / other)",
                "rounds",
                "round p95 / max ms",
                "longest tx ms",
                "wall s",
                "CPU s",
                "rows / CPU s",
                "tick claim p50 / max ms (n)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
