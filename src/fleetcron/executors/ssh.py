"""Run commands on OpenSSH targets with asyncssh.

Trust: only the target's pinned host key is accepted (no known_hosts file, no
~/.ssh/config, no agent). A different key fails the run before anything is executed.
The client key is parsed from memory with ``asyncssh.import_private_key`` and never
written anywhere.

Reuse: one connection per (host, port, user, client key, pinned host key) is pooled and
shared by concurrent runs as separate sessions. Idle connections expire after
``idle_timeout_s`` (on a timer, and before every acquire); the pool holds at most
``max_connections`` and, when full, closes the least recently used idle connection to
make room. Idle connections are kept in release order, so expiry and eviction take them
from the head: amortised O(1) per acquire, whatever the pool's size (size the pool for the
fleet: a pool smaller than the number of targets reopens connections on every fire).
A global cap and a per-target cap bound concurrent runs; only one handshake per target is
in flight at a time (later runs wait for it and reuse it), at most ``max_connecting``
handshakes overall.

Connect retries: a handshake dropped before the banner (sshd's ``MaxStartups``) or reset
is retried with exponential backoff and jitter (``connect_backoff_s``, doubled each time up
to ``connect_backoff_max_s``, each wait drawn between half and all of it), for as long as
the run's budget lasts; the handshake slot is given back while waiting. A run ends
``connect_error`` for dropped handshakes only when its budget is spent. Retries are counted
(:attr:`SshExecutor.connect_retries`, exported as ``fleetcron_ssh_connect_retries_total``).

Timeouts: OpenSSH's sshd runs every session's command in a new session (``setsid``).
The command runs under the watchdog of :mod:`fleetcron.executors.watchdog` (POSIX sh and
coreutils ``timeout`` on the target, nothing to install): its process group is killed at
the run's budget by the target's own clock, even when this process is gone, stopped or
cut off. The wrapper prints ``__fleetcron_pgid__=<pgid>`` on stderr (stripped from the
captured output). On timeout a second session on the same connection runs
``kill -s TERM -- -<pgid>``, then ``KILL`` after the grace period if the session is still
open. Closing the channel would leave the command running, and SSH signal requests
(where sshd honours them) reach only the shell, not its children. The target's login
shell must be POSIX-like (sh, bash, dash, zsh, ksh); the command's stdin is /dev/null.

Active cleanup: :meth:`SshExecutor.mark_and_kill_older_generations` raises the target's
highest-generation mark, then kills older generations' process groups, in one session; a
run whose generation the mark has passed is refused by its wrapper before it starts and
ends as ``connect_error`` (:data:`~fleetcron.executors.base.SUPERSEDED`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import resource
import shlex
import socket
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import asyncssh

from fleetcron.errors import AuthError, ConnectError, ExecutionError, HostKeyMismatch
from fleetcron.executors.base import (
    DEFAULT_KILL_GRACE_S,
    EMPTY_OUTPUT,
    NOT_STARTED_DEADLINE,
    Clock,
    ExecRequest,
    ExecResult,
    SshTarget,
    Status,
    timeout_error,
    utc_now,
)
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.executors.output import (
    MARKER_WAIT_S,
    STOPPED,
    BoundedOutput,
    MarkerLineSplitter,
    Sink,
    StopRequested,
    tee,
    unless_stopped,
)
from fleetcron.executors.watchdog import (
    MARK_AND_SCAN_SCRIPT,
    MARK_SCOPE,
    PGID_MARKER,
    SCAN_SCRIPT,
    plain_script,
    plan,
    superseded_error,
    watchdog_script,
)

logger = logging.getLogger(__name__)

_RETRYABLE = (
    asyncssh.ConnectionLost,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)

_PoolKey = tuple[str, int, str, str, str]

FD_HEADROOM = 256
"""Open files kept beside the pool's sockets (database, logs, local runs, the web server)."""


