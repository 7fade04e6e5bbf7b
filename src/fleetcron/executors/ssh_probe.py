"""The host probe's I/O: one fresh SSH connection to a target, then closed.

Not the pooled connection (:mod:`fleetcron.executors.ssh_pool`): a pooled connection keeps
working after the target's ``sshd`` stopped, while every new one (the next pool refill, a
restart) fails. A probe does what a new connection needs — TCP connect, SSH handshake
accepting only the pinned host key, public-key login (:func:`~fleetcron.executors.
ssh_connect.open_pinned`) — runs nothing, and closes. Its state comes from
:func:`fleetcron.core.reach.reach_of`. :func:`probe_many` probes a batch with at most
``concurrency`` connections open at once.

A target behind jump hosts is probed through a fresh chain: each hop is connected to
through the one before it (:func:`~fleetcron.executors.ssh_jump.open_hop`, never the
executor's pooled jump host connections), then the target is logged in to through the
last; it is never connected to directly. A failure on a hop names that hop (``jump host
b1: connection refused: …``) and the result carries the hop's name (:attr:`ProbeResult.hop`),
so that the store records it as the jump host's failure too and the host incident is the
jump host's own (:mod:`fleetcron.services.targets.reach`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass

import asyncssh

from fleetcron.core.reach import Reach, error_text, reach_of
from fleetcron.errors import FleetcronError
from fleetcron.executors.base import SshTarget
from fleetcron.executors.ssh_connect import import_private_key, open_pinned
from fleetcron.executors.ssh_jump import hop_key, open_hop, through

#: Probes open at once through one jump host (its own apart): the bastion's sshd sees
#: at most this many unauthenticated connections from the probe, under its
#: ``MaxStartups`` (10 by default, past which it drops new ones), so that many targets
#: behind one bastion do not make the bastion look down.
PER_FIRST_HOP = 4


@dataclass(frozen=True)
class ProbeResult:
    """What one probe of a target found."""

    target_id: int
    reach: Reach
    error: str | None
    seconds: float
    #: The jump host whose connection failed (None: none did).
    hop: str | None = None


@dataclass(frozen=True)
class Found:
    """What one fresh connection found: the state, the error text (None when reachable)
    and the jump host that failed (None: none did, or the target has none)."""

    reach: Reach
    error: str | None = None
    hop: str | None = None


async def probe(target: SshTarget, timeout_s: float) -> tuple[Reach, str | None]:
    """Open a fresh connection to ``target`` (through a fresh chain of its jump hosts) and
    close it: its state and the error text (None when reachable). Never raises but on
    cancellation."""
    found = await probe_path(target, timeout_s)
    return found.reach, found.error


async def probe_path(target: SshTarget, timeout_s: float) -> Found:
    """:func:`probe`, with the jump host that failed when one did."""
    at: list[SshTarget] = []
    try:
        async with asyncio.timeout(timeout_s), AsyncExitStack() as stack:
            tunnel = await _open_hops(target, timeout_s, stack, at)
            conn, _ = await open_pinned(
                target, import_private_key(target), timeout_s, tunnel=tunnel
            )
            stack.push_async_callback(_closed, conn)
    except Exception as exc:  # every failure is a state, never an error of the round
        hop = at[-1] if at else None
        return Found(
            reach_of(exc),
            error_text(_named(target, hop, exc, timeout_s)),
            hop.name if hop else None,
        )
    return Found(Reach.REACHABLE)


async def _open_hops(
    target: SshTarget, timeout_s: float, stack: AsyncExitStack, at: list[SshTarget]
) -> asyncssh.SSHClientConnection | None:
    """Connect to each jump host of ``target`` through the one before it; ``at`` holds the
    hop being connected to (emptied once they all are)."""
    tunnel: asyncssh.SSHClientConnection | None = None
    for hop in target.via:
        at[:] = [hop]
        tunnel, _ = await open_hop(hop, timeout_s, tunnel)
        stack.push_async_callback(_closed, tunnel)
    at.clear()
    return tunnel


async def _closed(conn: asyncssh.SSHClientConnection) -> None:
    conn.close()
    await conn.wait_closed()


def _named(
    target: SshTarget, hop: SshTarget | None, exc: Exception, timeout_s: float
) -> BaseException:
    """The error as an operator reads it: the hop or the target it concerns named."""
    if isinstance(exc, TimeoutError) and not str(exc):
        where = hop or target
        text = f"no answer from {where.host}:{where.port} in {timeout_s:g} s"
        if hop is not None:
            return TimeoutError(f"jump host {hop.name}: {text}")
        return through(target, FleetcronError(text)) if target.via else TimeoutError(text)
    if isinstance(exc, FleetcronError) and hop is None:
        return through(target, exc)
    return exc


async def probe_many(
    targets: Sequence[tuple[int, SshTarget]],
    *,
    timeout_s: float,
    concurrency: int,
    clock: Callable[[], float] = time.monotonic,
) -> list[ProbeResult]:
    """Probe each (id, target), at most ``concurrency`` at once, and at most
    :data:`PER_FIRST_HOP` at once through one jump host; one result each."""
    gate = asyncio.Semaphore(max(1, concurrency))
    hops: dict[str, asyncio.Semaphore] = {}

    def hop_gate(target: SshTarget) -> AbstractAsyncContextManager[object]:
        if not target.via:
            return contextlib.nullcontext()
        return hops.setdefault(hop_key(target.via[0]), asyncio.Semaphore(PER_FIRST_HOP))

    async def one(target_id: int, target: SshTarget) -> ProbeResult:
        async with hop_gate(target), gate:
            started = clock()
            found = await probe_path(target, timeout_s)
            return ProbeResult(
                target_id, found.reach, found.error, clock() - started, hop=found.hop
            )

    return list(await asyncio.gather(*(one(tid, t) for tid, t in targets)))


__all__ = ["PER_FIRST_HOP", "Found", "ProbeResult", "probe", "probe_many", "probe_path"]
