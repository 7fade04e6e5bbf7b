"""Server time of the job page and its API for one bulk job on a large fleet.

The fleet: ``--targets`` local targets (default 5,000; labels ``env=prod`` or
``env=staging``, alternating), one bulk job on all of them, and ``--slots`` slots of
history per target (default 100: 500,000 runs), one per minute. One target in twenty fails
from its 80th slot on (a failure streak of 20); one in a hundred is paused. Rows are
inserted in bulk (not through the scheduler): this measures the reads.

Timed per backend, ``--calls`` times each (after one warm-up call), through the real web
application in process (FastAPI's TestClient: routing, authentication, the services, the
template), so the times are the server's: the job page HTML (first page, and filtered to
the failed targets), the targets API (first page, and filtered by status and label) and
the slots API. Reported: p50 and p95 in milliseconds and the SQL statements of one call.

Run by hand: ``.venv/bin/python bench/job_page_bench.py [--targets 5000] [--slots 100]
[--calls 20] [--backends sqlite,postgresql]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import insert

from _common import (
    after_bulk_load,
    core_table,
    counting_off,
    databases,
    loadavg,
    make_app,
    median,
    percentile,
    table,
)
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.store.schema import Assignment, Job, Run, Target
from sql_statements import statements

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
BATCH = 20_000
JOB = "reload"
PASSWORD = "bench-password-1"
FAILING_FROM = 80


def fill(app: App, n_targets: int, n_slots: int) -> None:
    created = START - timedelta(days=1)
    with app.db.engine.begin() as conn:
        counting_off(conn)  # counted anew after the load
        conn.execute(
            insert(core_table(Target)),
            [
                {
                    "id": t + 1,
                    "name": f"host{t:05d}",
                    "kind": "local",
                    "paired": True,
                    "labels": {"env": "prod" if t % 2 == 0 else "staging"},
                    "notes": "",
                    "created_at": created,
                    "updated_at": created,
                }
                for t in range(n_targets)
            ],
        )
        conn.execute(
            insert(core_table(Job)),
            [
                {
                    "id": 1,
                    "name": JOB,
                    "origin": "bulk",
                    "schedule": "* * * * *",
                    "timezone": "UTC",
                    "command": "/usr/sbin/fwconsole reload",
                    "selector": {},
                    "timeout_s": 300,
                    "created_by": "bench",
                    "updated_by": "bench",
                    "created_at": created,
                    "updated_at": created,
                }
            ],
        )
        conn.execute(
            insert(core_table(Assignment)),
            [
                {
                    "id": t + 1,
                    "job_id": 1,
                    "target_id": t + 1,
                    "enabled": t % 100 != 7,
                    "next_fire_at": START + timedelta(minutes=n_slots),
                    "created_at": created,
                    "updated_at": created,
                }
                for t in range(n_targets)
            ],
        )
        rows: list[dict[str, Any]] = []
        for t in range(n_targets):
            failing = t % 20 == 3
            for k in range(n_slots):
                slot = START + timedelta(minutes=k)
                bad = failing and k >= FAILING_FROM
                rows.append(
                    {
                        "assignment_id": t + 1,
                        "job_id": 1,
                        "target_id": t + 1,
                        "job_name": JOB,
                        "target_name": f"host{t:05d}",
                        "origin": "bulk",
                        "command": "x",
                        "scheduled_for": slot,
                        "trigger": "schedule",
                        "attempt": 1,
                        "status": "failed" if bad else "succeeded",
                        "exit_code": 1 if bad else 0,
                        "started_at": slot,
                        "finished_at": slot + timedelta(seconds=2),
                        "duration_ms": 2000 + t % 997,
                        "node": "bench",
                        "actor": "system",
                        "created_at": slot,
                    }
                )
                if len(rows) >= BATCH:
                    conn.execute(insert(core_table(Run)), rows)
                    rows = []
        if rows:
            conn.execute(insert(core_table(Run)), rows)
    after_bulk_load(app)


def clients(app: App) -> tuple[Any, Any, Callable[[], None]]:
    """A logged-in browser session and an API client with a viewer's token."""
    from fastapi.testclient import TestClient

    from fleetcron.services.accounts.users import add_user, create_token
    from fleetcron.web.app import create_app

    add_user(app, SYSTEM, "viewer", PASSWORD, "viewer")
    token, _ = create_token(app, Actor("viewer", "viewer"), "viewer", "bench")
    web = create_app(app)
    browser = TestClient(web, follow_redirects=False)
    browser.__enter__()
    answer = browser.post("/login", data={"username": "viewer", "password": PASSWORD})
    assert answer.status_code == 303, answer.text
    api = TestClient(web, headers={"Authorization": f"Bearer {token}"})
    api.__enter__()

    def close() -> None:
        browser.__exit__(None, None, None)
        api.__exit__(None, None, None)

    return browser, api, close


REQUESTS = (
    ("page", "job page", f"/jobs/{JOB}"),
    ("page", "job page, failed only", f"/jobs/{JOB}?status=failed"),
    ("api", "targets API", f"/api/v1/jobs/{JOB}/targets"),
    (
        "api",
        "targets API, failed + env=prod",
        f"/api/v1/jobs/{JOB}/targets?status=failed&label=env%3Dprod",
    ),
    ("api", "targets API, sort by streak", f"/api/v1/jobs/{JOB}/targets?sort=streak"),
    ("api", "slots API", f"/api/v1/jobs/{JOB}/slots"),
)


def measure(app: App, calls: int) -> list[tuple[str, float, float, int]]:
    browser, api, close = clients(app)
    results = []
    try:
        for kind, label, url in REQUESTS:
            client = browser if kind == "page" else api
            with statements(app) as seen:
                first = client.get(url)
            assert first.status_code == 200, (url, first.status_code, first.text[:300])
            counted = len(seen)
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                answer = client.get(url)
                times.append(time.perf_counter() - t0)
                assert answer.status_code == 200
            results.append((label, median(times), percentile(times, 95), counted))
    finally:
        close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=5000)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    rows = []
    print(f"load average before: {loadavg()}")
    for backend, url, directory in databases(args.backends, "job-page-bench"):
        app = make_app(url, directory, clock=lambda: START + timedelta(minutes=args.slots))
        t0 = time.perf_counter()
        fill(app, args.targets, args.slots)
        filled = time.perf_counter() - t0
        print(f"{backend}: filled {args.targets * args.slots:,} runs in {filled:.0f} s")
        for label, p50, p95, counted in measure(app, args.calls):
            rows.append((backend, label, f"{p50 * 1000:.0f}", f"{p95 * 1000:.0f}", counted))
        app.close()
    print(table(["backend", "request", "p50 ms", "p95 ms", "SQL statements"], rows, right=2))
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
