"""The host probe's I/O: one fresh SSH connection to a target, then closed.

Not the pooled connection (:mod:`fleetcron.executors.ssh_pool`): a pooled connection keeps
working after the target's ``sshd`` stopped, while every new one (the next pool refill, a
restart) fails. A probe does what a new connection needs — TCP connect, SSH handshake
accepting only the pinned host key, public-key login (:func:`~fleetcron.executors.
ssh_connect.open_pinned`) — runs nothing, and closes. Its state comes from
:func:`fleetcron.core.reach.reach_of`. :func:`probe_many` probes a batch with at most
``concurrency`` connections open at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fleetcron.core.reach import Reach, error_text, reach_of
from fleetcron.executors.base import SshTarget
from fleetcron.executors.ssh_connect import import_private_key, open_pinned


@dataclass(frozen=True)
class ProbeResult:
    """What one probe of a target found."""

    target_id: int
    reach: Reach
    error: str | None
    seconds: float


async def probe(target: SshTarget, timeout_s: float) -> tuple[Reach, str | None]:
    """Open a fresh connection to ``target`` and close it: its state and the error text
    (None when reachable). Never raises but on cancellation."""
    try:
        async with asyncio.timeout(timeout_s):
            conn, _ = await open_pinned(target, import_private_key(target), timeout_s)
            conn.close()
            await conn.wait_closed()
    except Exception as exc:  # every failure is a state, never an error of the round
        if isinstance(exc, TimeoutError) and not str(exc):
            exc = TimeoutError(f"no answer from {target.host}:{target.port} in {timeout_s:g} s")
        return reach_of(exc), error_text(exc)
    return Reach.REACHABLE, None


async def probe_many(
    targets: Sequence[tuple[int, SshTarget]],
    *,
    timeout_s: float,
    concurrency: int,
    clock: Callable[[], float] = time.monotonic,
) -> list[ProbeResult]:
    """Probe each (id, target), at most ``concurrency`` at once; one result each."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(target_id: int, target: SshTarget) -> ProbeResult:
        async with gate:
            started = clock()
            state, error = await probe(target, timeout_s)
            return ProbeResult(target_id, state, error, clock() - started)

    return list(await asyncio.gather(*(one(tid, t) for tid, t in targets)))


__all__ = ["ProbeResult", "probe", "probe_many"]
