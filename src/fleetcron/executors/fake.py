"""An executor that runs nothing: scripted outcomes after a simulated duration.

For tests (and benchmarks) about scheduling rather than execution: no process, no
connection, only a sleep (``asyncio.sleep`` on the event loop unless ``sleep`` is given: a
test on a fake clock passes one that moves that clock, so a simulated 30 s run costs no real
30 s). A scheduler test that needs a run to last a while costs that while and nothing else
(and a short duration costs almost nothing). It honours the parts of the request the
scheduler relies on: the timeout (and the claim deadline as ``watchdog_s``) end a run as
``timed_out``, output is bounded by ``output_limit`` like the real executors', and
cancelling ``run`` cancels the sleep (the run is gone, as a killed process group is).

Outcomes are chosen per request by ``script``: a mapping from the command to a
:class:`FakeOutcome`, or a function of the target and request; a command it does not name
succeeds at once. Every call is kept in ``calls`` for the test to inspect.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime

from fleetcron.executors.base import (
    Clock,
    ExecRequest,
    ExecResult,
    RunTarget,
    Status,
    timeout_error,
    utc_now,
)
from fleetcron.executors.output import STOPPED, BoundedOutput, StopRequested, unless_stopped


@dataclass(frozen=True)
class FakeOutcome:
    """How a simulated run ends: ``exit_code`` after ``duration_s`` seconds with the given
    output, or, when ``error`` is set, never started (``connect_error``)."""

    exit_code: int = 0
    duration_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    error: str | None = None


SUCCEED: FakeOutcome = FakeOutcome()

Script = Mapping[str, FakeOutcome] | Callable[[RunTarget, ExecRequest], FakeOutcome]
#: How a simulated run waits out its duration: ``asyncio.sleep``, or a fake clock's sleep.
Sleep = Callable[[float], Awaitable[object]]


class FakeExecutor:
    """An :class:`~fleetcron.executors.base.Executor` for any target kind."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        clock: Clock = utc_now,
        concurrency: int | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.script: Script = script if script is not None else {}
        self._clock = clock
        self._sleep = sleep
        self._slots = asyncio.Semaphore(concurrency) if concurrency is not None else None
        self.calls: list[tuple[RunTarget, ExecRequest]] = []
        self.closed = False

    def admit(self) -> AbstractAsyncContextManager[object]:
        return self._slots if self._slots is not None else contextlib.nullcontext()

    def outcome(self, target: RunTarget, request: ExecRequest) -> FakeOutcome:
        if callable(self.script):
            return self.script(target, request)
        return self.script.get(request.command, SUCCEED)

    async def run(self, target: RunTarget, request: ExecRequest) -> ExecResult:
        self.calls.append((target, request))
        outcome = self.outcome(target, request)
        started_at = self._clock()
        t0 = time.monotonic()
        if outcome.error is not None:
            return self._result(
                "connect_error",
                None,
                FakeOutcome(),
                request,
                started_at=started_at,
                t0=t0,
                error=outcome.error,
            )
        limit = request.timeout_s
        if request.watchdog_s is not None:
            limit = min(limit, request.watchdog_s)
        if request.live is not None:  # followers see the output at once
            request.live.feed(outcome.stdout.encode() + outcome.stderr.encode())
        timed_out = outcome.duration_s > limit
        try:
            await unless_stopped(
                self._wait(limit if timed_out else outcome.duration_s), request.live
            )
        except StopRequested:
            return self._result(
                "failed", None, outcome, request, started_at=started_at, t0=t0, error=STOPPED
            )
        if timed_out:
            error = timeout_error(request.timeout_s, limit, "simulated run stopped")
            return self._result(
                "timed_out", None, outcome, request, started_at=started_at, t0=t0, error=error
            )
        status: Status = "succeeded" if outcome.exit_code == 0 else "failed"
        return self._result(
            status, outcome.exit_code, outcome, request, started_at=started_at, t0=t0, error=None
        )

    async def _wait(self, seconds: float) -> None:
        await self._sleep(seconds)

    async def close(self) -> None:
        self.closed = True

    def _result(
        self,
        status: Status,
        exit_code: int | None,
        outcome: FakeOutcome,
        request: ExecRequest,
        *,
        started_at: datetime,
        t0: float,
        error: str | None,
    ) -> ExecResult:
        stdout, stderr = BoundedOutput(request.output_limit), BoundedOutput(request.output_limit)
        stdout.feed(outcome.stdout.encode())
        stderr.feed(outcome.stderr.encode())
        return ExecResult.ended(
            status,
            exit_code,
            error,
            stdout=stdout.excerpt(),
            stderr=stderr.excerpt(),
            started_at=started_at,
            finished_at=self._clock(),
            t0=t0,
        )
