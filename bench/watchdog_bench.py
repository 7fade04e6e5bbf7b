"""Per-run cost of the watchdog wrapper, local and over SSH (one pooled connection).

Runs ``true`` sequentially, alternating blocks with the watchdog on and off (the plain
wrapper, the behaviour before the watchdog), and prints the median and mean wall time per
run for each, plus the processes each run starts. Sequential runs isolate the latency a
run pays; the machine may be shared, so blocks alternate and the median is the figure.

Run by hand: ``.venv/bin/python bench/watchdog_bench.py [runs_per_block] [blocks]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncssh

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fixtures.sshd import running_sshd
from fleetcron.executors import ExecRequest, ExecResult, LocalExecutor, SshExecutor, SshTarget

Run = Callable[[ExecRequest], Awaitable[ExecResult]]


async def block(run: Run, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await run(ExecRequest("true", timeout_s=30))
        times.append(time.perf_counter() - t0)
        if result.status != "succeeded":
            raise SystemExit(f"run failed: {result.status} {result.error}")
    return times


async def compare(name: str, on: Run, off: Run, n: int, blocks: int) -> None:
    await block(on, 5)
    await block(off, 5)
    with_wd: list[float] = []
    without: list[float] = []
    for _ in range(blocks):
        with_wd += await block(on, n)
        without += await block(off, n)
    for label, times in (("before (no watchdog)", without), ("after (watchdog)", with_wd)):
        print(
            f"{name:5} {label:22} median {statistics.median(times) * 1000:6.2f} ms  "
            f"mean {statistics.fmean(times) * 1000:6.2f} ms  ({len(times)} runs)"
        )
    extra = (statistics.median(with_wd) - statistics.median(without)) * 1000
    print(f"{name:5} overhead per run (median): {extra:+.2f} ms")


async def main(n: int, blocks: int) -> None:
    on_local = LocalExecutor(allow_root=True)
    off_local = LocalExecutor(allow_root=True, watchdog=False)
    await compare("local", on_local.run, off_local.run, n, blocks)
    key = asyncssh.generate_private_key("ssh-ed25519")
    with running_sshd(
        Path(tempfile.mkdtemp(prefix="fleetcron-bench-")) / "sshd",
        authorized_keys=[key.export_public_key("openssh").decode()],
    ) as server:
        target = SshTarget(
            "t",
            server.host,
            server.port,
            server.user,
            key.export_private_key("openssh"),
            server.host_key_line,
        )
        on_ssh, off_ssh = SshExecutor(), SshExecutor(watchdog=False)
        try:
            await compare(
                "ssh",
                lambda r: on_ssh.run(target, r),
                lambda r: off_ssh.run(target, r),
                n,
                blocks,
            )
        finally:
            await on_ssh.close()
            await off_ssh.close()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(*(args + [40, 5][len(args) :])))
