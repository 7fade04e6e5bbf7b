"""What the SSH executor adds to a pooled run: ``SshExecutor.run`` against asyncssh's
``conn.run`` on the very same pooled connections, without the scheduler.

The fleet simulator (bench/fleet_sim.py, no latency) serves ``--targets`` targets; the
executor opens one connection to each, then runs ``sleep 0.5`` on all of them at once,
``--rounds`` times (the remote watchdog wrapper, its pgid marker, the caps and timers,
bounded output); then ``conn.run("sleep 0.5")`` goes over the executor's own connections
as often. Reported per round: the event-loop thread's CPU per run and the wall time.

    .venv/bin/python bench/executor_overhead_bench.py --targets 500 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import loadavg
from fleet_sim import FleetSim, raise_fd_limit
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget


async def measure(sim: FleetSim, n: int, rounds: int) -> None:
    targets = [
        SshTarget(t.name, t.host, t.port, t.user, t.client_key, t.host_key) for t in sim.targets
    ]
    executor = SshExecutor(max_concurrency=n, max_connections=n, max_connecting=64)
    request = ExecRequest(
        "sleep 0.5", env={"FLEETCRON_JOB": "fleet", "FLEETCRON_TARGET": "t"}, run_id=1
    )
    await asyncio.gather(*(executor.run(t, request) for t in targets))  # open the pool
    try:
        for _ in range(rounds):
            c0, t0 = time.thread_time(), time.perf_counter()
            results = await asyncio.gather(*(executor.run(t, request) for t in targets))
            ok = sum(r.status == "succeeded" for r in results)
            print(
                f"SshExecutor.run:  {(time.thread_time() - c0) / n * 1000:.2f} ms loop CPU per "
                f"run, {time.perf_counter() - t0:.2f} s, {ok}/{n} ok",
                flush=True,
            )
        conns = executor.pool.connections()
        for _ in range(rounds):
            c0, t0 = time.thread_time(), time.perf_counter()
            done = await asyncio.gather(*(c.run("sleep 0.5", check=False) for c in conns))
            ok = sum(r.exit_status == 0 for r in done)
            print(
                f"asyncssh conn.run: {(time.thread_time() - c0) / len(conns) * 1000:.2f} ms loop "
                f"CPU per run, {time.perf_counter() - t0:.2f} s, {ok}/{len(conns)} ok",
                flush=True,
            )
    finally:
        await executor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.targets < 1 or args.rounds < 1:
        parser.error("--targets and --rounds must be at least 1")
    raise_fd_limit()
    print(f"load average at start: {loadavg()}")
    with FleetSim(args.targets) as sim:
        asyncio.run(measure(sim, args.targets, args.rounds))
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
