"""An idle scheduler's cost: what one tick costs when nothing is due.

Most of a scheduler's ticks find nothing to do, on every node and every worker, once a
second by default. Two designs run side by side in the same process, on the same database
(200 individual jobs on one local target, none due in the measured hour), alternating in
rounds:

* **fleetcron**: ``Scheduler.tick()`` of the production scheduler (``fleetcron serve``'s),
  everything a tick does: active cleanup's check, due slots, rolled-out slots, queued
  runs, live runs.
* **bare poll**: one indexed read of the due assignments per tick through SQLAlchemy Core
  on a pooled connection (``SELECT id FROM assignments WHERE enabled AND next_fire_at <=
  now LIMIT 1`` in a transaction), the least any scheduler polling a database does; it
  looks for due slots only.

Reported per tick: this process's CPU (user + system), the PostgreSQL server's CPU (its
backends'), statements and transactions sent. Run by hand:
``.venv/bin/python bench/idle_tick_bench.py [--ticks 2000] [--rounds 3]
[--backends sqlite,postgresql]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import event, insert, select

from _common import (
    core_table,
    job_row,
    loadavg,
    make_app,
    median,
    own_cpu,
    production_scheduler,
    running_postgres,
    server_cpu,
    table,
    work_dir,
)
from fleetcron.app import App
from fleetcron.store.schema import Assignment, Job, Target

NOW = datetime(2026, 3, 2, 9, 30, 5, tzinfo=UTC)
JOBS = 200


def add_fleet(app: App) -> None:
    """One local target and ``JOBS`` individual jobs due next new year (none this hour)."""
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(core_table(Target)),
            [
                {
                    "name": "box",
                    "kind": "local",
                    "labels": {},
                    "notes": "",
                    "paired": True,
                    "paired_at": NOW,
                    "created_at": NOW,
                    "updated_at": NOW,
                }
            ],
        )
        target = conn.execute(select(Target.id)).scalar_one()
        conn.execute(
            insert(core_table(Job)),
            [
                job_row(
                    NOW,
                    name=f"job{i:03d}",
                    origin="individual",
                    schedule="0 0 1 1 *",
                    timezone="UTC",
                    command="true",
                    target_id=target,
                )
                for i in range(JOBS)
            ],
        )
        jobs = list(conn.execute(select(Job.id)).scalars())
        conn.execute(
            insert(core_table(Assignment)),
            [
                {
                    "job_id": job,
                    "target_id": target,
                    "enabled": True,
                    "next_fire_at": datetime(2027, 1, 1, tzinfo=UTC),
                    "created_at": NOW,
                    "updated_at": NOW,
                }
                for job in jobs
            ],
        )


class Counts:
    """Statements and transactions the engine sends."""

    def __init__(self, app: App) -> None:
        self.statements = self.transactions = 0
        event.listen(app.db.engine, "before_cursor_execute", self._statement)
        event.listen(app.db.engine, "commit", self._transaction)
        event.listen(app.db.engine, "rollback", self._transaction)

    def _statement(self, *_: Any) -> None:
        self.statements += 1

    def _transaction(self, *_: Any) -> None:
        self.transactions += 1


def bare_poll(app: App) -> Callable[[], Any]:
    query = (
        select(Assignment.id)
        .where(Assignment.enabled.is_(True), Assignment.next_fire_at <= NOW)
        .limit(1)
    )

    def poll() -> Any:
        with app.db.engine.begin() as conn:
            return conn.execute(query).first()

    return poll


def measure(
    tick: Callable[[], Any], ticks: int, counts: Counts, postmaster: int | None
) -> tuple[float, float, float, float]:
    """Per tick: CPU ms here, server CPU ms, statements, transactions."""
    s0, t0 = counts.statements, counts.transactions
    c0 = own_cpu()
    p0 = server_cpu(postmaster) if postmaster else 0.0
    for _ in range(ticks):
        tick()
    cpu = own_cpu() - c0
    server_ms = (server_cpu(postmaster) - p0) * 1000 / ticks if postmaster else 0.0
    return (
        cpu * 1000 / ticks,
        server_ms,
        (counts.statements - s0) / ticks,
        (counts.transactions - t0) / ticks,
    )


def run(
    backend: str, url: str, args: argparse.Namespace, postmaster: int | None
) -> list[list[object]]:
    app = make_app(url, work_dir(f"idle-tick-{backend}-"), lambda: NOW)
    add_fleet(app)
    scheduler = production_scheduler(app)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(scheduler.start())
    counts = Counts(app)
    designs: dict[str, Callable[[], Any]] = {
        "fleetcron": lambda: loop.run_until_complete(scheduler.tick()),
        "bare poll": bare_poll(app),
    }
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in designs}
    for tick in designs.values():  # warm up: caches, pool, compiled statements
        measure(tick, 50, counts, postmaster)
    for _ in range(args.rounds):
        for name, tick in designs.items():
            results[name].append(measure(tick, args.ticks, counts, postmaster))
    loop.close()
    app.close()
    rows: list[list[object]] = []
    for name, values in results.items():
        rows.append(
            [
                backend,
                name,
                f"{median([v[0] for v in values]):.2f}",
                f"{median([v[1] for v in values]):.2f}" if postmaster else "-",
                f"{values[-1][2]:.0f}",
                f"{values[-1][3]:.0f}",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    rows: list[list[object]] = []
    print(f"load average before: {loadavg()}")
    backends = args.backends.split(",")
    if "sqlite" in backends:
        rows += run("sqlite", f"sqlite:///{work_dir('idle-tick-db') / 'bench.db'}", args, None)
    if "postgresql" in backends:
        with running_postgres() as server:
            if server is None:
                print("PostgreSQL binaries not found; skipped", file=sys.stderr)
            else:
                url = server.create_database("idle_tick")  # type: ignore[attr-defined]
                pid = (server.data_dir / "postmaster.pid").read_text().split()[0]  # type: ignore[attr-defined]
                rows += run("postgresql", url, args, int(pid))
    print(
        table(
            [
                "backend",
                "design",
                "CPU ms/tick",
                "server CPU ms/tick",
                "statements",
                "transactions",
            ],
            rows,
            right=4,
        )
    )


if __name__ == "__main__":
    main()
