"""Run commands on this machine through ``/bin/sh -c``, under a watchdog.

A command run as the scheduler's own user is one process: ``/bin/sh -c <command>``
started in a new session, the leader of its process group. Before it starts, its
deadlines are handed to the executor's group watchdog
(:mod:`fleetcron.executors.local_watch`, one detached process for all runs), which kills
its whole process group when the run's budget (``ExecRequest.watchdog_s``) is spent, by
this machine's monotonic clock, even if the scheduler has been killed or stopped in the
meantime; its claim file is written here. A command run as another user runs under the
wrapper of :mod:`fleetcron.executors.watchdog` (POSIX ``sh`` and coreutils ``timeout``),
which writes and removes that user's claim file and kills the group itself. The
scheduler's own timeout handling (SIGTERM to the group, SIGKILL after the grace) works on
top of either.

Trust boundary: local commands run as ``run_as`` (the ``local_run_as`` setting), with
privileges dropped (``setgroups``/``setgid``/``setuid``) before the wrapper starts.
When the scheduler runs as root and no user is configured, local runs are refused
unless ``allow_root`` (``local_allow_root``) says otherwise. The environment is
minimal and predictable, like cron's: see :data:`BASE_PATH` and
:meth:`LocalExecutor.environment`; nothing of the scheduler's own environment is passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar

from fleetcron.executors.base import (
    DEFAULT_KILL_GRACE_S,
    NOT_STARTED_DEADLINE,
    Clock,
    ExecRequest,
    ExecResult,
    Status,
    timeout_error,
    utc_now,
)
from fleetcron.executors.child_exit import watch_exits_by_pidfd
from fleetcron.executors.group_watchdog import group_alive
from fleetcron.executors.local_watch import SUPPORTED as GROUP_WATCH_SUPPORTED
from fleetcron.executors.local_watch import (
    WATCH_VARIABLE,
    GroupWatch,
    boot_clock,
    write_claim_file,
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
from fleetcron.executors.watchdog import (
    CLAIM_DIRECTORY,
    CLAIM_FILE_VARIABLE,
    GENERATION_VARIABLE,
    PGID_MARKER,
    SCOPE_VARIABLE,
    ClaimFileFields,
    Plan,
    claim_file_name,
    guarded_command,
    plain_script,
    plan_for,
    stop_argv,
    unless_superseded,
    watchdog_script,
)

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_CHUNK = 65536
_ABORT_RETRY_S: Final = 0.05
"""On cancel, how often the kill is repeated until the command's pipes close."""
_ABORT_WAIT_S: Final = 5.0
_STOP_MARGIN_S: Final = 10.0
"""Beyond twice the grace, how long the script that ends a run's group may take."""
"""On cancel, how long the kill is repeated before the remaining holders are left alone."""

ACCOUNT_TTL_S: Final = 1.0
"""How long a lookup of the run-as account serves later runs."""

ROOT_REFUSED: Final = (
    "local commands would run as root: set local_run_as (FLEETCRON_LOCAL_RUN_AS) to an "
    "unprivileged user, or set local_allow_root (FLEETCRON_LOCAL_ALLOW_ROOT=true) to allow "
    "running them as root"
)


def runs_privileged(local_run_as: str | None) -> bool:
    """Whether a command on a local target runs with the scheduler's own privileges: no
    ``local_run_as``, or one naming the scheduler's own user (a user that does not exist
    is refused by the executor with its own error)."""
    if local_run_as is None:
        return True
    try:
        return pwd.getpwnam(local_run_as).pw_uid == os.geteuid()
    except KeyError:
        return False


@dataclass(frozen=True)
class RunAs:
    """The account local commands run as."""

    name: str
    uid: int
    gid: int
    home: str
    groups: tuple[int, ...]

    @classmethod
    def lookup(cls, name: str) -> RunAs:
        """Raise ``KeyError`` when ``name`` is not a user of this machine."""
        entry = pwd.getpwnam(name)
        return cls(
            name=entry.pw_name,
            uid=entry.pw_uid,
            gid=entry.pw_gid,
            home=entry.pw_dir,
            groups=tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)),
        )

    @classmethod
    def current(cls) -> RunAs:
        entry = pwd.getpwuid(os.geteuid())
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, ())


