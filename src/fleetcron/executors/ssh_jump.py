"""Jump hosts: reaching a target through one bastion, or a chain of them.

A target with ``via`` is never connected to directly: each hop is connected to through
the one before it (asyncssh's ``tunnel=``, one ``direct-tcpip`` channel on the previous
hop's connection), each with its own pinned host key and client key. A failure on a hop
names that hop (``jump host b1: connection refused: 10.0.0.1:22``), not the target.

:class:`JumpPool` keeps the executor's jump host connections: every pooled target
connection behind a jump host holds one of its connections, at most
``max_connections`` per jump host, each carrying up to ``targets_per_connection``
targets before another is opened (past the limit, the least loaded one takes more). A
jump host connection closes when the last target connection over it closes. Pairing
(:func:`verify_via`, :func:`fetch_host_key_via`) opens its own chain for one check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TypeVar

import asyncssh

from fleetcron.errors import ConnectError, FleetcronError
from fleetcron.executors.base import SshTarget
from fleetcron.executors.ssh_connect import (
    KEEPALIVE_S,
    PinnedClient,
    fetch_host_key,
    import_private_key,
    keep_alive,
    key_digest,
    open_pinned,
    verify_target,
)

T = TypeVar("T")

ChainKey = tuple[str, ...]


@dataclass(frozen=True)
class JumpLimits:
    """How jump host connections are shared (the ``ssh_jump_*`` settings)."""

    max_connections: int = 8
    targets_per_connection: int = 64


def hop_key(hop: SshTarget) -> str:
    """One hop as pooled: where, as whom, with which key and pinned host key."""
    return f"{hop.user}@{hop.host}:{hop.port}/{key_digest(hop)}/{hop.host_key or hop.host_ca}"


def chain_key(hops: tuple[SshTarget, ...]) -> ChainKey:
    return tuple(hop_key(hop) for hop in hops)


def on_hop(hop: SshTarget, exc: FleetcronError) -> FleetcronError:
    """``exc`` (raised connecting to ``hop``) as the hop's failure, of the same type."""
    failure = type(exc)(f"jump host {hop.name}: {exc.message}")
    return failure


def through(target: SshTarget, exc: FleetcronError) -> FleetcronError:
    """A failure reaching ``target`` past its jump hosts, saying which way it went."""
    if not target.via or exc.message.startswith("jump host "):
        return exc
    path = " -> ".join(hop.name for hop in target.via)
    return type(exc)(f"target {target.name} (via {path}): {exc.message}")


async def open_hop(
    hop: SshTarget, timeout_s: float, tunnel: asyncssh.SSHClientConnection | None
) -> tuple[asyncssh.SSHClientConnection, PinnedClient]:
    """Connect to one jump host (through ``tunnel`` when it has one before it)."""
    try:
        return await open_pinned(hop, import_private_key(hop), timeout_s, tunnel=tunnel)
    except FleetcronError as exc:
        raise on_hop(hop, exc) from exc
    except (OSError, asyncssh.Error) as exc:
        raise on_hop(hop, ConnectError(f"connection lost during the handshake: {exc}")) from exc


async def _through_chain(
    hops: tuple[SshTarget, ...],
    timeout_s: float,
    step: Callable[[asyncssh.SSHClientConnection], Awaitable[T]],
) -> T:
    """Open ``hops`` one through the other, run ``step`` on the last, close them all."""
    async with AsyncExitStack() as stack:
        tunnel: asyncssh.SSHClientConnection | None = None
        for hop in hops:
            conn, _ = await open_hop(hop, timeout_s, tunnel)
            await stack.enter_async_context(conn)
            tunnel = conn
        assert tunnel is not None
        return await step(tunnel)


async def verify_via(
    target: SshTarget, timeout_s: float, *, probe: str | None = None
) -> str | None:
    """:func:`~fleetcron.executors.ssh_connect.verify_target` through ``target.via`` (or
    directly when it has none)."""
    if not target.via:
        return await verify_target(target, timeout_s, probe=probe)

    async def step(tunnel: asyncssh.SSHClientConnection) -> str | None:
        try:
            return await verify_target(target, timeout_s, probe=probe, tunnel=tunnel)
        except FleetcronError as exc:
            raise through(target, exc) from exc

    return await _through_chain(target.via, timeout_s, step)


