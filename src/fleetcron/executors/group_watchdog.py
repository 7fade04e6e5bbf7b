"""The program of the local group watchdog: one process per local executor, outside it.

A local run is one ``/bin/sh -c <command>`` started by the scheduler in a session and
process group of its own (its pgid is its pid). What ends the group at the run's
claim deadline when the scheduler cannot (killed, stopped) is this program, started
once by :class:`fleetcron.executors.local_watch.GroupWatch` with a pipe as its stdin and
detached (a double fork: its parent exits at once, so nothing of the scheduler waits for
it or holds it). It reads lines from the pipe:

* ``arm KEY TERM KILL``: a run tagged ``FLEETCRON_WATCH=KEY`` in its environment is
  about to start; SIGTERM (and SIGCONT) its process group at ``TERM``, SIGKILL it at
  ``KILL`` (seconds on ``CLOCK_BOOTTIME``, the clock of ``/proc/uptime``: monotonic,
  and counting a suspend as the claim deadline does).
* ``pgid KEY PGID``: the run started, as the leader of group ``PGID``.
* ``done KEY``: the run's group is empty; forget it.

Every second it asks (signal 0) whether each known group still has a member and forgets
the empty ones, so a group's number is not signalled after it could have been reused (as
the SSH wrapper's sweeper does). A run armed but never given its pgid (the scheduler died
while starting it) is found at its deadline by its tag in ``/proc/<pid>/environ``, which
the command cannot rewrite. At end of input (the scheduler is gone or closed its
executor) it keeps watching until every group it knows is gone or killed, then exits.

Imports only the standard library: it is run as a script (``python -I -S <this file>``).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import select
import signal
import sys
import time
from dataclasses import dataclass

WATCH_VARIABLE = "FLEETCRON_WATCH"
POLL_S = 1.0
"""How often the known groups are asked whether they still have members."""
GATHER_S = 0.05
"""After reading, how long the input is left to gather (a deadline due sooner is kept)."""
_READ = 1 << 20


def now() -> float:
    """Seconds on the deadlines' clock."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclass
class Watched:
    """One run: its deadlines and, once started, its process group."""

    term_at: float
    kill_at: float
    pgid: int | None = None


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member (signal 0)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tagged_groups(key: str, proc_root: str = "/proc") -> set[int]:
    """The process groups of the processes whose initial environment holds the tag."""
    needle = f"{WATCH_VARIABLE}={key}".encode()
    groups: set[int] = set()
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc_root}/{entry}/environ", "rb") as handle:
                environ = handle.read()
            if needle in environ.split(b"\0"):
                groups.add(os.getpgid(int(entry)))
        except OSError:
            continue
    return {group for group in groups if group > 1 and group != os.getpgrp()}


def signal_groups(groups: set[int], *signals: signal.Signals) -> None:
    for group in groups:
        for sig in signals:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)


class Watchdog:
    """The table of watched runs and what happens at their deadlines."""

    def __init__(self) -> None:
        self.runs: dict[str, Watched] = {}
        self.deadlines: list[tuple[float, str, bool]] = []
        """(when, key, final): SIGTERM at the first, SIGKILL at the final one."""
        self.next_poll = now() + POLL_S

    def line(self, text: str) -> None:
        """Act on one line of input; a malformed line is ignored."""
        words = text.split()
        with contextlib.suppress(ValueError, IndexError):
            if words[0] == "arm":
                term_at, kill_at = float(words[2]), float(words[3])
                self.runs[words[1]] = Watched(term_at, kill_at)
                heapq.heappush(self.deadlines, (term_at, words[1], False))
            elif words[0] == "pgid" and words[1] in self.runs:
                self.runs[words[1]].pgid = int(words[2])
            elif words[0] == "done":
                self.runs.pop(words[1], None)

    def due(self, at: float) -> None:
        """Signal the groups whose deadline has come, then forget the empty groups."""
        while self.deadlines and self.deadlines[0][0] <= at:
            _, key, final = heapq.heappop(self.deadlines)
            run = self.runs.get(key)
            if run is not None:
                self._deadline(key, run, final)
        if at >= self.next_poll:
            self.next_poll = at + POLL_S
            for key in [k for k, r in self.runs.items() if r.pgid and not group_alive(r.pgid)]:
                del self.runs[key]

    def _deadline(self, key: str, run: Watched, final: bool) -> None:
        if run.pgid is not None:
            groups = {run.pgid} if group_alive(run.pgid) else set()
        else:
            groups = tagged_groups(key)
        if final:
            signal_groups(groups, signal.SIGKILL)
            del self.runs[key]
            return
        signal_groups(groups, signal.SIGTERM, signal.SIGCONT)
        heapq.heappush(self.deadlines, (run.kill_at, key, True))

    def wait_s(self, at: float) -> float:
        """How long to wait for input before something is due."""
        until = self.deadlines[0][0] if self.deadlines else at + POLL_S
        if self.runs:
            until = min(until, self.next_poll)
        return max(until - at, 0.0)


def watch(fd: int) -> None:
    """Read lines from ``fd`` and act on them until the input ends and nothing is left."""
    dog = Watchdog()
    pending = b""
    reading = True
    while reading or dog.runs:
        if reading and select.select([fd], [], [], dog.wait_s(now()))[0]:
            chunk = os.read(fd, _READ)
            reading = bool(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                dog.line(line.decode("ascii", "replace"))
            # Let the next lines gather: one wake-up for many runs, not one per line.
            time.sleep(min(GATHER_S, dog.wait_s(now())))
        elif not reading:
            time.sleep(dog.wait_s(now()))
        dog.due(now())


def main() -> None:
    """Detach (print the watchdog's pid, the first process exits), then watch stdin."""
    child = os.fork()
    if child:
        os.write(1, f"{child}\n".encode())
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    watch(0)
    sys.exit(0)


if __name__ == "__main__":
    main()
