"""Cost of one ``health.summary()`` call on a large fleet.

The fleet: ``--targets`` local targets (default 5,000) with ``--jobs`` individual jobs each
(default 50: 250,000 assignments), and ``--runs`` finished runs per assignment, one per
minute (default 3). One target in a hundred is unreachable: every run of its jobs after
the first is a ``connect_error``. One assignment in a hundred on the other targets fails
its command (``failed``) from its second run on. The rest succeed. Rows are inserted in
bulk (not through the scheduler): this measures the read, not the writes.

Reported per backend and ``--limit`` (lines of each cause listed; 0: all): the fill time,
the median and worst of ``--calls`` summary calls, the number of SQL statements one call
issues, what it counted and listed, and (PostgreSQL, ``--explain``) ``EXPLAIN ANALYZE`` of
each statement.

``--baseline FILE`` also times another version of ``services/health/report.py`` on the same data
(e.g. ``git show fefc935:src/fleetcron/services/health/report.py > /tmp/old_health.py``: the
version with a window over every finished run and two queries per failing assignment).

Run by hand: ``.venv/bin/python bench/health_bench.py [--targets 5000] [--jobs 50]
[--runs 3] [--calls 5] [--limit 20,1000,0] [--backends sqlite,postgresql] [--explain]
[--baseline FILE]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import event, insert

from _common import (
    after_bulk_load,
    core_table,
    counting_off,
    databases,
    loadavg,
    make_app,
    median,
    table,
)
from fleetcron.app import Actor, App
from fleetcron.services.health import report as health
from fleetcron.store.schema import Assignment, Job, Run, Target

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
BATCH = 20_000
VIEWER = Actor("bench", "viewer")


def fill(app: App, n_targets: int, n_jobs: int, n_runs: int) -> None:
    created = START - timedelta(days=1)
    with app.db.engine.begin() as conn:
        counting_off(conn)  # counted anew after the load
        conn.execute(
            insert(core_table(Target)),
            [
                {"id": t + 1, "name": f"host{t:05d}", "kind": "local", "paired": True}
                | {"created_at": created, "updated_at": created, "labels": {}, "notes": ""}
                for t in range(n_targets)
            ],
        )
        n = n_targets * n_jobs
        for start in range(0, n, BATCH):
            ids = range(start, min(n, start + BATCH))
            conn.execute(
                insert(core_table(Job)),
                [
                    {
                        "id": i + 1,
                        "name": f"job{i:07d}",
                        "origin": "individual",
                        "schedule": "* * * * *",
                        "timezone": "UTC",
                        "command": f"/usr/local/bin/task-{i}",
                        "target_id": i // n_jobs + 1,
                        "timeout_s": 300,
                        "created_by": "bench",
                        "updated_by": "bench",
                        "created_at": created,
                        "updated_at": created,
                    }
                    for i in ids
                ],
            )
            conn.execute(
                insert(core_table(Assignment)),
                [
                    {
                        "id": i + 1,
                        "job_id": i + 1,
                        "target_id": i // n_jobs + 1,
                        "enabled": True,
                        # disabled-looking future: not late, so the read is about failures
                        "next_fire_at": START + timedelta(days=1),
                        "created_at": created,
                        "updated_at": created,
                    }
                    for i in ids
                ],
            )
            runs = []
            for i in ids:
                target = i // n_jobs
                for k in range(n_runs):
                    slot = START + timedelta(minutes=k)
                    if target % 100 == 0 and k > 0:
                        status, error, code = "connect_error", "connection refused: x:22", None
                    elif target % 100 != 0 and i % 100 == 1 and k > 0:
                        status, error, code = "failed", None, 1
                    else:
                        status, error, code = "succeeded", None, 0
                    runs.append(
                        {
                            "assignment_id": i + 1,
                            "job_id": i + 1,
                            "target_id": target + 1,
                            "job_name": f"job{i:07d}",
                            "target_name": f"host{target:05d}",
                            "origin": "individual",
                            "command": "x",
                            "scheduled_for": slot,
                            "trigger": "schedule",
                            "attempt": 1,
                            "status": status,
                            "exit_code": code,
                            "error": error,
                            "started_at": slot,
                            "finished_at": slot + timedelta(seconds=1),
                            "duration_ms": 1000,
                            "node": "bench",
                            "actor": "system",
                            "created_at": slot,
                        }
                    )
            conn.execute(insert(core_table(Run)), runs)
    after_bulk_load(app)


def load_module(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("baseline_health", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def measure(
    app: App, calls: int, explain: bool, module: Any = health, limit: int | None = None
) -> dict[str, Any]:
    """Times ``calls`` summaries; this version with ``limit`` lines of each cause (None:
    all), a baseline as it is (it has no limit)."""
    statements: list[tuple[str, Any]] = []
    bounded = {"limit": limit} if hasattr(module, "check_limit") else {}

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        statements.append((statement, parameters))

    event.listen(app.db.engine, "before_cursor_execute", capture)
    result = module.summary(app, VIEWER, **bounded)
    event.remove(app.db.engine, "before_cursor_execute", capture)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        module.summary(app, VIEWER, **bounded)
        times.append(time.perf_counter() - t0)
    if explain and app.db.dialect == "postgresql":
        with app.db.engine.connect() as conn:
            for statement, parameters in statements:
                if not statement.lstrip().upper().startswith(("SELECT", "WITH")):
                    continue
                plan = conn.exec_driver_sql(
                    "EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters
                ).all()
                print("\n".join(row[0] for row in plan), end="\n\n")
    kinds: dict[str, int] = {}
    for line in getattr(result, "grouped", []):
        kinds[line.kind] = kinds.get(line.kind, 0) + 1
    if hasattr(result, "groups"):  # bounded: the counts are the groups' totals
        kinds = {g.kind: g.total for g in result.groups if g.total}
    return {
        "median_s": median(times),
        "max_s": max(times),
        "statements": len(statements),
        "problems": getattr(result, "problem_count", len(result.problems)),
        "grouped": kinds,
        "listed": len(result.grouped),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument(
        "--baseline", help="another services/health/report.py to time on the same data"
    )
    parser.add_argument(
        "--limit",
        default=",".join(str(n) for n in (health.DEFAULT_LIMIT, health.LIMIT_MAX, 0)),
        help="lines of each cause listed, one measurement each (0: all); default 20,1000,0",
    )
    args = parser.parse_args()
    limits = [int(n) or None for n in args.limit.split(",")]
    versions: list[tuple[str, Any]] = [("this", health)]
    if args.baseline:
        versions.append(("baseline", load_module(args.baseline)))
    rows = []
    print(f"load average before: {loadavg()}")
    for backend, url, directory in databases(args.backends, "health-bench"):
        app = make_app(url, directory, clock=lambda: START + timedelta(hours=1))
        t0 = time.perf_counter()
        fill(app, args.targets, args.jobs, args.runs)
        filled = time.perf_counter() - t0
        runs_of = [
            (
                f"{version}, limit {limit or 'all'}" if module is health else version,
                module,
                limit,
            )
            for version, module in versions
            for limit in (limits if module is health else [None])
        ]
        for version, module, limit in runs_of:
            explain = args.explain and module is health and limit == limits[0]
            found = measure(app, args.calls, explain, module, limit)
            rows.append(
                (
                    f"{backend} ({version})",
                    f"{args.targets * args.jobs:,}",
                    f"{args.targets * args.jobs * args.runs:,}",
                    f"{filled:.0f} s",
                    f"{found['median_s'] * 1000:.0f} ms",
                    f"{found['max_s'] * 1000:.0f} ms",
                    found["statements"],
                    f"{found['problems']:,}",
                    ", ".join(f"{k} {v:,}" for k, v in sorted(found["grouped"].items())),
                    f"{found['listed']:,}",
                )
            )
        app.close()
    print(
        table(
            [
                "backend",
                "assignments",
                "runs",
                "fill",
                "summary median",
                "max",
                "statements",
                "job×target problems",
                "grouped lines (counted)",
                "lines listed",
            ],
            rows,
        )
    )
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