async def login_via(target: SshTarget, timeout_s: float) -> None:
    """Log in to a jump host (through its own jump hosts) and log out: a jump host need
    only allow forwarding, so no command is run there."""

    async def step(_: asyncssh.SSHClientConnection) -> None:
        return None

    await _through_chain((*target.via, target), timeout_s, step)


async def fetch_host_key_via(
    hops: tuple[SshTarget, ...], host: str, port: int, timeout_s: float
) -> str:
    """The host key ``host:port`` presents, reached through ``hops`` (directly without)."""
    if not hops:
        return await fetch_host_key(host, port, timeout_s)

    async def step(tunnel: asyncssh.SSHClientConnection) -> str:
        try:
            return await fetch_host_key(host, port, timeout_s, tunnel=tunnel)
        except FleetcronError as exc:
            path = " -> ".join(hop.name for hop in hops)
            raise type(exc)(f"{host}:{port} (via {path}): {exc.message}") from exc

    return await _through_chain(hops, timeout_s, step)


@dataclass
class JumpConn:
    """One pooled connection to a jump host and the target connections it carries."""

    key: ChainKey
    conn: asyncssh.SSHClientConnection
    client: PinnedClient
    #: The connection to the hop before this one (chains), held while this one lives.
    parent: JumpConn | None
    users: int = 0

    @property
    def usable(self) -> bool:
        return not self.client.lost


class JumpPool:
    """Jump host connections shared by the target connections behind them (see the
    module docstring)."""

    def __init__(
        self, *, max_connections: int, targets_per_connection: int, connect_timeout_s: float
    ) -> None:
        self.max_connections = max_connections
        self.targets_per_connection = targets_per_connection
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = KEEPALIVE_S
        self._conns: dict[ChainKey, list[JumpConn]] = {}
        self._locks: dict[ChainKey, asyncio.Lock] = {}
        self.connections_opened = 0
        """Jump host handshakes so far (a reused connection does not count)."""

    def limit(self, limits: JumpLimits) -> None:
        """Apply the ``ssh_jump_*`` settings (to connections opened from now on)."""
        self.max_connections = limits.max_connections
        self.targets_per_connection = limits.targets_per_connection

    def open_count(self, hops: tuple[SshTarget, ...]) -> int:
        """Connections open now to the last of ``hops`` (reached through the others)."""
        return len(self._conns.get(chain_key(hops), ()))

    async def acquire(self, hops: tuple[SshTarget, ...], deadline_s: float) -> JumpConn:
        """A connection to the last of ``hops`` for one target connection more; opened
        (through the hops before it) when none may take it."""
        key = chain_key(hops)
        async with self._locks.setdefault(key, asyncio.Lock()):
            conns = self._conns.setdefault(key, [])
            conns[:] = [jc for jc in conns if jc.usable or jc.users]
            live = [jc for jc in conns if jc.usable]
            least = min(live, key=lambda jc: jc.users, default=None)
            full = least is None or least.users >= self.targets_per_connection
            if full and len(live) < self.max_connections:
                least = await self._open(hops, key, deadline_s)
                conns.append(least)
            assert least is not None
            least.users += 1
            return least

    async def _open(
        self, hops: tuple[SshTarget, ...], key: ChainKey, deadline_s: float
    ) -> JumpConn:
        parent = await self.acquire(hops[:-1], deadline_s) if len(hops) > 1 else None
        timeout = max(min(self.connect_timeout_s, deadline_s - time.monotonic()), 0.1)
        try:
            conn, client = await open_hop(hops[-1], timeout, parent.conn if parent else None)
        except BaseException:
            if parent is not None:
                self.release(parent)
            raise
        self.connections_opened += 1
        keep_alive(conn, self.keepalive_s)
        return JumpConn(key, conn, client, parent)

    def release(self, jump: JumpConn) -> None:
        """One target connection over ``jump`` fewer; the last one closes it."""
        jump.users -= 1
        if jump.users > 0:
            return
        conns = self._conns.get(jump.key, [])
        if jump in conns:
            conns.remove(jump)
        jump.conn.close()
        if jump.parent is not None:
            self.release(jump.parent)

    async def close(self) -> None:
        """Close every jump host connection (their target connections are closed first)."""
        every = [jc for conns in self._conns.values() for jc in conns]
        self._conns.clear()
        for jc in every:
            jc.conn.close()
        for jc in every:
            await jc.conn.wait_closed()
