"""Waiting for something that happens asynchronously, with a deadline and a message.

One helper for every polling wait in the suite: :func:`eventually` polls a predicate until
it holds or ``timeout`` seconds pass, then fails the test saying what it waited for and how
long; :func:`eventually_async` does the same without blocking the event loop. A test never
sleeps a fixed time hoping that something has happened by then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["eventually", "eventually_async"]


def _timed_out(message: str, timeout: float) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g}s waiting for {message}")


def eventually(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    message: str = "the condition",
    *,
    interval: float = 0.05,
) -> None:
    """Poll ``predicate`` every ``interval`` seconds until it is true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise _timed_out(message, timeout)
        time.sleep(interval)


async def eventually_async(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    message: str = "the condition",
    *,
    interval: float = 0.02,
) -> None:
    """:func:`eventually` on the running event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise _timed_out(message, timeout)
        await asyncio.sleep(interval)
