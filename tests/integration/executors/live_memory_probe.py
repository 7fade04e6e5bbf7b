"""Run one command printing BYTES on stdout and on stderr (through ``yes``) with a live
buffer and a follower reading it every 10 ms, in a fresh interpreter; report the peak RSS
growth.

Usage: python live_memory_probe.py local|ssh BYTES bounded|unbounded
       [host port user key_file host_key_line]

``unbounded`` is the negative control: a live buffer that keeps every byte, to show that
the measurement sees memory that grows with the output.

The peak is ``VmHWM`` of ``/proc/self/status`` (this address space's own high-water mark):
``ru_maxrss`` survives ``exec`` on Linux, so in a child of a big process (pytest) it starts
at the parent's peak and would hide the growth.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from fleetcron.executors import ExecRequest, ExecResult, LocalExecutor, SshExecutor, SshTarget
from fleetcron.executors.output import LiveOutput


class KeepsEverything(LiveOutput):
    """Negative control: what an unbounded buffer would cost."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[bytes] = []

    def feed(self, data: bytes) -> None:
        super().feed(data)
        self.kept.append(bytes(data))


def peak_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


async def main(argv: list[str]) -> None:
    mode, size, kind = argv[0], int(argv[1]), argv[2]
    command = f"yes | head -c {size}; yes 'to stderr' | head -c {size} >&2"
    live = KeepsEverything() if kind == "unbounded" else LiveOutput()
    big = ExecRequest(command, timeout_s=300, live=live)
    warm = ExecRequest("yes | head -c 100000; yes | head -c 100000 >&2", live=LiveOutput())
    reads = 0
    done = asyncio.Event()

    async def follow() -> None:
        nonlocal reads
        offset = 0
        while not done.is_set():
            offset = live.read(offset).offset
            reads += 1
            await asyncio.sleep(0.01)  # sleep-in-loop: a page's reader, every 10 ms

    result: ExecResult
    if mode == "local":
        local = LocalExecutor(allow_root=True)
        await local.run(warm)
        before = peak_kib()
        follower = asyncio.create_task(follow())
        result = await local.run(big)
    else:
        host, port, user, key_file, host_key = argv[3:8]
        target = SshTarget("probe", host, int(port), user, Path(key_file).read_text(), host_key)
        ssh = SshExecutor()
        await ssh.run(target, warm)
        before = peak_kib()
        follower = asyncio.create_task(follow())
        result = await ssh.run(target, big)
        await ssh.close()
    done.set()
    await follower
    after = peak_kib()
    print(
        json.dumps(
            {
                "status": result.status,
                "stdout_total": result.stdout.total_bytes,
                "stderr_total": result.stderr.total_bytes,
                "live_total": live.total_bytes,
                "live_tail": live.read(live.total_bytes - 20, final=True).text,
                "follower_reads": reads,
                "rss_growth_kib": after - before,
                "rss_before_kib": before,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
