"""The SSH executor's connection pool: one connection per (host, port, user, client key,
pinned host key), shared by concurrent runs as separate sessions.

Idle connections expire after ``idle_timeout_s`` (on a timer, and before every acquire);
the pool holds at most ``max_connections`` and, when full, closes the least recently used
idle connection to make room. Idle connections are kept in release order, so expiry and
eviction take them from the head: amortised O(1) per acquire, whatever the pool's size.
Only one handshake per key is in flight at a time (later runs wait for it and reuse it),
at most ``max_connecting`` overall; a handshake dropped before the banner (sshd's
``MaxStartups``) or reset is retried with capped exponential backoff and jitter for as
long as the run's budget lasts, the handshake slot given back while waiting.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import asyncssh

from fleetcron.errors import ConnectError, FleetcronError
from fleetcron.executors.base import SshTarget
from fleetcron.executors.ssh_connect import (
    KEEPALIVE_S,
    RETRYABLE,
    PinnedClient,
    import_private_key,
    keep_alive,
    key_digest,
    open_pinned,
)
from fleetcron.executors.ssh_jump import (
    ChainKey,
    JumpConn,
    JumpLimits,
    JumpPool,
    chain_key,
    through,
)

# The executor's logger: pool events are the SSH executor's events.
logger = logging.getLogger("fleetcron.executors.ssh")

PoolKey = tuple[str, int, str, str, str, ChainKey]


def pool_key(target: SshTarget) -> PoolKey:
    """A target as pooled; the same server reached another way is another connection."""
    return (
        target.host,
        target.port,
        target.user,
        key_digest(target),
        target.host_key or target.host_ca,
        chain_key(target.via),
    )


@dataclass
class Pooled:
    conn: asyncssh.SSHClientConnection
    client: PinnedClient
    users: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    #: The jump host connection this one goes through (held while it is open).
    jump: JumpConn | None = None

    @property
    def usable(self) -> bool:
        return not self.client.lost


class SshPool:
    """Pooled, host-key-pinned connections; see the module docstring for the rules.

    :meth:`acquire` gives a connection (opened when there is none or it was lost) to one
    user more; :meth:`release` gives it back, to be reused or to expire."""

    def __init__(
        self,
        *,
        max_connections: int,
        idle_timeout_s: float,
        connect_timeout_s: float,
        connect_attempts: int | None,
        connect_backoff_s: float,
        connect_backoff_max_s: float,
        max_connecting: int,
    ) -> None:
        self.max_connections = max_connections
        self.keepalive_s = KEEPALIVE_S
        """Seconds without traffic before a pooled connection sends a keepalive
        (:meth:`keep_alive_every`)."""
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.connect_attempts = connect_attempts
        self.connect_backoff_s = connect_backoff_s
        self.connect_backoff_max_s = max(connect_backoff_max_s, connect_backoff_s)
        self.connecting = asyncio.Semaphore(max_connecting)
        self._connect_locks: dict[PoolKey, asyncio.Lock] = {}
        self._pool: dict[PoolKey, Pooled] = {}
        # The pooled connections nobody uses, least recently released first.
        self._idle: OrderedDict[PoolKey, Pooled] = OrderedDict()
        self._opening = 0
        self._expiry: asyncio.TimerHandle | None = None
        self._keys: dict[str, asyncssh.SSHKey] = {}
        self.connections_opened = 0
        """Successful handshakes so far; a reused connection does not count."""
        self.connect_retries = 0
        """Handshakes retried after the server dropped or reset them."""
        self.jumps = JumpPool(
            max_connections=JumpLimits.max_connections,
            targets_per_connection=JumpLimits.targets_per_connection,
            connect_timeout_s=connect_timeout_s,
        )
        """The jump host connections the pooled ones go through."""

    def keep_alive_every(self, seconds: float) -> None:
        """Apply ``ssh_keepalive_s`` (0: none) to the connections opened from now on, the
        jump hosts' too: one that received nothing for ``seconds`` sends a keepalive, and
        is closed after 3 unanswered ones."""
        self.keepalive_s = self.jumps.keepalive_s = seconds

    def __len__(self) -> int:
        """Connections currently held open."""
        return len(self._pool)

    def connections(self) -> list[asyncssh.SSHClientConnection]:
        """The connections held open now (a benchmark runs on them directly)."""
        return [entry.conn for entry in self._pool.values()]

    async def acquire(self, key: PoolKey, target: SshTarget, deadline: float) -> Pooled:
        """The pooled connection for ``key``, opened (retrying dropped handshakes until
        ``deadline``, on the monotonic clock) when there is none or it was lost."""
        lock = self._connect_locks.setdefault(key, asyncio.Lock())
        # Runs on the same target queue behind one handshake and then share it.
        async with lock:
            self._expire_idle()
            entry = self._pool.get(key)
            if entry is None or not entry.usable:
                if entry is not None:
                    self._drop(key)
                self._make_room()
                self._opening += 1
                try:
                    entry = await self._connect_through(target, deadline)
                finally:
                    self._opening -= 1
                self._pool[key] = entry
            else:
                self._idle.pop(key, None)
            entry.users += 1
            return entry

    def release(self, key: PoolKey, entry: Pooled) -> None:
        entry.users -= 1
        if entry.users > 0 or self._pool.get(key) is not entry:
            return
        if not entry.usable:
            self._drop(key)
            return
        entry.idle_since = time.monotonic()
        self._idle[key] = entry
        self._idle.move_to_end(key)
        if self._expiry is None:
            self._schedule_expiry(self.idle_timeout_s)

    async def close(self) -> None:
        """Close every pooled connection; later acquires open new ones."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        pooled, self._pool = list(self._pool.values()), {}
        self._idle.clear()
        for entry in pooled:
            entry.conn.close()
        for entry in pooled:
            await entry.conn.wait_closed()
        await self.jumps.close()

    def _drop(self, key: PoolKey) -> None:
        entry = self._pool.pop(key)
        self._idle.pop(key, None)
        entry.conn.close()
        if entry.jump is not None:
            self.jumps.release(entry.jump)

    async def _connect_through(self, target: SshTarget, deadline: float) -> Pooled:
        """A new pooled connection to ``target``: through a shared jump host connection
        when it has jump hosts (never directly then), else directly."""
        if not target.via:
            conn, client = await self._connect(target, deadline)
            return Pooled(conn, client)
        jump = await self.jumps.acquire(target.via, deadline)
        try:
            conn, client = await self._connect(target, deadline, tunnel=jump.conn)
        except FleetcronError as exc:
            self.jumps.release(jump)
            raise through(target, exc) from exc
        except BaseException:
            self.jumps.release(jump)
            raise
        return Pooled(conn, client, jump=jump)

    def _expire_idle(self) -> None:
        """Close the idle connections unused for longer than ``idle_timeout_s``: they are
        at the head of the release order, so this stops at the first one still fresh."""
        now = time.monotonic()
        while self._idle:
            key, entry = next(iter(self._idle.items()))
            if now - entry.idle_since <= self.idle_timeout_s:
                break
            logger.debug("closing idle ssh connection", extra={"action": "ssh.pool_expire"})
            self._drop(key)

    def _make_room(self) -> None:
        """Close least recently used idle connections until one more fits in the pool
        (handshakes under way count as pooled)."""
        while self._idle and len(self._pool) + self._opening >= self.max_connections:
            key = next(iter(self._idle))
            logger.debug("closing idle ssh connection", extra={"action": "ssh.pool_evict"})
            self._drop(key)

    def _schedule_expiry(self, delay_s: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._expiry = loop.call_later(max(delay_s, 0.0) + 0.01, self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        self._expiry = None
        self._expire_idle()
        if self._idle:
            head = next(iter(self._idle.values()))
            self._schedule_expiry(head.idle_since + self.idle_timeout_s - time.monotonic())

    async def _connect(
        self,
        target: SshTarget,
        deadline: float,
        *,
        tunnel: asyncssh.SSHClientConnection | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, PinnedClient]:
        """Open a connection to ``target``; a handshake dropped or reset by the server is
        retried with capped exponential backoff and jitter until ``deadline`` (or
        ``connect_attempts``) would pass. The handshake slot is held only while
        connecting, not while waiting to retry."""
        client_key = self._import_key(target)
        delay = self.connect_backoff_s
        first = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            async with self.connecting:
                timeout = min(self.connect_timeout_s, max(deadline - time.monotonic(), 0.1))
                try:
                    conn, client = await open_pinned(target, client_key, timeout, tunnel=tunnel)
                except RETRYABLE as exc:
                    dropped: BaseException = exc
                else:
                    self.connections_opened += 1
                    keep_alive(conn, self.keepalive_s)
                    return conn, client
            wait = delay * random.uniform(0.5, 1.0)
            out_of_tries = self.connect_attempts is not None and attempt >= self.connect_attempts
            if out_of_tries or time.monotonic() + wait >= deadline:
                why = f"{attempt} attempts allowed" if out_of_tries else None
                spent = time.monotonic() - first
                raise _dropped(target, attempt, spent, why, dropped) from dropped
            self.connect_retries += 1
            logger.info(
                "ssh handshake with %s:%s dropped, retry %s in %.2f s",
                target.host,
                target.port,
                attempt,
                wait,
                extra={"action": "ssh.connect_retry", "target": target.name},
            )
            # Jitter spreads a fleet-wide burst so retries do not collide again.
            await asyncio.sleep(wait)
            delay = min(delay * 2, self.connect_backoff_max_s)

    def _import_key(self, target: SshTarget) -> asyncssh.SSHKey:
        digest = key_digest(target)
        key = self._keys.get(digest)
        if key is None:
            key = import_private_key(target)
            self._keys[digest] = key
        return key


def _dropped(
    target: SshTarget, attempt: int, spent: float, why: str | None, cause: BaseException
) -> ConnectError:
    """A handshake dropped too often: by the attempts allowed, or the run's budget."""
    reason = why or "the run's time budget is spent"
    return ConnectError(
        f"connection to {target.host}:{target.port} was dropped during the handshake "
        f"{attempt} times in {spent:.1f} s ({reason}; sshd MaxStartups?): {cause}"
    )
