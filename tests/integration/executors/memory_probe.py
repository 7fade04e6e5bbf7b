"""Run one huge-output command in a fresh interpreter and report the peak RSS growth.

Usage: python memory_probe.py local|ssh BYTES [host port user key_file host_key_line]

Prints a JSON object: the result's excerpt sizes, total bytes, and ``rss_growth_kib``,
the growth of the peak resident set across the big run (after a small warm-up run has
loaded everything the executor needs).

The peak is ``VmHWM`` of ``/proc/self/status``, this address space's own high-water mark:
``ru_maxrss`` survives ``exec`` on Linux, so in a child of pytest it would start at pytest's
peak and hide any growth below it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from fleetcron.executors import ExecRequest, ExecResult, LocalExecutor, SshExecutor, SshTarget


def peak_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


async def main(argv: list[str]) -> None:
    mode, size = argv[0], int(argv[1])
    big = ExecRequest(f"head -c {size} /dev/zero; head -c {size} /dev/zero >&2", timeout_s=120)
    warm = ExecRequest("head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2", timeout_s=30)
    result: ExecResult
    if mode == "local":
        local = LocalExecutor(allow_root=True)
        await local.run(warm)
        before = peak_kib()
        result = await local.run(big)
    else:
        host, port, user, key_file, host_key = argv[2:7]
        target = SshTarget("probe", host, int(port), user, Path(key_file).read_text(), host_key)
        ssh = SshExecutor()
        await ssh.run(target, warm)
        before = peak_kib()
        result = await ssh.run(target, big)
        await ssh.close()
    after = peak_kib()
    print(
        json.dumps(
            {
                "status": result.status,
                "stdout_total": result.stdout.total_bytes,
                "stderr_total": result.stderr.total_bytes,
                "stdout_kept": len(result.stdout.head) + len(result.stdout.tail),
                "stderr_kept": len(result.stderr.head) + len(result.stderr.tail),
                "truncated": result.stdout.truncated and result.stderr.truncated,
                "rss_growth_kib": after - before,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
