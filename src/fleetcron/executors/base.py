"""Contracts of the executors: what a run asks for, what it gives back.

An executor runs one shell command and reports how it ended. It never raises because
the command failed, timed out or the target could not be reached: every such outcome
is an :class:`ExecResult` with a ``status``. Only programming errors and invalid
requests (``InvalidInput``) raise.

Implementations: :class:`fleetcron.executors.local.LocalExecutor` (a subprocess on this
machine) and :class:`fleetcron.executors.ssh.SshExecutor` (OpenSSH targets, asyncssh).
The scheduler sees them through :class:`Executor`, one per target kind
(:mod:`fleetcron.executors.kinds`); :mod:`fleetcron.executors.fake` runs nothing.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol

from fleetcron.core.ownership import DEFAULT_KILL_GRACE_S as DEFAULT_KILL_GRACE_S
from fleetcron.core.statuses import ExecutorStatus
from fleetcron.errors import InvalidInput
from fleetcron.executors.hostkeys import parse_key_line, split_host_ca
from fleetcron.executors.output import EMPTY_OUTPUT as EMPTY_OUTPUT
from fleetcron.executors.output import LiveOutput
from fleetcron.executors.output import OutputExcerpt as OutputExcerpt

Status = ExecutorStatus
"""How a run ended: exit 0, non-zero exit, killed at its timeout, never started (the subset
of ``core.statuses.RunStatus`` an executor returns)."""

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime; injected so callers control it."""

DEFAULT_TIMEOUT_S: Final = 300.0
"""A run is terminated after this many seconds unless the request says otherwise."""

DEFAULT_OUTPUT_LIMIT: Final = 4096
"""Bytes kept from the head and, separately, from the tail of stdout and of stderr."""

