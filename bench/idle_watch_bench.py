"""An idle scheduler's self-fencing watcher: what a started scheduler costs while nothing
runs and nothing ticks.

A node holding a lease (automatic failover, every worker of ``--workers``) starts the
watcher that cancels its runs once the lease is not renewed in time
(``Scheduler._watch_fence``). Two designs in one process, alternating in rounds, each a
started scheduler on SQLite left alone for ``--seconds``:

* **watched**: ``may_execute`` given (as a leased node's), counting its calls;
* **unwatched**: no ``may_execute`` (a standalone node): no watcher at all, the floor.

Reported per design and round: this process's CPU per second (user + system) and the
watcher's checks per second. Run by hand::

    .venv/bin/python bench/idle_watch_bench.py [--seconds 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import loadavg, make_app, own_cpu, table, work_dir


async def idle(seconds: float, watched: bool, data_dir: Path) -> tuple[float, float]:
    """CPU seconds per second and checks per second of one started, idle scheduler."""
    from fleetcron.scheduler.service import Scheduler

    app = make_app(f"sqlite:///{data_dir / 'fleetcron.db'}", data_dir, lambda: datetime.now(UTC))
    checks = [0]

    def may_execute() -> bool:
        checks[0] += 1
        return True

    scheduler = Scheduler(app, may_execute=may_execute if watched else None)
    await scheduler.start()
    await asyncio.sleep(1)  # past the start-up
    checks[0], cpu = 0, own_cpu()
    await asyncio.sleep(seconds)
    spent = own_cpu() - cpu
    await scheduler.shutdown()
    app.db.dispose()
    return spent / seconds, checks[0] / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {loadavg()}")
    rows = []
    base = work_dir("idle-watch")
    for round_ in range(1, args.rounds + 1):
        for design, watched in (("watched", True), ("unwatched", False)):
            data_dir = base / f"{design}-{round_}"
            data_dir.mkdir()
            cpu, checks = asyncio.run(idle(args.seconds, watched, data_dir))
            rows.append([design, round_, f"{cpu * 1000:.2f}", f"{checks:.1f}"])
    print(table(["design", "round", "CPU ms / s", "checks / s"], rows, right=2))
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
