"""Run commands on this machine through ``/bin/sh -c``.

The command gets its own session and process group, so a timeout can signal every
process it started (children and grandchildren alike) with one ``killpg``. Its
environment is minimal and predictable, like cron's: see :data:`BASE_PATH` and
:meth:`LocalExecutor.environment`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
import time
from typing import Any

from fleetcron.executors.base import (
    DEFAULT_KILL_GRACE_S,
    Clock,
    ExecRequest,
    ExecResult,
    Status,
    utc_now,
)
from fleetcron.executors.output import BoundedOutput

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CHUNK = 65536


class LocalExecutor:
    """Runs requests as the current user in a fresh process group."""

    def __init__(self, *, clock: Clock = utc_now, kill_grace_s: float = DEFAULT_KILL_GRACE_S):
        self._clock = clock
        self._kill_grace_s = kill_grace_s

    @staticmethod
    def environment(request: ExecRequest) -> dict[str, str]:
        """PATH, HOME, LOGNAME, USER, LANG=C.UTF-8, SHELL=/bin/sh, then the request's env."""
        user = pwd.getpwuid(os.geteuid())
        env = {
            "PATH": BASE_PATH,
            "HOME": user.pw_dir,
            "LOGNAME": user.pw_name,
            "USER": user.pw_name,
            "LANG": "C.UTF-8",
            "SHELL": "/bin/sh",
        }
        env.update(request.env)
        return env

    async def run(self, request: ExecRequest) -> ExecResult:
        """Run the command; see :class:`fleetcron.executors.base.Executor`."""
        stdout = BoundedOutput(request.output_limit)
        stderr = BoundedOutput(request.output_limit)
        started_at = self._clock()
        t0 = time.monotonic()
        env = self.environment(request)
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            request.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=env["HOME"],
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        readers = asyncio.gather(_drain(proc.stdout, stdout), _drain(proc.stderr, stderr))
        status: Status
        error: str | None = None
        exit_code: int | None
        try:
            # Wait for the pipes to close too: a background child still holding them is
            # still part of the job.
            async with asyncio.timeout(request.timeout_s):
                await asyncio.shield(readers)
                exit_code = await proc.wait()
            status = "succeeded" if exit_code == 0 else "failed"
        except TimeoutError:
            await self._kill_group(proc, readers, self._kill_grace_s)
            status, exit_code = "timed_out", None
            error = f"timed out after {request.timeout_s:g} s; process group killed"
        except asyncio.CancelledError:
            # Cancelled by the caller: never leave the job running behind our back.
            await asyncio.shield(self._kill_group(proc, readers, 0))
            raise
        return ExecResult(
            status=status,
            exit_code=exit_code,
            stdout=stdout.excerpt(),
            stderr=stderr.excerpt(),
            started_at=started_at,
            finished_at=self._clock(),
            duration_ms=int((time.monotonic() - t0) * 1000),
            error=error,
        )

    async def kill_older_generations(self, generation: int) -> int:
        """Kill every process group on this machine started by fleetcron for a run tagged
        with a generation lower than ``generation``; return how many groups were killed.
        """
        raise NotImplementedError  # implemented with the watchdog supervisor

    async def _kill_group(
        self, proc: asyncio.subprocess.Process, readers: asyncio.Future[Any], grace_s: float
    ) -> None:
        _signal_group(proc.pid, signal.SIGTERM)
        # Closed pipes and a reaped shell mean the group has exited; killpg(pgid, 0) would
        # not tell, as unreaped zombies still count as members.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(asyncio.shield(readers), proc.wait()), grace_s)
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        readers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await readers


async def _drain(stream: asyncio.StreamReader, sink: BoundedOutput) -> None:
    while chunk := await stream.read(_CHUNK):
        sink.feed(chunk)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