class LocalExecutor:
    """Runs requests in a fresh session and process group, as ``run_as``.

    Args:
        clock: source of ``started_at``/``finished_at``.
        kill_grace_s: seconds between SIGTERM and SIGKILL on timeout.
        run_as: user name local commands run as; ``None``: the scheduler's own user.
        allow_root: run commands as root when the scheduler is root and ``run_as`` is
            unset (otherwise such runs fail with :data:`ROOT_REFUSED`).
        watchdog: tests only; ``False`` runs commands without the watchdog (the old
            wrapper), for negative controls.
    """

    def __init__(
        self,
        *,
        clock: Clock = utc_now,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        run_as: str | None = None,
        allow_root: bool = False,
        watchdog: bool = True,
    ):
        self._clock = clock
        self._kill_grace_s = kill_grace_s
        self._run_as_name = run_as
        self._allow_root = allow_root
        self._watchdog = watchdog
        self._account: tuple[float, RunAs] | None = None
        self.group_watch = GroupWatch()

    def account(self) -> RunAs:
        """The account commands run as; raises ``LookupError`` with a clear message.

        Looked up again once :data:`ACCOUNT_TTL_S` has passed since the last lookup, not
        for every run: a burst of runs shares one ``getpwnam``/``getgrouplist`` (each a
        read of the user database), and a changed account is seen a moment later."""
        now = time.monotonic()
        if self._account is not None and now - self._account[0] < ACCOUNT_TTL_S:
            return self._account[1]
        account = self._lookup()
        self._account = (now, account)
        return account

    def _lookup(self) -> RunAs:
        if self._run_as_name is None:
            return RunAs.current()
        try:
            return RunAs.lookup(self._run_as_name)
        except KeyError:
            raise LookupError(
                f"local_run_as names user {self._run_as_name!r}, which does not exist on "
                "this machine"
            ) from None

    @staticmethod
    def environment(request: ExecRequest, account: RunAs | None = None) -> dict[str, str]:
        """PATH, HOME, LOGNAME, USER, LANG=C.UTF-8, SHELL=/bin/sh, then the request's env."""
        user = account or RunAs.current()
        env = {
            "PATH": BASE_PATH,
            "HOME": user.home,
            "LOGNAME": user.name,
            "USER": user.name,
            "LANG": "C.UTF-8",
            "SHELL": "/bin/sh",
        }
        env.update(request.env)
        if request.run_id is not None:
            env["FLEETCRON_RUN_ID"] = str(request.run_id)
        return env

    async def run(self, request: ExecRequest) -> ExecResult:
        """Run the command; the scheduler reaches it through
        :class:`fleetcron.executors.kinds.LocalKind`, its side of the
        :class:`~fleetcron.executors.base.Executor` seam."""
        called = time.monotonic()
        started_at = self._clock()
        account = self._permitted_account()
        if isinstance(account, str):
            return ExecResult.not_started(
                account, started_at=started_at, finished_at=self._clock(), t0=called
            )
        # The deadline on the watchdog's clock is fixed here, with the budget's plan: a pause
        # from now on (SIGSTOP, a stalled VM) brings it no nearer to being extended.
        now_boot = boot_clock()
        steps = plan_for(request, self._kill_grace_s, called)
        if steps is None:
            return ExecResult.not_started(
                NOT_STARTED_DEADLINE, started_at=started_at, finished_at=self._clock(), t0=called
            )
        return await self._run_as(
            request,
            account,
            steps,
            term_at=now_boot + steps.term_after,
            started_at=started_at,
            called=called,
        )

    async def _run_as(
        self,
        request: ExecRequest,
        account: RunAs,
        steps: Plan,
        *,
        term_at: float,
        started_at: datetime,
        called: float,
    ) -> ExecResult:
        """Run the command as ``account`` under the deadline ``steps`` (``term_at``: when
        its group is told to end, on the watchdog's clock), its output kept within bounds
        and its claim file removed after."""
        env = self.environment(request, account)
        stdout = BoundedOutput(request.output_limit)
        stderr = BoundedOutput(request.output_limit)
        direct = account.uid == os.geteuid() and GROUP_WATCH_SUPPORTED
        # A run under a claim's budget refuses to start past its deadline (``_script``).
        claimed = direct and request.watchdog_s is not None
        script, splitter = self._script(
            request,
            env,
            steps,
            tee(stderr, request.live),
            direct=direct,
            not_after=term_at if claimed else None,
        )
        t0 = time.monotonic()
        watched: tuple[str | None, str] = (None, "")
        try:
            if direct:
                watched = await self._watched(request, account, env, steps, term_at)
            proc = await self._spawn_whole(script, account, env, stdout, splitter)
        except (OSError, subprocess.SubprocessError) as exc:
            self._unwatch(watched, None)
            return ExecResult.not_started(
                f"could not start as {account.name}: {exc}",
                started_at=started_at,
                finished_at=self._clock(),
                t0=called,
            )
        if watched[0] is not None:
            self.group_watch.started(watched[0], proc.pid)
        try:
            status, exit_code, error = await self._watch(
                request, proc, stdout=stdout, splitter=splitter, steps=steps, t0=t0
            )
        finally:
            self._unwatch(watched, proc)
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

    async def _watch(
        self,
        request: ExecRequest,
        proc: asyncio.subprocess.Process,
        *,
        stdout: BoundedOutput,
        splitter: MarkerLineSplitter,
        steps: Plan,
        t0: float,
    ) -> tuple[Status, int | None, str | None]:
        """Read the started command's output (stderr through ``splitter``, which picks out
        its process group) while waiting for its outcome."""
        assert proc.stdout is not None and proc.stderr is not None
        readers = asyncio.gather(
            _drain(proc.stdout, tee(stdout, request.live)), _drain(proc.stderr, splitter)
        )
        return await self._outcome(
            request, proc, splitter=splitter, readers=readers, steps=steps, t0=t0
        )

    async def _watched(
        self,
        request: ExecRequest,
        account: RunAs,
        env: dict[str, str],
        steps: Plan,
        term_at: float,
    ) -> tuple[str | None, str]:
        """Before a command run as the scheduler's own user starts: its deadlines handed
        to the group watchdog (its tag, ``FLEETCRON_WATCH``, added to ``env``), its claim
        file written and exported. The tag (``None`` without the watchdog) and the claim
        file's path."""
        key = self.group_watch.key()
        if self._watchdog:
            env[WATCH_VARIABLE] = key
            await self.group_watch.arm(key, term_at, term_at + steps.kill_grace)
        if request.generation is not None:
            env[GENERATION_VARIABLE] = str(request.generation)
            if request.mark_scope is not None:
                env[SCOPE_VARIABLE] = request.mark_scope
        name = claim_file_name(request.run_id) or f"{CLAIM_DIRECTORY}/watch-{key}"
        claim = os.path.join(account.home, name)
        env[CLAIM_FILE_VARIABLE] = write_claim_file(
            claim,
            deadline_at=term_at,
            fields=ClaimFileFields(request.run_id, request.generation, request.mark_scope),
            token=env.get("FLEETCRON_FENCING_TOKEN"),
        )
        return (key if self._watchdog else None), claim

    def _unwatch(
        self, watched: tuple[str | None, str], proc: asyncio.subprocess.Process | None
    ) -> None:
        """After a run (``watched``: its tag and claim file, see :meth:`_watched`): remove
        its claim file, and tell the watchdog when its group is gone (else the watchdog
        forgets the group by itself within a second once it is, and signals leftovers of
        the group at the deadline)."""
        key, claim = watched
        if claim:
            with contextlib.suppress(OSError):
                os.unlink(claim)
        if key is None:
            return
        if proc is None or (proc.returncode is not None and not group_alive(proc.pid)):
            self.group_watch.done(key)

    async def close(self) -> None:
        """Close the pipe to the group watchdog; it exits once the groups it watches are
        gone."""
        self.group_watch.close()

    def _permitted_account(self) -> RunAs | str:
        """The account this run may run as, or why it may not start (the trust boundary)."""
        try:
            account = self.account()
        except LookupError as exc:
            return str(exc)
        if account.uid == 0 and self._run_as_name is None and not self._allow_root:
            return ROOT_REFUSED
        if account.uid != os.geteuid() and os.geteuid() != 0:
            me = RunAs.current().name
            return (
                f"local_run_as is {account.name!r}, but the scheduler runs as {me!r}, not "
                "root: only root can run commands as another user"
            )
        return account

    def _script(
        self,
        request: ExecRequest,
        env: dict[str, str],
        steps: Plan,
        stderr: Sink,
        *,
        direct: bool,
        not_after: float | None,
    ) -> tuple[str, MarkerLineSplitter]:
        """The ``sh -c`` script and the reader of its stderr. A command run as the
        scheduler's own user (``direct``) is the script itself, the leader of its group,
        and refuses to start once ``not_after`` (its claim's deadline on this machine's boot
        clock, when it has one) has passed; one run as another user runs under the wrapper,
        which writes and removes that user's claim file (the scheduler never writes into
        another user's home) and reports the group on stderr."""
        if direct:
            command = guarded_command(
                request.command, request.generation, request.mark_scope, not_after=not_after
            )
            return command, MarkerLineSplitter.passthrough(stderr)
        splitter = MarkerLineSplitter(PGID_MARKER, stderr)
        if not self._watchdog:
            return plain_script(request.command, env), splitter
        script = watchdog_script(
            request.command,
            env,
            term_after_s=steps.term_after,
            kill_grace_s=steps.kill_grace,
            generation=request.generation,
            mark_scope=request.mark_scope,
            run_id=request.run_id,
        )
        return script, splitter

    async def _spawn_whole(
        self,
        script: str,
        account: RunAs,
        env: dict[str, str],
        stdout: BoundedOutput,
        splitter: MarkerLineSplitter,
    ) -> asyncio.subprocess.Process:
        """Start the wrapper; raise ``OSError`` or ``SubprocessError`` when it cannot start.

        The spawn is never cancelled halfway (asyncio would kill only the shell and then
        wait for the orphaned command): on cancel, let it finish and kill the groups.
        """
        spawn = asyncio.ensure_future(self._spawn(script, account, env))
        try:
            return await asyncio.shield(spawn)
        except asyncio.CancelledError:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                proc = await _uncancelled(spawn)
                assert proc.stdout is not None and proc.stderr is not None
                readers = asyncio.gather(_drain(proc.stdout, stdout), _drain(proc.stderr, splitter))
                await _uncancelled(self._abort(proc, splitter, readers))
            raise

    async def _outcome(
        self,
        request: ExecRequest,
        proc: asyncio.subprocess.Process,
        *,
        splitter: MarkerLineSplitter,
        readers: asyncio.Future[Any],
        steps: Plan,
        t0: float,
    ) -> tuple[Status, int | None, str | None]:
        """Wait for the started command within its limit: status, exit code and error.

        A timeout or an operator's stop kills the whole process group; a cancel by the
        caller kills it too and is raised again.
        """
        limit = steps.limit
        status: Status
        error: str | None = None
        exit_code: int | None
        try:
            # Wait for the pipes to close too: a background child still holding them is
            # still part of the job.
            async with asyncio.timeout(limit):
                await unless_stopped(asyncio.shield(readers), request.live)
                exit_code = _shell_status(await proc.wait())
            status = "succeeded" if exit_code == 0 else "failed"
            if self._watchdog and _ended_by_watchdog(exit_code, time.monotonic() - t0, limit):
                status, exit_code = "timed_out", None
                error = timeout_error(request.timeout_s, limit, "process group killed")
                _signal_group(_pgid(splitter) or proc.pid, signal.SIGKILL)
        except TimeoutError:
            await self._kill_group(proc, splitter, readers, steps.grace, request.run_id)
            status, exit_code = "timed_out", None
            error = timeout_error(request.timeout_s, limit, "process group killed")
        except StopRequested:
            # Stopped by an operator: the whole group, as at a timeout (SIGTERM, SIGKILL
            # after the grace); the scheduler records it cancelled.
            if self._watchdog:
                await _reported(splitter, proc)
            await self._kill_group(proc, splitter, readers, self._kill_grace_s, request.run_id)
            status, exit_code, error = "failed", None, STOPPED
        except asyncio.CancelledError:
            # Cancelled by the caller: never leave the job running behind our back.
            await _uncancelled(self._abort(proc, splitter, readers))
            raise
        return status, exit_code, error

    async def kill_older_generations(self, generation: int) -> int:
        """Kill every process group on this machine started by fleetcron for a run tagged
        with a generation lower than ``generation``; return how many groups were killed.

        A group counts when its leader carries ``FLEETCRON_GENERATION`` in its initial
        environment (``/proc/<pid>/environ``, which the command cannot rewrite), so a
        reused pid is never mistaken for a run. Groups are killed with SIGKILL.
        """
        return await asyncio.to_thread(kill_tagged_groups, generation)

    async def _spawn(
        self, script: str, account: RunAs, env: dict[str, str]
    ) -> asyncio.subprocess.Process:
        watch_exits_by_pidfd()  # once per process, on Python 3.11 (executors/child_exit.py)
        switch: dict[str, Any] = {}
        if account.uid != os.geteuid():
            switch = {"user": account.uid, "group": account.gid, "extra_groups": account.groups}
        return await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            script,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=account.home if os.path.isdir(account.home) else "/",
            start_new_session=True,
            **switch,
        )

    async def _kill_group(
        self,
        proc: asyncio.subprocess.Process,
        splitter: MarkerLineSplitter,
        readers: asyncio.Future[Any],
        grace_s: float,
        run_id: int | None = None,
    ) -> None:
        """End the run's group as on an SSH target
        (:func:`~fleetcron.executors.watchdog.stop_argv`: SIGTERM to every member,
        SIGKILL to what is alive after ``grace_s``), then the wrapper. The run's claim file
        says ``stopped`` first, when the command runs as the scheduler's own user (the
        scheduler never writes into another user's home with its privileges)."""
        pgid = _pgid(splitter) or proc.pid
        claim = ""
        if run_id is not None and self._run_as_name is None:
            claim = os.path.join(RunAs.current().home, claim_file_name(run_id))
        try:
            await _uncancelled(
                asyncio.to_thread(
                    subprocess.run,
                    stop_argv(pgid, grace_s, claim),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=2 * grace_s + _STOP_MARGIN_S,
                    check=False,
                )
            )
        except (OSError, subprocess.SubprocessError):
            # The stop script could not run (or hung): signal the group from here.
            _signal_group(pgid, signal.SIGTERM)
            _signal_group(pgid, signal.SIGCONT)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(asyncio.shield(readers), proc.wait()), grace_s
                )
        _signal_group(pgid, signal.SIGKILL)
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        with contextlib.suppress(TimeoutError):
            # The output the command wrote while it ended (a SIGTERM handler's).
            await asyncio.wait_for(asyncio.shield(readers), _ABORT_RETRY_S * 20)
        await _give_up_output(proc, readers)

    async def _abort(
        self,
        proc: asyncio.subprocess.Process,
        splitter: MarkerLineSplitter,
        readers: asyncio.Future[Any],
    ) -> None:
        """Kill a run at once (cancelled): the wrapper, its command group and the command.

        The wrapper's report of the group may come late (a loaded machine) or name a
        group that does not exist yet (``timeout`` makes its own group just after it
        starts), so the wrapper is stopped first, its children are read from ``/proc``
        and every group they may lead is killed, again until the wrapper is reaped and
        the output pipes are closed.
        """
        children = _children_file(proc.pid)
        if self._watchdog and not os.path.exists(children):
            # Not Linux: the wrapper ignores SIGTERM and reports the group right after
            # starting it.
            await _reported(splitter, proc)
        groups = {proc.pid}
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGSTOP)  # no new child from here on
            groups.update(_children(children))
        deadline = time.monotonic() + _ABORT_WAIT_S
        while True:
            pgid = _pgid(splitter)
            for group in groups if pgid is None else groups | {pgid}:
                _signal_group(group, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(readers), _ABORT_RETRY_S)
            if readers.done() and proc.returncode is not None:
                break
            if time.monotonic() >= deadline:
                # Only a process that left the command's group can still hold the pipes.
                logger.warning(
                    "cancelled local run: a process outside the command's process group "
                    "still holds its output; not waiting for it",
                    extra={"action": "local.abort_escaped"},
                )
                break
        await _give_up_output(proc, readers)


