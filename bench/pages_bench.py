"""Server time of the pages and API calls an operator uses, on a large installation, and the
delete throughput of the retention round.

The installation: ``--targets`` SSH targets (default 5,000), ``--jobs`` bulk jobs on all of
them (default 50: 250,000 assignments) and ``--runs`` finished runs per assignment
(default 4: a million run rows), one slot a minute. One target in a hundred is
unreachable (its runs after the first are ``connect_error``), one assignment in a hundred
fails its command; the rest succeed. The oldest slot of every assignment is older than
the retention age (``retention_days``, 90 by default): a quarter of the rows, 250,000,
about what a ``* * * * *`` bulk job on 5,000 targets adds in an hour (7.2 M a day, 300,000
an hour; the retention round runs once an hour). Rows are inserted in bulk.

Each page or call is requested ``--requests`` times (default 60, so that the p95 is the
57th time and not the slowest, as it is of 20; after one warm-up request; only three times
when the warm-up took over 3 s, far over the 300 ms goal) through
the real FastAPI application in this process (Starlette's test client, an admin's API
token), so the time is the server's: routing, authentication, the queries, rendering;
no network. The heap is settled first, as ``fleetcron serve`` settles it before it serves
(``fleetcron.heap``). Reported: p50, p95 and the slowest of those times, the response
size, the SQL statements
one request issues; then each service call the dashboard makes, timed alone (where its
time goes). Then the retention rounds (``services.retention.prune`` with the
housekeeping's time budget, as the scheduler calls it before its ticks) are timed until
one completes: rows deleted per second, and how long each round holds the scheduler's
database thread.

    .venv/bin/python bench/pages_bench.py [--targets 5000] [--jobs 50] [--runs 4] \\
        [--requests 60] [--backends sqlite,postgresql] [--outage 10x24] [--pages health]

``--outage 10x24``: ten of the unreachable targets have been down for a day, a connection
error a minute for each of their jobs (72,000 per target at 50 jobs); ``--pages``: only
the pages named.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import event, func, insert, select

from _common import (
    after_bulk_load,
    core_table,
    counting_off,
    databases,
    loadavg,
    make_app,
    percentile,
    table,
)
from fleetcron import heap
from fleetcron.app import SYSTEM, App
from fleetcron.store.schema import Assignment, Job, Run, Target

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BATCH = 20_000
SLOW_S = 3.0
SLOW_REQUESTS = 3

PAGES = [
    ("targets page", "/targets"),
    ("targets API, a page", "/api/v1/targets?limit=100"),
    ("targets API, whole list (measured only)", "/api/v1/targets"),
    ("runs page", "/runs"),
    ("runs API", "/api/v1/runs"),
    ("runs API, one job", "/api/v1/runs?job=bulk07"),
    ("runs API, one target", "/api/v1/runs?target=host00042"),
    ("health API", "/api/v1/health"),
    ("health API, detail", "/api/v1/health?detail=true"),
    ("health API, limit 1000 (measured only)", "/api/v1/health?limit=1000"),
    ("dashboard", "/"),
    ("job page (measured only)", "/jobs/bulk07"),
    ("/metrics", "/metrics"),
]


def fill(
    app: App,
    n_targets: int,
    n_jobs: int,
    n_runs: int,
    old_slot: datetime,
    outage: tuple[int, int] = (0, 0),
) -> int:
    """The installation described in the module docstring; returns the rows older than the
    retention age. ``outage`` = (targets, hours): that many of the unreachable targets
    have been down that long, a connection error a minute for each of their jobs before
    the newest ``n_runs - 1`` slots."""
    import asyncssh

    created = NOW - timedelta(days=200)
    host_key = (
        asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    )
    private = app.master_key.encrypt(b"not a real key: the pages never decrypt it")
    with app.db.engine.begin() as conn:
        counting_off(conn)  # counted anew after the load
        conn.execute(
            insert(core_table(Target)),
            [
                {
                    "id": t + 1,
                    "name": f"host{t:05d}",
                    "kind": "ssh",
                    "host": f"10.{t // 65536}.{t // 256 % 256}.{t % 256}",
                    "port": 22,
                    "user": "root",
                    "private_key_enc": private,
                    "host_key": host_key,
                    "paired": True,
                    "paired_at": created,
                    "created_at": created,
                    "updated_at": created,
                    "labels": {"env": "prod" if t % 2 else "test", "rack": f"r{t % 40}"},
                    "notes": "",
                }
                for t in range(n_targets)
            ],
        )
        conn.execute(
            insert(core_table(Job)),
            [
                {
                    "id": j + 1,
                    "name": f"bulk{j:02d}",
                    "origin": "bulk",
                    "schedule": "* * * * *",
                    "timezone": "UTC",
                    "command": f"/usr/local/bin/task-{j}",
                    "selector": {},
                    "target_id": None,
                    "timeout_s": 300,
                    "created_by": "bench",
                    "updated_by": "bench",
                    "created_at": created,
                    "updated_at": created,
                }
                for j in range(n_jobs)
            ],
        )
        n = n_targets * n_jobs
        old = 0
        for start in range(0, n, BATCH):
            ids = range(start, min(n, start + BATCH))
            conn.execute(
                insert(core_table(Assignment)),
                [
                    {
                        "id": i + 1,
                        "job_id": i // n_targets + 1,
                        "target_id": i % n_targets + 1,
                        "enabled": True,
                        "next_fire_at": NOW + timedelta(minutes=1),
                        "created_at": created,
                        "updated_at": created,
                    }
                    for i in ids
                ],
            )
            runs = []
            for i in ids:
                job, target = i // n_targets, i % n_targets
                down_long = target % 100 == 0 and target // 100 < outage[0]
                extra = outage[1] * 60 if down_long else 0
                for k in range(-extra, n_runs):
                    if k < 0:  # the long outage, before the newest slots
                        slot = NOW - timedelta(minutes=n_runs - 1 - k)
                    else:
                        slot = old_slot if k == 0 else NOW - timedelta(minutes=n_runs - k)
                    old += k == 0
                    if target % 100 == 0 and k != 0:
                        status, error, code = "connect_error", "connection refused: x:22", None
                    elif target % 100 != 0 and i % 100 == 1 and k > 0:
                        status, error, code = "failed", None, 1
                    else:
                        status, error, code = "succeeded", None, 0
                    runs.append(
                        {
                            "assignment_id": i + 1,
                            "job_id": job + 1,
                            "target_id": target + 1,
                            "job_name": f"bulk{job:02d}",
                            "target_name": f"host{target:05d}",
                            "origin": "bulk",
                            "command": f"/usr/local/bin/task-{job}",
                            "scheduled_for": slot,
                            "trigger": "schedule",
                            "attempt": 1,
                            "status": status,
                            "exit_code": code,
                            "error": error,
                            "stdout_head": "ok\n" if code == 0 else "",
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
    return old


@contextmanager
def counting(app: App) -> Iterator[list[str]]:
    statements: list[str] = []

    def capture(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(statement)

    event.listen(app.db.engine, "before_cursor_execute", capture)
    try:
        yield statements
    finally:
        event.remove(app.db.engine, "before_cursor_execute", capture)


def measure_pages(app: App, requests: int, wanted: list[str]) -> list[dict[str, Any]]:
    from starlette.testclient import TestClient

    from fleetcron.services.accounts import users
    from fleetcron.web.app import create_app

    users.add_user(app, SYSTEM, "bench", "bench-password-long-enough", "admin")
    token, _ = users.create_token(app, SYSTEM, "bench", "bench")
    client = TestClient(create_app(app), base_url="http://127.0.0.1", raise_server_exceptions=False)
    heap.settle()  # as `fleetcron serve` does once it has built what it serves with
    headers = {"Authorization": f"Bearer {token}"}
    out = []
    for name, path in PAGES:
        if wanted and not any(w in name for w in wanted):
            continue
        with counting(app) as statements:
            t0 = time.perf_counter()
            first = client.get(path, headers=headers)
            warm_up = time.perf_counter() - t0
        times = []
        # A page far over the goal gets fewer requests (its p95 is then their maximum).
        for _ in range(requests if warm_up < SLOW_S else SLOW_REQUESTS):
            t0 = time.perf_counter()
            response = client.get(path, headers=headers)
            times.append(time.perf_counter() - t0)
        out.append(
            {
                "name": name,
                "path": path,
                "status": first.status_code,
                "bytes": len(response.content),
                "statements": len(statements),
                "p50_ms": percentile(times, 50) * 1000,
                "p95_ms": percentile(times, 95) * 1000,
                "max_ms": max(times) * 1000,
                "requests": len(times),
            }
        )
        print(
            f"    {name:28} {path:32} {first.status_code} p50 {out[-1]['p50_ms']:8.1f} ms, "
            f"p95 {out[-1]['p95_ms']:8.1f} ms, max {out[-1]['max_ms']:8.1f} ms, "
            f"{len(statements)} statements, "
            f"{len(response.content):,} bytes, {len(times)} requests",
            flush=True,
        )
    client.close()
    return out


def dashboard_parts(app: App, requests: int) -> list[dict[str, Any]]:
    """Where the dashboard's time goes: each service call it makes, timed alone (p50, p95
    of ``requests`` calls after one warm-up), with the statements it issues."""
    from fleetcron.services.cluster import status as cluster_svc
    from fleetcron.services.fleet import grid as fleet_grid
    from fleetcron.services.health import report as health_svc
    from fleetcron.services.jobs import edit as jobs_svc
    from fleetcron.services.runs.failures import recent_failures
    from fleetcron.services.targets import reads as target_reads
    from fleetcron.web.pages.views import ATTENTION_LIMIT

    parts: list[tuple[str, Any]] = [
        ("target_reads.count_targets", lambda: target_reads.count_targets(app, SYSTEM)),
        ("jobs.count_by_origin", lambda: jobs_svc.count_by_origin(app, SYSTEM)),
        (
            "health.summary (Needs attention)",
            lambda: health_svc.summary(app, SYSTEM, limit=ATTENTION_LIMIT, detail=False),
        ),
        ("recent failures (by job)", lambda: recent_failures(app, SYSTEM)),
        ("cluster.status", lambda: cluster_svc.status(app, SYSTEM, None)),
        ("fleet_grid.job_counts", lambda: fleet_grid.job_counts(app, SYSTEM)),
        ("fleet_grid.fleet_grid", lambda: fleet_grid.fleet_grid(app, SYSTEM)),
    ]
    out = []
    for name, call in parts:
        with counting(app) as statements:
            call()
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out.append(
            {
                "name": name,
                "p50_ms": percentile(times, 50) * 1000,
                "p95_ms": percentile(times, 95) * 1000,
                "statements": len(statements),
            }
        )
        print(
            f"    dashboard part {name:34} p50 {out[-1]['p50_ms']:8.1f} ms, "
            f"p95 {out[-1]['p95_ms']:8.1f} ms, {len(statements)} statements",
            flush=True,
        )
    return out


def per_target_reads(app: App, sample: int) -> float:
    """Seconds the targets list used to spend per target before it read every target's
    last run in one statement: a count and a select of that target's runs by name
    (``list_run_views(RunFilter(target=name), limit=1)``), timed over ``sample``
    targets."""
    from fleetcron.services.runs.reads import RunFilter
    from fleetcron.services.runs.views import list_run_views

    with app.db.read() as session:
        names = list(session.scalars(select(Target.name).order_by(Target.id).limit(sample)))
    t0 = time.perf_counter()
    for name in names:
        list_run_views(app, SYSTEM, RunFilter(target=name), limit=1)
    return (time.perf_counter() - t0) / max(len(names), 1)


def measure_retention(app: App) -> dict[str, Any]:
    """Budgeted rounds, as the scheduler's housekeeping runs them (``PRUNE_BUDGET_S`` each,
    one per tick), until one completes; then one more round with nothing left to delete."""
    from fleetcron.scheduler.housekeeping import PRUNE_BUDGET_S
    from fleetcron.services.runs import retention

    with app.db.read() as session:
        before = session.scalar(select(func.count()).select_from(Run))
    rounds: list[float] = []
    deleted = 0
    t0 = time.perf_counter()
    while True:
        r0 = time.perf_counter()
        result = retention.prune(app, SYSTEM, budget_s=PRUNE_BUDGET_S)
        rounds.append(time.perf_counter() - r0)
        deleted += result.runs_by_age + result.runs_by_count
        if result.complete:
            break
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    again = retention.prune(app, SYSTEM, budget_s=PRUNE_BUDGET_S)
    idle_seconds = time.perf_counter() - t1
    with app.db.read() as session:
        after = session.scalar(select(func.count()).select_from(Run))
    return {
        "before": before,
        "after": after,
        "deleted": deleted,
        "seconds": seconds,
        "rows_per_s": deleted / seconds,
        "rounds": len(rounds),
        "longest_round_ms": max(rounds) * 1000,
        "p95_round_ms": percentile(rounds, 95) * 1000,
        "idle_round_s": idle_seconds,
        "idle_deleted": again.total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument(
        "--outage",
        default="0x0",
        help="TARGETSxHOURS: that many unreachable targets down that long (default none)",
    )
    parser.add_argument(
        "--pages",
        default="",
        help="only the pages whose name contains one of these (comma separated); then "
        "no dashboard parts, retention or former reads are measured",
    )
    args = parser.parse_args()
    try:
        down, hours = (int(n) for n in args.outage.split("x"))
    except ValueError:
        parser.error(f"--outage must be TARGETSxHOURS, e.g. 10x24, got {args.outage!r}")
    for what in ("targets", "jobs", "runs", "requests"):
        if getattr(args, what) < 1:
            parser.error(f"--{what} must be at least 1, got {getattr(args, what)}")
    print(f"load average at start: {loadavg()}")
    rows, retention_rows, baselines, parts_rows = [], [], [], []
    for backend, url, directory in databases(args.backends, "pages-bench"):
        app = make_app(url, directory, clock=lambda: NOW)
        old_slot = NOW - timedelta(days=app.settings.retention_days, minutes=30)
        t0 = time.perf_counter()
        old = fill(app, args.targets, args.jobs, args.runs, old_slot, (down, hours))
        filled = time.perf_counter() - t0
        long_down = min(down, (args.targets + 99) // 100)
        total = args.targets * args.jobs * args.runs + long_down * args.jobs * hours * 60
        print(f"  {backend}: {total:,} runs ({old:,} past retention) in {filled:.0f} s")
        wanted = [w for w in args.pages.split(",") if w]
        for r in measure_pages(app, args.requests, wanted):
            rows.append(
                [
                    backend,
                    r["name"],
                    f"`{r['path']}`",
                    str(r["status"]),
                    f"{r['p50_ms']:.0f}",
                    f"{r['p95_ms']:.0f}",
                    f"{r['max_ms']:.0f}",
                    str(r["statements"]),
                    f"{r['bytes'] / 1024:.0f}",
                    str(r["requests"]),
                ]
            )
        if wanted:
            app.close()
            continue
        for part in dashboard_parts(app, args.requests):
            parts_rows.append(
                [
                    backend,
                    part["name"],
                    f"{part['p50_ms']:.0f}",
                    f"{part['p95_ms']:.0f}",
                    str(part["statements"]),
                ]
            )
        each = per_target_reads(app, 10)
        print(
            f"  the former per-target reads of the targets list: {each * 1000:.0f} ms per "
            f"target, about {each * args.targets:.0f} s for {args.targets:,} targets",
            flush=True,
        )
        baselines.append([backend, f"{each * 1000:.0f}", f"{each * args.targets:.0f}"])
        ret = measure_retention(app)
        retention_rows.append(
            [
                backend,
                f"{ret['before']:,}",
                f"{ret['deleted']:,}",
                f"{ret['rounds']:,}",
                f"{ret['p95_round_ms']:.0f} / {ret['longest_round_ms']:.0f}",
                f"{ret['seconds']:.1f}",
                f"{ret['rows_per_s']:,.0f}",
                f"{ret['idle_round_s'] * 1000:.0f} ms ({ret['idle_deleted']} rows)",
            ]
        )
        print(f"  retention: {retention_rows[-1]}", flush=True)
        app.close()
    print()
    print(
        table(
            [
                "backend",
                "page or call",
                "path",
                "status",
                "p50 ms",
                "p95 ms",
                "max ms",
                "SQL statements",
                "KB",
                "requests",
            ],
            rows,
            right=3,
        )
    )
    print()
    print(
        table(
            ["backend", "dashboard part (service call)", "p50 ms", "p95 ms", "SQL statements"],
            parts_rows,
            right=2,
        )
    )
    print()
    print(
        table(
            [
                "backend",
                "runs before",
                "deleted",
                "rounds",
                "round p95 / max ms",
                "all rounds s",
                "rows deleted / s",
                "next round (nothing to delete)",
            ],
            retention_rows,
        )
    )
    print()
    print(
        table(
            ["backend", "former targets list: ms per target", "s for all targets (estimate)"],
            baselines,
        )
    )
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    main()
