"""Finding a test's processes on this machine (also the loopback SSH target) by /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid


def marker_seconds() -> str:
    """A unique sleep duration, so only this test's processes ever match."""
    return f"600.{uuid.uuid4().int % 10**9:09d}"


def sleeping(seconds: str) -> list[int]:
    """Pids of live (not zombie) ``sleep <seconds>`` processes."""
    wanted = f"sleep\0{seconds}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read() != wanted:
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z":
            pids.append(int(entry))
    return pids


def kill_all(*markers: str) -> None:
    """Clean up after a negative control: kill whatever still sleeps."""
    for marker in markers:
        for pid in sleeping(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