def wrap_command(
    command: str,
    env: Mapping[str, str] | None = None,
    *,
    term_after_s: float | None = None,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
    generation: int | None = None,
    mark_scope: str | None = None,
) -> str:
    """The remote command line: export the run's variables, report the process group, then
    run ``command`` in it, under the watchdog of :mod:`fleetcron.executors.watchdog` when
    ``term_after_s`` is given (the executor always gives it; without it, the plain wrapper).

    The variables travel in the command line rather than as SSH ``env`` requests: they
    arrive whatever the server's ``AcceptEnv`` says, and cost no extra round trip each.
    Names are checked by :class:`ExecRequest`; values are quoted.
    """
    if term_after_s is None:
        return plain_script(command, env or {})
    return watchdog_script(
        command,
        env or {},
        term_after_s=term_after_s,
        kill_grace_s=kill_grace_s,
        generation=generation,
        mark_scope=mark_scope,
    )


class _PinnedClient(asyncssh.SSHClient):
    """Records the host key a server presented when it was not the pinned one."""

    def __init__(self) -> None:
        self.presented: asyncssh.SSHKey | None = None
        self.lost = False

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.presented = key
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class _RunSession(asyncssh.SSHClientSession[bytes]):
    def __init__(self, stdout: Sink, stderr: MarkerLineSplitter) -> None:
        self._stdout = stdout
        self._stderr = stderr

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self._stderr.feed(data)
        else:
            self._stdout.feed(data)


@dataclass
class _Pooled:
    conn: asyncssh.SSHClientConnection
    client: _PinnedClient
    users: int = 0
    idle_since: float = field(default_factory=time.monotonic)

    @property
    def usable(self) -> bool:
        return not self.client.lost


