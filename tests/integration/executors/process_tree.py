"""A run's process tree on this machine (also the loopback SSH target), read from /proc.

A run's processes are found while it runs by its tag: ``FLEETCRON_RUN_ID=<id>`` in the
initial environment (``/proc/<pid>/environ``) of every process the wrapper started. After
the run ends, :func:`leftovers` lists which of them still exist in any state, a zombie
(``<defunct>``) included.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from waiting import eventually


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int


def read(pid: int) -> Proc | None:
    """The process ``pid`` now, or ``None`` when it no longer exists (not even a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace")
    fields = stat.rsplit(b")", 1)[1].split()
    return Proc(pid, comm, fields[0].decode(), int(fields[1]), int(fields[2]))


def tagged(run_id: int) -> list[Proc]:
    """The live processes carrying the run's tag."""
    wanted = f"FLEETCRON_RUN_ID={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if wanted in environ:
            proc = read(int(entry))
            if proc is not None:
                found.append(proc)
    return found


def leftovers(pids: set[int], within_s: float) -> list[Proc]:
    """Which of ``pids`` still exist, zombies included, after waiting up to ``within_s``
    for them to go (an orphan's zombie is reaped by the machine's init, not at once)."""

    def left() -> list[Proc]:
        return [proc for proc in map(read, sorted(pids)) if proc is not None]

    # Not a failure here: the negative controls expect some to stay, and get them.
    with contextlib.suppress(AssertionError):
        eventually(lambda: not left(), within_s, f"{sorted(pids)} to go")
    return left()
