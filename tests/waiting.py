"""Waiting for something that happens asynchronously, with a deadline and a message.

One helper for every polling wait in the suite: :func:`eventually` polls a predicate until
it holds or ``timeout`` seconds pass, then fails the test saying what it waited for and how
long; :func:`eventually_async` does the same without blocking the event loop (its predicate
may be a coroutine function). Both return the predicate's first true value, so a wait for
"the runs, once they are all finished" is one call. The message may be a callable, read
only when the wait fails (the state at that moment: a log, the rows seen). A test never
sleeps a fixed time hoping that something has happened by then, and no other module of
the suite sleeps in a loop (tests/unit/test_suite_layout.py checks it).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

__all__ = ["eventually", "eventually_async"]

T = TypeVar("T")

#: What the wait was for: a text, or a callable that says it (and the state) at the timeout.
Message = str | Callable[[], object]


def _timed_out(message: Message, timeout: float) -> AssertionError:
    what = message if isinstance(message, str) else message()
    return AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def eventually(
    predicate: Callable[[], T | None],
    timeout: float = 10.0,
    message: Message = "the condition",
    *,
    interval: float = 0.05,
) -> T:
    """Poll ``predicate`` every ``interval`` seconds until it returns a true value, and
    return that value; fail after ``timeout``. An exception from ``predicate`` (a failed
    ``assert`` that a watched process is still alive) ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(message, timeout)
        time.sleep(interval)


@overload
async def eventually_async(
    predicate: Callable[[], Awaitable[T | None]],
    timeout: float = ...,
    message: Message = ...,
    *,
    interval: float = ...,
) -> T: ...


@overload
async def eventually_async(
    predicate: Callable[[], T | None],
    timeout: float = ...,
    message: Message = ...,
    *,
    interval: float = ...,
) -> T: ...


async def eventually_async(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    message: Message = "the condition",
    *,
    interval: float = 0.02,
) -> object:
    """:func:`eventually` on the running event loop: the loop runs while it waits, and
    ``predicate`` may return an awaitable (an ``async def``), which is awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(message, timeout)
        await asyncio.sleep(interval)
