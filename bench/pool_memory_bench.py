"""Memory of idle pooled SSH connections: how much RSS the SSH executor's pool costs per
connection it keeps open, against bare asyncssh connections kept open.

Each design runs in its own process against the fleet simulator (bench/fleet_sim.py, no
latency): it opens one connection per target by running ``true`` on each (the
executor's own pool for fleetcron, ``asyncssh.connect`` and ``conn.run`` for bare
asyncssh), lets them go idle, collects garbage and reads its resident set size
(``VmRSS``) before and after. The difference divided by the number of connections is the
cost of one idle pooled connection (the imported client keys, one per target, included).

    .venv/bin/python bench/pool_memory_bench.py --targets 1000 2000 5000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import loadavg, table, work_dir
from fleet_sim import FleetSim, SimTarget, raise_fd_limit


def rss_kb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


async def fleetcron_pool(targets: list[SimTarget]) -> dict[str, Any]:
    from fleetcron.executors import ExecRequest, SshExecutor, SshTarget

    executor = SshExecutor(max_concurrency=200, max_connections=len(targets), max_connecting=64)
    request = ExecRequest("true")
    ssh = [SshTarget(t.name, t.host, t.port, t.user, t.client_key, t.host_key) for t in targets]
    gc.collect()
    before = rss_kb()
    results = await asyncio.gather(*(executor.run(t, request) for t in ssh))
    await asyncio.sleep(1)
    gc.collect()
    after = rss_kb()
    ok = sum(r.status == "succeeded" for r in results)
    pooled = executor.pooled_connections
    await executor.close()
    return {"before_kb": before, "after_kb": after, "ok": ok, "pooled": pooled}


async def bare_asyncssh(targets: list[SimTarget]) -> dict[str, Any]:
    import asyncssh

    slots = asyncio.Semaphore(64)
    conns: list[Any] = []

    async def one(t: SimTarget) -> bool:
        async with slots:
            conn = await asyncssh.connect(
                t.host,
                t.port,
                username=t.user,
                client_keys=[asyncssh.import_private_key(t.client_key)],
                known_hosts=([asyncssh.import_public_key(t.host_key)], [], []),
                config=None,
                agent_path=None,
            )
            conns.append(conn)
            result = await conn.run("true", check=False)
            return result.exit_status == 0

    gc.collect()
    before = rss_kb()
    ok = await asyncio.gather(*(one(t) for t in targets))
    await asyncio.sleep(1)
    gc.collect()
    after = rss_kb()
    for conn in conns:
        conn.close()
    return {"before_kb": before, "after_kb": after, "ok": sum(ok), "pooled": len(conns)}


def child(design: str, spec_path: str) -> None:
    raise_fd_limit()
    # Import what the measured code imports before the first reading.
    import asyncssh  # noqa: F401

    import fleetcron.executors  # noqa: F401

    spec = json.loads(Path(spec_path).read_text())
    targets = [SimTarget(**t) for t in spec["targets"]]
    run = fleetcron_pool if design == "fleetcron" else bare_asyncssh
    print(json.dumps(asyncio.run(run(targets))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[1000])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.spec)
        return
    raise_fd_limit()
    print(f"load average at start: {loadavg()}")
    rows = []
    for n in args.targets:
        work = work_dir("fleetcron-pool-memory-")
        with FleetSim(n, work_dir=work / "sim") as sim:
            spec_path = work / "spec.json"
            spec_path.write_text(json.dumps(sim.spec()))
            for design in ("fleetcron", "asyncssh"):
                sim.wait_idle(timeout_s=120)
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", design, "--spec", str(spec_path)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                per = (r["after_kb"] - r["before_kb"]) / max(r["pooled"], 1)
                rows.append(
                    [
                        f"{n:,}",
                        design,
                        f"{r['ok']}/{n}",
                        str(r["pooled"]),
                        f"{r['before_kb'] / 1024:.0f}",
                        f"{r['after_kb'] / 1024:.0f}",
                        f"{per:.1f}",
                    ]
                )
                print("  " + " | ".join(rows[-1]), flush=True)
    print()
    print(
        table(
            [
                "targets",
                "design",
                "ok",
                "idle connections",
                "RSS before MB",
                "RSS with the pool MB",
                "KB per idle connection",
            ],
            rows,
            right=2,
        )
    )
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    main()