def kill_tagged_groups(generation: int, proc_root: str = "/proc") -> int:
    """Synchronous core of :meth:`LocalExecutor.kill_older_generations`; the same rule as
    :data:`fleetcron.executors.watchdog.SCAN_SCRIPT`."""
    prefix = f"{GENERATION_VARIABLE}=".encode()
    killed: set[int] = set()
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"{proc_root}/{entry}/environ", "rb") as handle:
                environ = handle.read()
            pgid = os.getpgid(pid)
        except OSError:
            continue
        tags = [item[len(prefix) :] for item in environ.split(b"\0") if item.startswith(prefix)]
        if not tags or not tags[0].isdigit() or int(tags[0]) >= generation or pgid in killed:
            continue
        if pgid <= 1:
            continue  # 0: a group outside our PID namespace; killpg(0) would hit our own
        if pgid != pid and os.path.exists(f"{proc_root}/{pgid}"):
            continue  # a member of a group with a live leader that is not a run's
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            continue
        killed.add(pgid)
        logger.info(
            "killed process group %d of generation %s (older than %d)",
            pgid,
            tags[0].decode(),
            generation,
            extra={"action": "local.kill_older_generation", "pgid": pgid},
        )
    return len(killed)


async def _uncancelled(awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable`` to the end even if the caller is cancelled meanwhile."""
    future = asyncio.ensure_future(awaitable)
    while True:
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():
                return future.result()


_WATCHDOG_ENDS: Final = frozenset({124, 128 + signal.SIGTERM, 128 + signal.SIGKILL})
"""Exit statuses of a command the watchdog ended: ``timeout``'s, or a shell's signalled."""


def _ended_by_watchdog(exit_code: int, elapsed_s: float, limit_s: float) -> bool:
    """The watchdog (``timeout`` in the wrapper, or the group watchdog's signal) ended the
    command a hair before the executor's own timer: the same outcome as the timer's."""
    return exit_code in _WATCHDOG_ENDS and elapsed_s >= limit_s * 0.99


def _shell_status(returncode: int) -> int:
    """A process's status as a shell reports it: 128 + n when signal n ended it."""
    return 128 - returncode if returncode < 0 else returncode


def _pgid(splitter: MarkerLineSplitter) -> int | None:
    value = splitter.value
    return int(value) if value is not None and value.isdigit() else None


async def _reported(splitter: MarkerLineSplitter, proc: asyncio.subprocess.Process) -> None:
    """Wait (briefly) until the wrapper has reported the command's process group."""
    deadline = time.monotonic() + MARKER_WAIT_S
    while splitter.waiting and proc.returncode is None and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


async def _give_up_output(proc: asyncio.subprocess.Process, readers: asyncio.Future[Any]) -> None:
    """Stop reading a killed run's output and close this side of its pipes. Only a process
    that escaped the command's group can still hold them open: without the close, each
    such process would keep two of the scheduler's descriptors (and asyncio's transport)
    for as long as it lives."""
    readers.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await readers
    # asyncio.subprocess.Process offers no public close; its transport's close() closes
    # both pipes (the process is reaped already: nothing is signalled).
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


async def _drain(stream: asyncio.StreamReader, sink: Sink) -> None:
    while chunk := await stream.read(_CHUNK):
        sink.feed(chunk)


def _children_file(pid: int) -> str:
    """Where Linux lists the children of ``pid``'s main thread."""
    return f"/proc/{pid}/task/{pid}/children"


def _children(path: str) -> list[int]:
    """The pids listed in a ``/proc/.../children`` file (none where it cannot be read)."""
    try:
        with open(path) as handle:
            return [int(child) for child in handle.read().split()]
    except (OSError, ValueError):
        return []


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
