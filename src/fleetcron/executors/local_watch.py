"""The scheduler's side of the local group watchdog, and the claim file of a local run.

A local command run as the scheduler's own user is one process: ``/bin/sh -c`` started
in a session of its own. Its claim deadline holds without the scheduler because one
watchdog process per executor (:mod:`fleetcron.executors.group_watchdog`, started on the
first run and detached) is told each run's deadlines before the command starts, and its
process group once it has: the run costs that process three short lines on a pipe
instead of the two extra processes (a wrapper shell and ``timeout``) of the SSH
wrapper. The claim file the command's ``fleetcron_claim_live`` reads is written here, in
the same format and on the same clock (``/proc/uptime``) as the wrapper writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import logging
import os
import secrets
import subprocess
import sys
import time
import weakref
from typing import Final

from fleetcron.executors import group_watchdog
from fleetcron.executors.group_watchdog import WATCH_VARIABLE
from fleetcron.executors.watchdog import ClaimFileFields

logger = logging.getLogger(__name__)

WATCHDOG_UNAVAILABLE: Final = "the local watchdog could not be started"
"""Start of ``ExecResult.error`` when a run could not be put under the watchdog (the
command was not started)."""
_LAUNCH_TIMEOUT_S: Final = 30.0
_PIPE_BYTES: Final = 1 << 20
"""The pipe's capacity asked for (Linux's default ``pipe-max-size``): some 20,000 lines."""
_FULL_RETRIES: Final = 5
_FULL_WAIT_S: Final = 0.05


SUPPORTED: Final = hasattr(time, "CLOCK_BOOTTIME") and os.path.exists("/proc/self/environ")
"""Whether this machine has what the group watchdog needs (Linux: ``CLOCK_BOOTTIME``, the
clock of /proc/uptime, and /proc); elsewhere every local command runs under the wrapper."""


def boot_clock() -> float:
    """Seconds on the watchdog's clock (``CLOCK_BOOTTIME``, the clock of /proc/uptime)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


class GroupWatch:
    """One watchdog process and the pipe to it; relaunched when it is found gone.

    ``arm`` is written before the command starts, so a scheduler killed while it starts
    the command still leaves a deadline behind (found by the run's tag,
    :data:`~fleetcron.executors.group_watchdog.WATCH_VARIABLE`); ``started`` and ``done``
    follow. ``close`` (or the object's end) closes the pipe: the watchdog then finishes
    the groups it knows and exits."""

    def __init__(self) -> None:
        self._token = secrets.token_hex(6)
        self._serial = itertools.count(1)
        self._fd: list[int] = []
        self._held: list[str] = []
        self._flush_soon = False
        self._lock = asyncio.Lock()
        self.pid: int | None = None
        weakref.finalize(self, _close_all, self._fd)

    def key(self) -> str:
        """A tag no other run on this machine carries."""
        return f"{self._token}-{next(self._serial)}"

    async def arm(self, key: str, term_at: float, kill_at: float) -> None:
        """Put a run's deadlines in the watchdog's hands before its command starts (with
        the lines still held back, in order); raise ``OSError`` if it cannot be done (then
        the run must not start)."""
        self._held.append(f"arm {key} {term_at:.3f} {kill_at:.3f}\n")
        async with self._lock:
            for attempt in range(_FULL_RETRIES):
                if not self._fd:
                    await asyncio.to_thread(self._launch)
                if self._flush():
                    return
                if self._fd:  # the pipe is full: the watchdog reads every POLL_S
                    await asyncio.sleep(_FULL_WAIT_S * (attempt + 1))
        raise OSError(f"{WATCHDOG_UNAVAILABLE}: it does not read its input")

    def started(self, key: str, pgid: int) -> None:
        self._hold(f"pgid {key} {pgid}\n")

    def done(self, key: str) -> None:
        self._hold(f"done {key}\n")

    def close(self) -> None:
        self._flush()
        _close_all(self._fd)

    def _hold(self, line: str) -> None:
        """Queue a line; the lines of one turn of the event loop go in one write."""
        self._held.append(line)
        if not self._flush_soon:
            self._flush_soon = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> bool:
        """Write the held lines; False when they could not all be written (the watchdog is
        gone: its pipe closed and a new one is needed; or its pipe is full)."""
        self._flush_soon = False
        if not self._fd:
            return False
        data = "".join(self._held).encode()
        try:
            written = os.write(self._fd[0], data)
        except BlockingIOError:
            written = 0
        except OSError:
            _close_all(self._fd)
            return False
        # What did not fit stays held and follows (the watchdog joins a split line).
        self._held[:] = [data[written:].decode()] if written < len(data) else []
        return not self._held

    def _launch(self) -> None:
        """Start a watchdog (it detaches: the launched process exits once it has)."""
        _close_all(self._fd)
        read_end, write_end = os.pipe()
        try:
            launched = subprocess.run(
                [sys.executable, "-I", "-S", group_watchdog.__file__],
                stdin=read_end,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={},
                cwd="/",
                start_new_session=True,
                timeout=_LAUNCH_TIMEOUT_S,
                check=True,
            )
            self.pid = int(launched.stdout.split()[0])
        except (subprocess.SubprocessError, ValueError, IndexError) as exc:
            os.close(write_end)
            raise OSError(f"{WATCHDOG_UNAVAILABLE}: {exc}") from exc
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)
        with contextlib.suppress(OSError, AttributeError):
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        self._fd.append(write_end)
        logger.info(
            "local watchdog started (pid %d)",
            self.pid,
            extra={"action": "local.watchdog_started", "pid": self.pid},
        )


def _close_all(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


def write_claim_file(
    path: str, *, deadline_at: float, fields: ClaimFileFields, token: str | None
) -> str:
    """Write the run's claim file (``uptime <centiseconds> <generation> <token> <scope>``,
    as the wrapper writes it; its directory made with mode 0700 when missing); its path,
    or ``""`` when it could not be written (which the check reads as "not live")."""
    generation_word, scope = fields.words()
    line = f"uptime {round(deadline_at * 100)} {generation_word} {token or '-'} {scope}\n"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, flags, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except (OSError, UnicodeEncodeError):
        return ""
    return path


__all__ = ["SUPPORTED", "WATCH_VARIABLE", "GroupWatch", "boot_clock", "write_claim_file"]
