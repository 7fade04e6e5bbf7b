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

The pool is :mod:`fleetcron.executors.ssh_pool`; one connection with the pinned host key,
:mod:`fleetcron.executors.ssh_connect`.

Timeouts: OpenSSH's sshd runs every session's command in a new session (``setsid``).
The command runs under the watchdog of :mod:`fleetcron.executors.watchdog` (POSIX sh and
coreutils ``timeout`` on the target, nothing to install): its process group is killed at
the run's budget by the target's own clock, even when this process is gone, stopped or
cut off. The wrapper prints ``__fleetcron_pgid__=<pgid>`` on stderr (stripped from the
captured output). On timeout and on Stop a second session on the same connection runs
:data:`~fleetcron.executors.watchdog.STOP_SCRIPT`: SIGTERM to the whole group, SIGKILL to
what is still alive in it after the grace period (``kill_grace_s``). Closing the channel
would leave the command running, and SSH signal requests (where sshd honours them) reach
only the shell, not its children. The target's login
shell must be POSIX-like (sh, bash, dash, zsh, ksh); the command's stdin is /dev/null.

Active cleanup: :meth:`SshExecutor.mark_and_kill_older_generations` raises the target's
highest-generation mark, then removes older generations' claim files (their commands'
next ``fleetcron_claim_live`` fails), then kills their process groups, in one session; a
run whose generation the mark has passed is refused by its wrapper before it starts and
ends as ``connect_error`` (:data:`~fleetcron.executors.base.SUPERSEDED`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import shlex
import time
from collections.abc import Mapping

import asyncssh

from fleetcron.errors import ConnectError, ExecutionError
from fleetcron.executors.base import (
    DEFAULT_KILL_GRACE_S,
    NOT_STARTED_DEADLINE,
    Clock,
    ExecRequest,
    ExecResult,
    SshTarget,
    Status,
    timeout_error,
    utc_now,
)
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
from fleetcron.executors.ssh_pool import Pooled, PoolKey, SshPool, pool_key
from fleetcron.executors.watchdog import (
    MARK_AND_SCAN_SCRIPT,
    MARK_SCOPE,
    PGID_MARKER,
    SCAN_SCRIPT,
    Plan,
    claim_file_name,
    plain_script,
    plan_for,
    stop_command,
    unless_superseded,
    watchdog_script,
)

logger = logging.getLogger(__name__)


_STOP_MARGIN_S = 10.0
"""Beyond twice the grace, how long the session that ends a run's group may take."""

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
    run_id: int | None = None,
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
        run_id=run_id,
    )


def claim_of(request: ExecRequest) -> str:
    """The run's claim file on the target, relative to the SSH user's home (empty for a
    run without an id, whose file only its wrapper knows)."""
    return claim_file_name(request.run_id)


