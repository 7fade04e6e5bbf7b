"""SSH executor throughput: a fleet fire of short runs against a real local sshd.

Starts a throwaway sshd on 127.0.0.1 (same helper as the tests), then runs ``true`` on
TARGETS targets (one client key each, so each needs its own connection) ROUNDS times.
The first round pays one handshake per target; later rounds reuse pooled connections.
A second executor with a zero idle timeout shows the cost when nothing is reused.

Run by hand: ``.venv/bin/python bench/executor_bench.py [targets] [rounds]``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import asyncssh

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fixtures.sshd import running_sshd
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget


async def fire(executor: SshExecutor, targets: list[SshTarget]) -> float:
    t0 = time.perf_counter()
    results = await asyncio.gather(*(executor.run(t, ExecRequest("true")) for t in targets))
    elapsed = time.perf_counter() - t0
    failed = [r.error for r in results if r.status != "succeeded"]
    if failed:
        raise SystemExit(f"{len(failed)} runs failed, first: {failed[0]}")
    return elapsed


async def main(n_targets: int, rounds: int) -> None:
    keys = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(n_targets)]
    with running_sshd(
        Path(tempfile.mkdtemp(prefix="fleetcron-bench-")) / "sshd",
        authorized_keys=[k.export_public_key("openssh").decode() for k in keys],
    ) as server:
        targets = [
            SshTarget(
                f"t{i}",
                server.host,
                server.port,
                server.user,
                k.export_private_key("openssh"),
                server.host_key_line,
            )
            for i, k in enumerate(keys)
        ]
        pooled = SshExecutor()
        cold = await fire(pooled, targets)
        warm = [await fire(pooled, targets) for _ in range(rounds - 1)]
        await pooled.close()
        fresh = SshExecutor(idle_timeout_s=0)
        unpooled = [await fire(fresh, targets) for _ in range(rounds - 1)]
        await fresh.close()
    best_warm, best_unpooled = min(warm), min(unpooled)
    print(f"targets={n_targets} rounds={rounds} (cap 64 runs in flight, 16 handshakes)")
    print("| round | wall time | runs/s |")
    print("|---|---:|---:|")
    print(f"| first (one handshake per target) | {cold * 1000:.0f} ms | {n_targets / cold:.0f} |")
    print(
        f"| pooled (best of {rounds - 1}) | {best_warm * 1000:.0f} ms | "
        f"{n_targets / best_warm:.0f} |"
    )
    print(
        f"| no reuse (best of {rounds - 1}) | {best_unpooled * 1000:.0f} ms | "
        f"{n_targets / best_unpooled:.0f} |"
    )
    print(
        f"connections opened: pooled {pooled.connections_opened}, "
        f"no reuse {fresh.connections_opened}"
    )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(args + [100, 5][len(args) :])))
