"""A serving scheduler's lease-renewal task while nothing is due: what its wake-ups cost.

A node holding a lease renews it every ``FLEETCRON_LEASE_RENEW_S`` (10 s by default) from a
task of its own on the database thread (``Scheduler._keep_renewing``). Three designs in one
process, alternating in rounds, each a scheduler on SQLite serving (ticking every second,
nothing due) for ``--seconds``:

* **no renewal**: a standalone node, the floor;
* **asked every 0.5 s**: a renewal that does not say when it is due next, so the task asks
  every ``RENEWAL_POLL_S``, as every leased node did before;
* **sleeps until due**: the renewal says when it is due next (as
  ``Housekeeping.renew_if_due`` does), and the task sleeps until then.

The renewal itself is the same stand-in in both renewing designs (due every
``--renew-every`` seconds; when due it only notes the time), so the difference is the
task's own wake-ups. Reported per design and round: this process's CPU per second (user +
system) and the renewal calls per second; the heap is settled after the start-up, as
``fleetcron serve`` does, so a full collection does not land in one design's window. Run
by hand::

    .venv/bin/python bench/idle_renewal_bench.py [--seconds 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import loadavg, make_app, own_cpu, table, work_dir

DESIGNS = ("no renewal", "asked every 0.5 s", "sleeps until due")


def stand_in(every_s: float, says_when: bool, calls: list[int]) -> Callable[[], float | None]:
    """A renewal due every ``every_s`` seconds that counts its calls."""
    due = [0.0]

    def renew() -> float | None:
        calls[0] += 1
        now = time.monotonic()
        if now >= due[0]:
            due[0] = now + every_s
        return due[0] - now if says_when else None

    return renew


async def serving(
    seconds: float, design: str, every_s: float, data_dir: Path
) -> tuple[float, float]:
    """CPU seconds per second and renewal calls per second of one serving scheduler."""
    from fleetcron import heap
    from fleetcron.scheduler.service import Scheduler

    app = make_app(f"sqlite:///{data_dir / 'fleetcron.db'}", data_dir, lambda: datetime.now(UTC))
    calls = [0]
    renewal = None if design == DESIGNS[0] else stand_in(every_s, design == DESIGNS[2], calls)
    scheduler = Scheduler(app, renewal=renewal)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.serve(stop))
    await asyncio.sleep(2)  # past the start-up
    heap.settle()  # as `fleetcron serve` does: no full collection of the start-up's objects
    calls[0], cpu = 0, own_cpu()
    await asyncio.sleep(seconds)
    spent = own_cpu() - cpu
    stop.set()
    await task
    app.db.dispose()
    return spent / seconds, calls[0] / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--renew-every", type=float, default=10.0, help="seconds")
    args = parser.parse_args()
    print(f"load average at start: {loadavg()}")
    rows = []
    base = work_dir("idle-renewal")
    for round_ in range(1, args.rounds + 1):
        for number, design in enumerate(DESIGNS):
            data_dir = base / f"{number}-{round_}"
            data_dir.mkdir()
            cpu, calls = asyncio.run(serving(args.seconds, design, args.renew_every, data_dir))
            rows.append([design, round_, f"{cpu * 1000:.2f}", f"{calls:.2f}"])
    print(table(["design", "round", "CPU ms / s", "renewal calls / s"], rows, right=2))
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