class SshExecutor:
    """Runs requests on SSH targets over pooled, host-key-pinned connections.

    Args:
        clock: source of ``started_at``/``finished_at``.
        max_concurrency: runs in flight across all targets (default 64).
        per_target_concurrency: runs in flight on one target (default 4; keep it at or
            below the target's sshd ``MaxSessions``, 10 by default).
        max_connections: pooled connections kept at most; when full, the least recently
            used idle one is closed. The process's soft open-file limit is raised (up to
            its hard limit) to hold this many plus :data:`FD_HEADROOM`.
        idle_timeout_s: an unused pooled connection is closed after this long.
        connect_timeout_s: TCP connect plus SSH handshake and authentication, per attempt.
        connect_attempts: tries for a handshake dropped or reset by the server; ``None``
            (the default): as many as the run's budget allows.
        connect_backoff_s: first retry delay, doubled each time, with jitter.
        connect_backoff_max_s: the longest delay between two tries.
        max_connecting: handshakes in flight across all targets.
        kill_grace_s: seconds between SIGTERM and SIGKILL on timeout.
        watchdog: tests only; ``False`` runs commands without the remote watchdog (the
            plain wrapper), for negative controls.
    """

    def __init__(
        self,
        *,
        clock: Clock = utc_now,
        max_concurrency: int = 64,
        per_target_concurrency: int = 4,
        max_connections: int = 256,
        idle_timeout_s: float = 300.0,
        connect_timeout_s: float = 15.0,
        connect_attempts: int | None = None,
        connect_backoff_s: float = 0.2,
        connect_backoff_max_s: float = 10.0,
        max_connecting: int = 16,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        watchdog: bool = True,
    ) -> None:
        if max_connections < max_concurrency:
            # Each run in flight holds one connection; fewer slots could deadlock.
            raise ValueError("max_connections must be >= max_concurrency")
        self._clock = clock
        self._per_target_concurrency = per_target_concurrency
        self._max_connections = max_connections
        self._idle_timeout_s = idle_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._connect_attempts = connect_attempts
        self._connect_backoff_s = connect_backoff_s
        self._connect_backoff_max_s = max(connect_backoff_max_s, connect_backoff_s)
        self._kill_grace_s = kill_grace_s
        self._watchdog = watchdog
        self._slots = asyncio.Semaphore(max_concurrency)
        self._connecting = asyncio.Semaphore(max_connecting)
        self._target_slots: dict[_PoolKey, asyncio.Semaphore] = {}
        self._connect_locks: dict[_PoolKey, asyncio.Lock] = {}
        self._pool: dict[_PoolKey, _Pooled] = {}
        # The pooled connections nobody uses, least recently released first.
        self._idle: OrderedDict[_PoolKey, _Pooled] = OrderedDict()
        self._opening = 0
        self._expiry: asyncio.TimerHandle | None = None
        self._keys: dict[str, asyncssh.SSHKey] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.connections_opened = 0
        """Successful handshakes so far; a reused connection does not count."""
        self.connect_retries = 0
        """Handshakes retried after the server dropped or reset them."""
        self.open_file_limit = ensure_open_file_limit(max_connections + FD_HEADROOM)
        """The process's soft open-file limit after construction."""

    async def run(self, target: SshTarget, request: ExecRequest) -> ExecResult:
        """Run the command on ``target``; never raises for its outcome.

        The watchdog budget counts from this call: time spent waiting for a slot and
        connecting is taken off what the remote watchdog gets.
        """
        called = time.monotonic()
        key = _pool_key(target)
        slot = self._target_slots.setdefault(key, asyncio.Semaphore(self._per_target_concurrency))
        # Target slot first: a burst on one target must not hold global slots idle.
        async with slot, self._slots:
            started_at = self._clock()
            t0 = time.monotonic()
            try:
                return await self._run_on_pool(key, target, request, called)
            except ExecutionError as exc:
                return ExecResult(
                    status="connect_error",
                    exit_code=None,
                    stdout=EMPTY_OUTPUT,
                    stderr=EMPTY_OUTPUT,
                    started_at=started_at,
                    finished_at=self._clock(),
                    duration_ms=int((time.monotonic() - t0) * 1000),
                    error=exc.message,
                )

    async def kill_older_generations(self, target: SshTarget, generation: int) -> int:
        """Kill every process group on ``target`` started by fleetcron for a run tagged
        with a generation lower than ``generation``; return how many groups were killed.

        Raises :class:`fleetcron.errors.ExecutionError` (``ConnectError``, ``AuthError``,
        ``HostKeyMismatch``) when the target cannot be reached or the scan fails.
        """
        key = _pool_key(target)
        entry = await self._acquire(key, target, time.monotonic() + self._connect_timeout_s)
        try:
            result = await asyncio.wait_for(
                entry.conn.run(
                    f"/bin/sh -c {shlex.quote(SCAN_SCRIPT)} sh {int(generation)}", check=False
                ),
                timeout=self._connect_timeout_s + 30,
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            entry.client.lost = True
            raise ConnectError(
                f"{target.name}: could not scan for older generations: {exc}"
            ) from exc
        finally:
            self._release(key, entry)
        out = result.stdout if isinstance(result.stdout, str) else ""
        for line in out.splitlines():
            if line.startswith("killed=") and line[7:].isdigit():
                killed = int(line[7:])
                logger.info(
                    "killed %d process group(s) older than generation %d on %s",
                    killed,
                    generation,
                    target.name,
                    extra={"action": "ssh.kill_older_generations", "target": target.name},
                )
                return killed
        raise ExecutionError(
            f"{target.name}: the scan for older generations failed "
            f"(exit {result.exit_status}): {str(result.stderr or '')[:200]}"
        )

    async def mark_and_kill_older_generations(
        self, target: SshTarget, generation: int, scope: str, *, timeout_s: float | None = None
    ) -> tuple[int, int]:
        """Active cleanup of ``target`` for ``generation``: raise the target's
        highest-generation mark of installation ``scope`` to ``generation`` (never lower),
        THEN kill every process group of an older generation, in one session
        (:data:`~fleetcron.executors.watchdog.MARK_AND_SCAN_SCRIPT`). Returns
        ``(mark, killed)``: the mark now on the target (above ``generation`` when a newer
        owner has been there) and how many groups were killed.

        After it returns, no command of an older generation runs on the target and none
        can start there (the wrapper reads the mark). Raises
        :class:`fleetcron.errors.ExecutionError` when the target cannot be reached, the
        mark cannot be written or the scan fails, or ``timeout_s`` (connecting included)
        passes first: then nothing is known about the target.
        """
        if not MARK_SCOPE.fullmatch(scope):
            raise ValueError(f"invalid mark scope {scope!r}")
        command = f"/bin/sh -c {shlex.quote(MARK_AND_SCAN_SCRIPT)} sh {int(generation)} {scope}"
        try:
            async with asyncio.timeout(timeout_s):
                out, status, err = await self._run_maintenance(target, command, "clean")
        except TimeoutError as exc:
            raise ConnectError(
                f"{target.name}: active cleanup did not finish within {timeout_s:g} s"
            ) from exc
        values = dict(
            line.split("=", 1)
            for line in out.splitlines()
            if "=" in line and line.split("=", 1)[1].isdigit()
        )
        if status != 0 or "mark" not in values or "killed" not in values:
            raise ExecutionError(
                f"{target.name}: active cleanup failed (exit {status}): {err[:200]}"
            )
        mark, killed = int(values["mark"]), int(values["killed"])
        logger.info(
            "marked generation %d and killed %d older process group(s) on %s",
            mark,
            killed,
            target.name,
            extra={
                "action": "ssh.mark_and_kill",
                "target": target.name,
                "mark": mark,
                "killed": killed,
            },
        )
        return mark, killed

    async def _run_maintenance(
        self, target: SshTarget, command: str, what: str
    ) -> tuple[str, int | None, str]:
        """Run a fleetcron maintenance script on ``target`` over the pooled connection:
        ``(stdout, exit status, stderr)``."""
        key = _pool_key(target)
        entry = await self._acquire(key, target, time.monotonic() + self._connect_timeout_s)
        try:
            result = await asyncio.wait_for(
                entry.conn.run(command, check=False), timeout=self._connect_timeout_s + 30
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            entry.client.lost = True
            raise ConnectError(f"{target.name}: could not {what}: {exc}") from exc
        finally:
            self._release(key, entry)
        out = result.stdout if isinstance(result.stdout, str) else ""
        err = result.stderr if isinstance(result.stderr, str) else ""
        return out, result.exit_status, err

    async def close(self) -> None:
        """Close every pooled connection; later runs open new ones."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        pooled, self._pool = list(self._pool.values()), {}
        self._idle.clear()
        for entry in pooled:
            entry.conn.close()
        for entry in pooled:
            await entry.conn.wait_closed()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    @property
    def pooled_connections(self) -> int:
        """Connections currently held open by the pool."""
        return len(self._pool)

    async def _run_on_pool(
        self,
        key: _PoolKey,
        target: SshTarget,
        request: ExecRequest,
        called: float,
    ) -> ExecResult:
        if (
            plan(
                request.timeout_s, request.watchdog_s, self._kill_grace_s, time.monotonic() - called
            )
            is None
        ):
            # The slot came too late: do not even connect.
            raise ConnectError(NOT_STARTED_DEADLINE)
        budget = (
            request.watchdog_s
            if request.watchdog_s is not None
            else request.timeout_s + self._kill_grace_s
        )
        entry = await self._acquire(key, target, called + budget)
        try:
            return await self._run_session(entry, target, request, called)
        finally:
            self._release(key, entry)

    async def _run_session(
        self, entry: _Pooled, target: SshTarget, request: ExecRequest, called: float
    ) -> ExecResult:
        stdout = BoundedOutput(request.output_limit)
        stderr = BoundedOutput(request.output_limit)
        splitter = MarkerLineSplitter(PGID_MARKER, tee(stderr, request.live))
        out = tee(stdout, request.live)
        started_at = self._clock()
        t0 = time.monotonic()
        conn = entry.conn
        steps = plan(
            request.timeout_s, request.watchdog_s, self._kill_grace_s, time.monotonic() - called
        )
        if steps is None:
            raise ConnectError(NOT_STARTED_DEADLINE)
        env = dict(request.env)
        if request.run_id is not None:
            env["FLEETCRON_RUN_ID"] = str(request.run_id)
        if self._watchdog:
            remote = wrap_command(
                request.command,
                env,
                term_after_s=steps.term_after,
                kill_grace_s=steps.kill_grace,
                generation=request.generation,
                mark_scope=request.mark_scope,
            )
            limit, grace = steps.limit, steps.grace
        else:
            remote = wrap_command(request.command, env)
            limit, grace = request.timeout_s, self._kill_grace_s
        # Never retried: once the exec request may have reached the server, a second
        # attempt could run the command twice.
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                chan, _ = await conn.create_session(
                    lambda: _RunSession(out, splitter),
                    remote,
                    encoding=None,
                )
        except asyncssh.ChannelOpenError as exc:
            raise ConnectError(
                f"{target.host}:{target.port} refused a new session ({exc.reason}); "
                "is sshd's MaxSessions below the per-target concurrency?"
            ) from exc
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            entry.client.lost = True
            raise ConnectError(
                f"connection to {target.host}:{target.port} lost before the command started"
            ) from exc
        status: Status
        exit_code: int | None = None
        error: str | None = None
        try:
            async with asyncio.timeout(limit):
                await unless_stopped(chan.wait_closed(), request.live)
        except StopRequested:
            # Stopped by an operator: kill the remote group now (recorded cancelled).
            deadline = time.monotonic() + MARKER_WAIT_S
            while splitter.value is None and not chan.is_closing():
                if time.monotonic() >= deadline:
                    break
                await asyncio.sleep(0.01)
            await self._terminate(conn, chan, _pgid(splitter), grace_s=0)
            status, error = "failed", STOPPED
        except TimeoutError:
            await self._terminate(conn, chan, _pgid(splitter), grace_s=grace)
            status = "timed_out"
            error = timeout_error(request.timeout_s, limit, "remote process group killed")
        except asyncio.CancelledError:
            task = asyncio.create_task(self._terminate(conn, chan, _pgid(splitter), grace_s=0))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            raise
        else:
            status, exit_code, error = _exit_outcome(chan)
            if self._watchdog and exit_code == 124 and time.monotonic() - t0 >= limit * 0.99:
                # The remote timeout(1) fired a hair before our own timer: the same outcome.
                status, exit_code = "timed_out", None
                error = timeout_error(request.timeout_s, limit, "remote process group killed")
        splitter.flush()
        refused = superseded_error(exit_code, stderr.excerpt().head)
        if refused is not None:
            status, exit_code, error = "connect_error", None, refused
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

    async def _terminate(
        self,
        conn: asyncssh.SSHClientConnection,
        chan: asyncssh.SSHClientChannel[bytes],
        pgid: int | None,
        grace_s: float | None = None,
    ) -> None:
        grace = self._kill_grace_s if grace_s is None else grace_s
        try:
            if pgid is None:
                # The wrapper never reported (timed out during login): best effort.
                chan.send_signal("KILL")
            else:
                await _remote_kill(conn, "TERM", pgid)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(chan.wait_closed()), grace)
                if not chan.is_closing():
                    await _remote_kill(conn, "KILL", pgid)
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            logger.warning(
                "could not kill a timed-out remote command: %s",
                exc,
                extra={"action": "ssh.kill_failed"},
            )
        finally:
            chan.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(chan.wait_closed(), 5)

    async def _acquire(self, key: _PoolKey, target: SshTarget, deadline: float) -> _Pooled:
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
                    conn, client = await self._connect(target, deadline)
                finally:
                    self._opening -= 1
                entry = _Pooled(conn, client)
                self._pool[key] = entry
            else:
                self._idle.pop(key, None)
            entry.users += 1
            return entry

    def _release(self, key: _PoolKey, entry: _Pooled) -> None:
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
            self._schedule_expiry(self._idle_timeout_s)

    def _drop(self, key: _PoolKey) -> None:
        entry = self._pool.pop(key)
        self._idle.pop(key, None)
        entry.conn.close()

    def _expire_idle(self) -> None:
        """Close the idle connections unused for longer than ``idle_timeout_s``: they are
        at the head of the release order, so this stops at the first one still fresh."""
        now = time.monotonic()
        while self._idle:
            key, entry = next(iter(self._idle.items()))
            if now - entry.idle_since <= self._idle_timeout_s:
                break
            logger.debug("closing idle ssh connection", extra={"action": "ssh.pool_expire"})
            self._drop(key)

    def _make_room(self) -> None:
        """Close least recently used idle connections until one more fits in the pool
        (handshakes under way count as pooled)."""
        while self._idle and len(self._pool) + self._opening >= self._max_connections:
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
            self._schedule_expiry(head.idle_since + self._idle_timeout_s - time.monotonic())

    async def _connect(
        self, target: SshTarget, deadline: float
    ) -> tuple[asyncssh.SSHClientConnection, _PinnedClient]:
        """Open a connection to ``target``; a handshake dropped or reset by the server is
        retried with capped exponential backoff and jitter until ``deadline`` (or
        ``connect_attempts``) would pass. The handshake slot is held only while
        connecting, not while waiting to retry."""
        client_key = self._import_key(target)
        delay = self._connect_backoff_s
        first = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            async with self._connecting:
                timeout = min(self._connect_timeout_s, max(deadline - time.monotonic(), 0.1))
                try:
                    conn, client = await _open(target, client_key, timeout)
                except _RETRYABLE as exc:
                    dropped: BaseException = exc
                else:
                    self.connections_opened += 1
                    return conn, client
            wait = delay * random.uniform(0.5, 1.0)
            out_of_tries = self._connect_attempts is not None and attempt >= self._connect_attempts
            if out_of_tries or time.monotonic() + wait >= deadline:
                spent = time.monotonic() - first
                why = (
                    f"{attempt} attempts allowed"
                    if out_of_tries
                    else "the run's time budget is spent"
                )
                raise ConnectError(
                    f"connection to {target.host}:{target.port} was dropped during the "
                    f"handshake {attempt} times in {spent:.1f} s ({why}; sshd MaxStartups?): "
                    f"{dropped}"
                ) from dropped
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
            delay = min(delay * 2, self._connect_backoff_max_s)

    def _import_key(self, target: SshTarget) -> asyncssh.SSHKey:
        digest = _key_digest(target)
        key = self._keys.get(digest)
        if key is None:
            key = _import_private_key(target)
            self._keys[digest] = key
        return key


def ensure_open_file_limit(wanted: int) -> int:
    """Raise this process's soft open-file limit to ``wanted`` (at most the hard limit);
    returns the soft limit now in force. Logs a warning when the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft < wanted:
        logger.warning(
            "open-file limit %d is below the %d the SSH pool may need; raise LimitNOFILE "
            "(ulimit -n) or lower ssh_max_connections",
            soft,
            wanted,
            extra={"action": "ssh.fd_limit", "limit": soft, "wanted": wanted},
        )
    return soft


#: How much of a probe's output :func:`verify_target` returns.
PROBE_OUTPUT_MAX = 4096


async def fetch_host_key(host: str, port: int, timeout_s: float = 10) -> str:
    """The host key the server at ``host:port`` presents, as ``"<type> <base64>"``.

    Used for trust-on-first-use pairing: show the fingerprint to a human, then pin it.
    Raises :class:`ConnectError` when the server cannot be reached.
    """
    try:
        async with asyncio.timeout(timeout_s):
            key = await asyncssh.get_server_host_key(host, port, config=None)
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise _connect_failure(exc, host, port, timeout_s) from exc
    if key is None:
        raise ConnectError(f"{host}:{port} did not present a host key")
    kind, blob, *_ = key.export_public_key("openssh").decode().split()
    return f"{kind} {blob}"


async def verify_target(
    target: SshTarget, timeout_s: float = 15, *, probe: str | None = None
) -> str | None:
    """Log in with the pinned host key and run ``true``.

    Raises :class:`HostKeyMismatch`, :class:`AuthError` or :class:`ConnectError` with a
    message naming the target and what to do; returns ``None`` when all is well. With
    ``probe``, also runs that command in the same connection and returns the start of
    what it printed (empty when it failed: a probe is informational, never a failure).
    """
    conn, _ = await _open(target, _import_private_key(target), timeout_s)
    async with conn:
        try:
            result = await asyncio.wait_for(conn.run("true", check=False), timeout_s)
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise ConnectError(f"{target.name}: running `true` failed: {exc}") from exc
        if result.exit_status != 0:
            raise ConnectError(
                f"{target.name}: `true` exited with {result.exit_status}; check the login shell"
            )
        if probe is None:
            return None
        try:
            probed = await asyncio.wait_for(conn.run(probe, check=False), timeout_s)
        except (asyncssh.Error, OSError, TimeoutError):
            return ""
    out = probed.stdout
    text = out.decode(errors="replace") if isinstance(out, bytes) else str(out or "")
    return text[:PROBE_OUTPUT_MAX]


async def _open(
    target: SshTarget, client_key: asyncssh.SSHKey, timeout_s: float
) -> tuple[asyncssh.SSHClientConnection, _PinnedClient]:
    pinned = asyncssh.import_public_key(target.host_key)
    client = _PinnedClient()
    try:
        conn = await asyncssh.connect(
            target.host,
            target.port,
            username=target.user,
            client_keys=[client_key],
            known_hosts=([pinned], [], []),
            client_factory=lambda: client,
            config=None,
            agent_path=None,
            password=None,
            kbdint_auth=False,
            gss_auth=False,
            preferred_auth="publickey",
            connect_timeout=timeout_s,
            keepalive_interval=30,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        presented = (
            client.presented.get_fingerprint("sha256") if client.presented else "an unknown key"
        )
        raise HostKeyMismatch(
            f"host key mismatch: expected {fingerprint(target.host_key)}, got {presented} "
            f"from {target.host}:{target.port} (target {target.name}); nothing was run. "
            "If the server's key was changed on purpose, re-pin its host key "
            f"(`fleetcron target repin {target.name}`, or Re-pin host key on its page)."
        ) from exc
    except asyncssh.PermissionDenied as exc:
        raise AuthError(
            f"authentication failed for user {target.user} on {target.host}:{target.port} "
            f"(target {target.name}): the server refused the key"
        ) from exc
    except _RETRYABLE:
        raise
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise _connect_failure(exc, target.host, target.port, timeout_s) from exc
    return conn, client


def _connect_failure(exc: BaseException, host: str, port: int, timeout_s: float) -> ConnectError:
    where = f"{host}:{port}"
    if isinstance(exc, ConnectionRefusedError):
        return ConnectError(f"connection refused: {where}")
    if isinstance(exc, socket.gaierror):
        return ConnectError(f"cannot resolve host {host}: {exc.strerror}")
    if isinstance(exc, TimeoutError):
        return ConnectError(f"connection to {where} timed out after {timeout_s:g} s")
    if isinstance(exc, asyncssh.Error):
        return ConnectError(f"ssh handshake with {where} failed: {exc.reason}")
    return ConnectError(f"cannot connect to {where}: {exc}")


async def _remote_kill(conn: asyncssh.SSHClientConnection, sig: str, pgid: int) -> None:
    await asyncio.wait_for(
        conn.run(f"kill -s {sig} -- -{pgid} 2>/dev/null", check=False), timeout=10
    )


def _pgid(splitter: MarkerLineSplitter) -> int | None:
    value = splitter.value
    return int(value) if value is not None and value.isdigit() else None


def _exit_outcome(chan: asyncssh.SSHClientChannel[bytes]) -> tuple[Status, int | None, str | None]:
    signal_info = chan.get_exit_signal()
    if signal_info is not None:
        return "failed", None, f"killed by signal {signal_info[0]}"
    code = chan.get_exit_status()
    if code is None:
        return "failed", None, "the server closed the session without an exit status"
    return ("succeeded" if code == 0 else "failed"), code, None


def _key_digest(target: SshTarget) -> str:
    raw = target.private_key.encode() if isinstance(target.private_key, str) else target.private_key
    return hashlib.sha256(raw).hexdigest()


def _pool_key(target: SshTarget) -> _PoolKey:
    return (target.host, target.port, target.user, _key_digest(target), target.host_key)


def _import_private_key(target: SshTarget) -> asyncssh.SSHKey:
    try:
        return asyncssh.import_private_key(target.private_key)
    except (asyncssh.KeyImportError, ValueError) as exc:
        # The exception text never contains key material, only what was wrong with it.
        raise AuthError(f"the private key of target {target.name} cannot be used: {exc}") from exc