NOT_STARTED_DEADLINE: Final = "claim deadline reached before start"
SUPERSEDED: Final = "refused by the target: generation"
"""Start of ``ExecResult.error`` (status ``connect_error``) when the target's
highest-generation mark had passed the run's generation: the command was not started."""
"""``ExecResult.error`` (status ``connect_error``) when the watchdog budget ran out
before the command could start (connecting, waiting for a concurrency slot)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MARK_SCOPE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def utc_now() -> datetime:
    """The default :data:`Clock`."""
    return datetime.now(UTC)


def timeout_error(timeout_s: float, limit: float, what: str) -> str:
    """``ExecResult.error`` of a ``timed_out`` run stopped at ``limit`` seconds (its
    timeout, or the claim deadline when that came first)."""
    if limit < timeout_s:
        return (
            f"claim deadline reached after {limit:g} s, before the timeout of {timeout_s:g} s; "
            f"{what}"
        )
    return f"timed out after {timeout_s:g} s; {what}"


@dataclass(frozen=True)
class ExecRequest:
    """One command to run.

    ``env`` is added to the command's environment (the scheduler puts
    ``FLEETCRON_RUN_ID``, ``FLEETCRON_JOB``, ``FLEETCRON_TARGET``,
    ``FLEETCRON_SCHEDULED_FOR`` there). Raises :class:`InvalidInput` for an empty
    command, a non-positive timeout, a negative output limit or a bad variable name.

    ``watchdog_s`` is the claim deadline as a budget: seconds, counted from
    ``budget_from`` (this process's ``time.monotonic()`` when the budget was measured; the
    scheduler measures it as it builds the request) or, without it, from the moment the
    executor's ``run()`` is called, after which the command's whole process group must be
    gone. A scheduler paused between measuring and running (SIGSTOP, a stalled VM) finds
    its budget spent when it resumes, instead of starting with a fresh one. It is enforced
    on the executing machine by a watchdog that does not depend on the scheduler process
    (it keeps working when the scheduler is killed, stopped or cut off). The executor
    subtracts the time spent before the command started (connecting, waiting for a slot)
    and refuses to start when nothing is left
    (status ``connect_error``, error :data:`NOT_STARTED_DEADLINE`). ``None`` means
    ``timeout_s`` plus the executor's kill grace.

    ``run_id`` and ``generation`` tag the command's processes on the target so that
    ``kill_older_generations`` can find them later; untagged runs are never killed by it.
    """

    command: str
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    watchdog_s: float | None = None
    budget_from: float | None = None
    run_id: int | None = None
    generation: int | None = None
    #: The installation's highest-generation mark the target honours (with ``generation``):
    #: a run whose generation the mark has passed is refused before the command starts.
    mark_scope: str | None = None
    #: Where followers read the output while the command runs, and the run's stop request
    #: (the executor kills the whole process group when it is set); None: nobody follows.
    live: LiveOutput | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._check_command()
        self._check_limits()
        self._check_env()

    def _check_command(self) -> None:
        if self.mark_scope is not None and not _MARK_SCOPE.fullmatch(self.mark_scope):
            raise InvalidInput(
                f"invalid mark scope {self.mark_scope!r}",
                field="mark_scope",
                value=self.mark_scope,
                allowed="1-64 letters, digits, _ or -",
            )
        if not self.command.strip():
            raise InvalidInput(
                "the command is empty",
                field="command",
                value=self.command,
                allowed="a non-empty shell command",
            )

    def _check_limits(self) -> None:
        if not self.timeout_s > 0:
            raise InvalidInput(
                f"timeout must be positive, got {self.timeout_s}",
                field="timeout_s",
                value=self.timeout_s,
                allowed="a number of seconds > 0",
            )
        if self.watchdog_s is not None and not (
            self.watchdog_s > 0 and math.isfinite(self.watchdog_s)
        ):
            raise InvalidInput(
                f"watchdog budget must be positive, got {self.watchdog_s}",
                field="watchdog_s",
                value=self.watchdog_s,
                allowed="a finite number of seconds > 0, or None for timeout + kill grace",
            )
        for tag in ("run_id", "generation"):
            number = getattr(self, tag)
            if number is not None and (isinstance(number, bool) or number < 0):
                raise InvalidInput(
                    f"{tag} must be a non-negative integer, got {number!r}",
                    field=tag,
                    value=number,
                    allowed="an integer >= 0, or None",
                )
        if self.output_limit < 0:
            raise InvalidInput(
                f"output limit must not be negative, got {self.output_limit}",
                field="output_limit",
                value=self.output_limit,
                allowed="a number of bytes >= 0",
            )

    def _check_env(self) -> None:
        for name, value in self.env.items():
            if not _ENV_NAME.fullmatch(name):
                raise InvalidInput(
                    f"invalid environment variable name {name!r}",
                    field="env",
                    value=name,
                    allowed="letters, digits and _, not starting with a digit",
                )
            if "\0" in value:
                raise InvalidInput(
                    f"environment variable {name} contains a NUL byte",
                    field="env",
                    value=name,
                    allowed="text without NUL bytes",
                )

    def watchdog_budget(self, kill_grace_s: float) -> float:
        """Seconds from :meth:`budget_start` to the moment the process group must be gone."""
        return self.watchdog_s if self.watchdog_s is not None else self.timeout_s + kill_grace_s

    def budget_start(self, called: float) -> float:
        """The ``time.monotonic()`` the budget counts from: ``budget_from``, or ``called``
        (when ``run()`` was called) for a request that does not say."""
        return self.budget_from if self.budget_from is not None else called


@dataclass(frozen=True)
class ExecResult:
    """How a run ended.

    ``exit_code`` is set for ``succeeded`` and ``failed`` only. ``error`` explains a
    ``timed_out`` or ``connect_error`` run (for example ``"connection refused"``,
    ``"authentication failed for user deploy"``, ``"host key mismatch: expected
    SHA256:..., got SHA256:..."``). ``started_at``/``finished_at`` come from the
    executor's clock; ``duration_ms`` from a monotonic timer.
    """

    status: Status
    exit_code: int | None
    stdout: OutputExcerpt
    stderr: OutputExcerpt
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    error: str | None = None

    @classmethod
    def ended(
        cls,
        status: Status,
        exit_code: int | None,
        error: str | None,
        *,
        stdout: OutputExcerpt,
        stderr: OutputExcerpt,
        started_at: datetime,
        finished_at: datetime,
        t0: float,
    ) -> ExecResult:
        """A run that ended ``status`` at ``finished_at``, timed from the monotonic ``t0``."""
        return cls(
            status=status,
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=int((time.monotonic() - t0) * 1000),
            error=error,
        )

    @classmethod
    def not_started(
        cls,
        error: str,
        *,
        started_at: datetime,
        finished_at: datetime | None = None,
        t0: float | None = None,
    ) -> ExecResult:
        """A run whose command never started: ``connect_error`` saying why, no output. Its
        duration runs from the monotonic ``t0`` (none given: zero)."""
        return cls(
            status="connect_error",
            exit_code=None,
            stdout=EMPTY_OUTPUT,
            stderr=EMPTY_OUTPUT,
            started_at=started_at,
            finished_at=started_at if finished_at is None else finished_at,
            duration_ms=0 if t0 is None else int((time.monotonic() - t0) * 1000),
            error=error,
        )


@dataclass(frozen=True)
class SshTarget:
    """An OpenSSH server to run commands on.

    ``private_key`` is the decrypted client key (OpenSSH or PEM text); it is kept in
    memory only and never appears in ``repr``. ``host_key`` is the pinned server key
    as an OpenSSH public key line (``"ssh-ed25519 AAAA..."``); no other key is trusted.
    ``via`` is the chain of jump hosts the connection goes through, the first one reached
    directly (empty: the server is reached directly, never otherwise). ``host_ca``, when
    set, trusts the server by a host certificate from one of its CA keys instead of a
    pinned key (``@cert-authority`` semantics: the certificate must name the host as a
    principal, be valid now and its key not be among the ``@revoked`` lines); ``host_key``
    is then empty.
    """

    name: str
    host: str
    port: int
    user: str
    private_key: str | bytes = field(repr=False)
    host_key: str
    via: tuple[SshTarget, ...] = ()
    host_ca: str = ""
    #: A user certificate for ``private_key`` (OpenSSH ``-cert.pub`` text); empty: none.
    client_cert: str | bytes = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise InvalidInput(
                f"port must be 1-65535, got {self.port}",
                field="port",
                value=self.port,
                allowed="1-65535",
            )
        if self.host_ca:
            split_host_ca(self.host_ca)
        else:
            parse_key_line(self.host_key)
        for name in ("host", "user"):
            if not getattr(self, name):
                raise InvalidInput(
                    f"{name} is empty", field=name, value="", allowed=f"a non-empty {name}"
                )


@dataclass(frozen=True)
class RunTarget:
    """Where one run goes, as the run store hands it over: the target's kind (the key of
    the scheduler's executor table) and, for SSH, its connection with the private key
    still encrypted (the SSH adapter decrypts it, once per key). ``private_key_enc`` is
    never shown in ``repr``."""

    name: str
    kind: str
    host: str | None = None
    port: int | None = None
    user: str | None = None
    private_key_enc: bytes | None = field(default=None, repr=False)
    host_key: str | None = None
    #: The jump hosts to go through, the first one reached directly (kind ``jump``).
    via: tuple[RunTarget, ...] = ()
    #: The host CA trusted instead of a pinned key (see :class:`SshTarget`).
    host_ca: str | None = None
    #: The user certificate, encrypted like the key.
    client_cert_enc: bytes | None = field(default=None, repr=False)


class Executor(Protocol):
    """The seam between the scheduler and whatever runs commands, one per target kind
    (:class:`~fleetcron.core.targets.TargetKind`; tests add
    :class:`fleetcron.executors.fake.FakeExecutor`).

    ``admit()`` is entered before the request is built, so that the watchdog budget and
    the self-fencing check are taken once a run may start (the local executor's
    concurrency cap waits there); ``run`` never raises for the command's outcome.
    """

    def admit(self) -> AbstractAsyncContextManager[object]:
        """Wait for this executor's admission (a concurrency slot, or nothing)."""
        ...

    async def run(self, target: RunTarget, request: ExecRequest) -> ExecResult:
        """Run the command on ``target`` to completion or timeout."""
        ...

    async def close(self) -> None:
        """Release what the executor holds (pooled connections); later runs reopen."""
        ...