class _RunSession(asyncssh.SSHClientSession[bytes]):
    def __init__(self, stdout: Sink, stderr: MarkerLineSplitter) -> None:
        self._stdout = stdout
        self._stderr = stderr

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self._stderr.feed(data)
        else:
            self._stdout.feed(data)


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
        self._connect_timeout_s = connect_timeout_s
        self.pool = SshPool(
            max_connections=max_connections,
            idle_timeout_s=idle_timeout_s,
            connect_timeout_s=connect_timeout_s,
            connect_attempts=connect_attempts,
            connect_backoff_s=connect_backoff_s,
            connect_backoff_max_s=connect_backoff_max_s,
            max_connecting=max_connecting,
        )
        self._kill_grace_s = kill_grace_s
        self._watchdog = watchdog
        self._slots = asyncio.Semaphore(max_concurrency)
        self._target_slots: dict[PoolKey, asyncio.Semaphore] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.open_file_limit = ensure_open_file_limit(max_connections + FD_HEADROOM)
        """The process's soft open-file limit after construction."""

    async def run(self, target: SshTarget, request: ExecRequest) -> ExecResult:
        """Run the command on ``target``; never raises for its outcome.

        The watchdog budget counts from this call: time spent waiting for a slot and
        connecting is taken off what the remote watchdog gets.
        """
        called = time.monotonic()
        key = pool_key(target)
        slot = self._target_slots.get(key)
        if slot is None:
            slot = self._target_slots[key] = asyncio.Semaphore(self._per_target_concurrency)
        # Target slot first: a burst on one target must not hold global slots idle.
        async with slot, self._slots:
            started_at = self._clock()
            t0 = time.monotonic()
            try:
                return await self._run_on_pool(key, target, request, called)
            except ExecutionError as exc:
                return ExecResult.not_started(
                    exc.message, started_at=started_at, finished_at=self._clock(), t0=t0
                )

    async def kill_older_generations(self, target: SshTarget, generation: int) -> int:
        """Kill every process group on ``target`` started by fleetcron for a run tagged
        with a generation lower than ``generation``; return how many groups were killed.

        Raises :class:`fleetcron.errors.ExecutionError` (``ConnectError``, ``AuthError``,
        ``HostKeyMismatch``) when the target cannot be reached or the scan fails.
        """
        key = pool_key(target)
        entry = await self.pool.acquire(key, target, time.monotonic() + self._connect_timeout_s)
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
            self.pool.release(key, entry)
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
        then remove that installation's claim files of older generations (revoked: the
        claim check of their commands fails from here on), THEN kill every process group
        of an older generation, in one session
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
        mark, revoked, killed = _mark_and_killed(target, out, status, err)
        logger.info(
            "marked generation %d, revoked %d older claim file(s) and killed %d older "
            "process group(s) on %s",
            mark,
            revoked,
            killed,
            target.name,
            extra={
                "action": "ssh.mark_and_kill",
                "target": target.name,
                "mark": mark,
                "revoked": revoked,
                "killed": killed,
            },
        )
        return mark, killed

    async def _run_maintenance(
        self, target: SshTarget, command: str, what: str
    ) -> tuple[str, int | None, str]:
        """Run a fleetcron maintenance script on ``target`` over the pooled connection:
        ``(stdout, exit status, stderr)``."""
        key = pool_key(target)
        entry = await self.pool.acquire(key, target, time.monotonic() + self._connect_timeout_s)
        try:
            result = await asyncio.wait_for(
                entry.conn.run(command, check=False), timeout=self._connect_timeout_s + 30
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            entry.client.lost = True
            raise ConnectError(f"{target.name}: could not {what}: {exc}") from exc
        finally:
            self.pool.release(key, entry)
        out = result.stdout if isinstance(result.stdout, str) else ""
        err = result.stderr if isinstance(result.stderr, str) else ""
        return out, result.exit_status, err

    async def close(self) -> None:
        """Close every pooled connection; later runs open new ones."""
        await self.pool.close()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    @property
    def pooled_connections(self) -> int:
        """Connections currently held open by the pool."""
        return len(self.pool)

    @property
    def connections_opened(self) -> int:
        """Successful handshakes so far; a reused connection does not count."""
        return self.pool.connections_opened

    @property
    def connect_retries(self) -> int:
        """Handshakes retried after the server dropped or reset them."""
        return self.pool.connect_retries

    async def _run_on_pool(
        self,
        key: PoolKey,
        target: SshTarget,
        request: ExecRequest,
        called: float,
    ) -> ExecResult:
        if plan_for(request, self._kill_grace_s, called) is None:
            # The slot came too late: do not even connect.
            raise ConnectError(NOT_STARTED_DEADLINE)
        budget = request.watchdog_budget(self._kill_grace_s)
        entry = await self.pool.acquire(key, target, request.budget_start(called) + budget)
        try:
            return await self._run_session(entry, target, request, called)
        finally:
            self.pool.release(key, entry)

    async def _run_session(
        self, entry: Pooled, target: SshTarget, request: ExecRequest, called: float
    ) -> ExecResult:
        stdout = BoundedOutput(request.output_limit)
        stderr = BoundedOutput(request.output_limit)
        splitter = MarkerLineSplitter(PGID_MARKER, tee(stderr, request.live))
        out = tee(stdout, request.live)
        started_at = self._clock()
        t0 = time.monotonic()
        steps = plan_for(request, self._kill_grace_s, called)
        if steps is None:
            raise ConnectError(NOT_STARTED_DEADLINE)
        remote, limit, grace = self._remote_command(request, steps)
        # The target's timeout(1) starts after t0: an exit 124 from then on is it (the
        # executor's own timer, started later still, may be the one that is late).
        due = t0 + min(limit, steps.term_after) * 0.99
        chan = await self._open_session(entry, target, remote, _RunSession(out, splitter))
        status, exit_code, error = await self._outcome(
            entry.conn, chan, request, splitter=splitter, limit=limit, grace=grace, due=due
        )
        splitter.flush()
        status, exit_code, error = unless_superseded(status, exit_code, error, stderr)
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

    def _remote_command(self, request: ExecRequest, steps: Plan) -> tuple[str, float, float]:
        """The command line sent to the target, with our own time limit and kill grace."""
        env = dict(request.env)
        if request.run_id is not None:
            env["FLEETCRON_RUN_ID"] = str(request.run_id)
        if not self._watchdog:
            return wrap_command(request.command, env), request.timeout_s, self._kill_grace_s
        remote = wrap_command(
            request.command,
            env,
            term_after_s=steps.term_after,
            kill_grace_s=steps.kill_grace,
            generation=request.generation,
            mark_scope=request.mark_scope,
            run_id=request.run_id,
        )
        return remote, steps.limit, steps.grace

    async def _open_session(
        self, entry: Pooled, target: SshTarget, remote: str, session: _RunSession
    ) -> asyncssh.SSHClientChannel[bytes]:
        """Open the session that runs ``remote``; raise ``ConnectError`` when it cannot."""
        # Never retried: once the exec request may have reached the server, a second
        # attempt could run the command twice.
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                chan, _ = await entry.conn.create_session(
                    lambda: session,
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
        return chan

    async def _outcome(
        self,
        conn: asyncssh.SSHClientConnection,
        chan: asyncssh.SSHClientChannel[bytes],
        request: ExecRequest,
        *,
        splitter: MarkerLineSplitter,
        limit: float,
        grace: float,
        due: float,
    ) -> tuple[Status, int | None, str | None]:
        """Wait for the session within ``limit``: status, exit code and error.

        A timeout or an operator's stop ends the remote process group; a cancel by the
        caller ends it in the background and is raised again.
        """
        try:
            async with asyncio.timeout(limit):
                await unless_stopped(chan.wait_closed(), request.live)
        except StopRequested:
            # Stopped by an operator: end the remote group as a timeout does, SIGTERM and
            # SIGKILL after the grace (recorded cancelled).
            await _reported(splitter, chan)
            await self._terminate(conn, chan, _pgid(splitter), claim=claim_of(request))
            return "failed", None, STOPPED
        except TimeoutError:
            await self._terminate(
                conn, chan, _pgid(splitter), grace_s=grace, claim=claim_of(request)
            )
            killed = timeout_error(request.timeout_s, limit, "remote process group killed")
            return "timed_out", None, killed
        except asyncio.CancelledError:
            task = asyncio.create_task(self._terminate(conn, chan, _pgid(splitter), grace_s=0))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            raise
        status, exit_code, error = _exit_outcome(chan)
        if self._watchdog and exit_code == 124 and time.monotonic() >= due:
            # The remote timeout(1) fired before our own timer (which starts later, and
            # which a busy event loop may serve late): the same outcome.
            error = timeout_error(request.timeout_s, limit, "remote process group killed")
            return "timed_out", None, error
        return status, exit_code, error

    async def _terminate(
        self,
        conn: asyncssh.SSHClientConnection,
        chan: asyncssh.SSHClientChannel[bytes],
        pgid: int | None,
        grace_s: float | None = None,
        claim: str = "",
    ) -> None:
        """End the run's process group on the target
        (:data:`~fleetcron.executors.watchdog.STOP_SCRIPT`: SIGTERM to every member,
        SIGKILL to what is alive after ``grace_s``), then close the channel. The wait is
        on the group, not the channel: a background process that ignores SIGTERM and
        closed its output is still killed."""
        grace = self._kill_grace_s if grace_s is None else grace_s
        try:
            if pgid is None:
                # The wrapper never reported (timed out during login): best effort.
                chan.send_signal("KILL")
            else:
                await asyncio.wait_for(
                    conn.run(stop_command(pgid, grace, claim), check=False),
                    timeout=2 * grace + _STOP_MARGIN_S,
                )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            logger.warning(
                "could not kill a remote command's process group: %s",
                exc,
                extra={"action": "ssh.kill_failed"},
            )
        finally:
            with contextlib.suppress(TimeoutError):
                # The output the command wrote while it ended (a SIGTERM handler's).
                await asyncio.wait_for(asyncio.shield(chan.wait_closed()), 1)
            chan.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(chan.wait_closed(), 5)


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


async def _reported(splitter: MarkerLineSplitter, chan: asyncssh.SSHClientChannel[bytes]) -> None:
    """Wait (up to ``MARKER_WAIT_S``) for the wrapper to report the run's process group."""
    deadline = time.monotonic() + MARKER_WAIT_S
    while splitter.value is None and not chan.is_closing():
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.01)


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


def _mark_and_killed(
    target: SshTarget, out: str, status: int | None, err: str
) -> tuple[int, int, int]:
    """The ``mark=``, ``revoked=`` and ``killed=`` counts the mark-and-scan script
    printed; an ``ExecutionError`` when it failed or did not print all three."""
    values = dict(
        line.split("=", 1)
        for line in out.splitlines()
        if "=" in line and line.split("=", 1)[1].isdigit()
    )
    if status != 0 or not {"mark", "revoked", "killed"} <= values.keys():
        raise ExecutionError(f"{target.name}: active cleanup failed (exit {status}): {err[:200]}")
    return int(values["mark"]), int(values["revoked"]), int(values["killed"])
