"""Next-fire throughput: fleetcron vs croniter vs cronsim, same expressions, same start.

Run by hand:  .venv/bin/python bench/cron_bench.py [--fires N] [--repeat R]

Each library parses once per run, then produces the next N fire times from a fixed start
(fleetcron: ``iter_after``; croniter: ``get_next``; cronsim: ``next()``). The best of R runs
is reported as fire times per second, with fleetcron's speed-up over each library.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim

from fleetcron.cron import parse

EXPRESSIONS = ("*/5 * * * *", "0 2 * * 0", "0 2 15 * 1", "30 4 1,15 * 5", "0 0 29 2 *")
ZONES = ("UTC", "America/New_York")
START = (2026, 1, 1, 0, 0)


def run_fleetcron(expr: str, start: datetime, fires: int) -> datetime:
    schedule = parse(expr, start.tzinfo)  # type: ignore[arg-type]
    last = start
    for fire in itertools.islice(schedule.iter_after(start), fires):
        last = fire
    return last


def run_croniter(expr: str, start: datetime, fires: int) -> datetime:
    iterator = croniter(expr, start)
    last = start
    for _ in range(fires):
        last = iterator.get_next(datetime)
    return last


def run_cronsim(expr: str, start: datetime, fires: int) -> datetime:
    iterator = CronSim(expr, start)
    last = start
    for _ in range(fires):
        last = next(iterator)
    return last


RUNNERS: dict[str, Callable[[str, datetime, int], datetime]] = {
    "fleetcron": run_fleetcron,
    "croniter": run_croniter,
    "cronsim": run_cronsim,
}


def rate(runner: Callable[[str, datetime, int], datetime], expr: str, start: datetime,
         fires: int, repeat: int) -> float:  # fmt: skip
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        runner(expr, start, fires)
        best = min(best, time.perf_counter() - began)
    return fires / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fires", type=int, default=1000, help="fire times per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell; best is kept")
    args = parser.parse_args()
    print(f"{args.fires} fire times per run, best of {args.repeat}; calls/s, higher is better\n")
    print("| expression | zone | fleetcron | croniter | cronsim | vs croniter | vs cronsim |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for zone, expr in itertools.product(ZONES, EXPRESSIONS):
        start = datetime(*START, tzinfo=ZoneInfo(zone))
        fires = args.fires if expr != "0 0 29 2 *" else max(args.fires // 10, 10)
        results = {
            name: rate(run, expr, start, fires, args.repeat) for name, run in RUNNERS.items()
        }
        # the three must agree, or the comparison is meaningless
        ends = {name: run(expr, start, fires) for name, run in RUNNERS.items()}
        agree = "" if len(set(ends.values())) == 1 else " (results differ!)"
        ours = results["fleetcron"]
        print(
            f"| `{expr}` | {zone} | {ours:,.0f} | {results['croniter']:,.0f} "
            f"| {results['cronsim']:,.0f} | {ours / results['croniter']:.1f}x "
            f"| {ours / results['cronsim']:.1f}x |{agree}"
        )


if __name__ == "__main__":
    main()
