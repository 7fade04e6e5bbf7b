"""The one exception tree of fleetcron.

Every error a user can see derives from :class:`FleetcronError`, carries a message
they can act on, and keeps its data in attributes so adapters (CLI, API) can map it
to an exit code or an HTTP status without parsing text::

    FleetcronError
    ├── InvalidInput (also ValueError)       bad input: names the field, value, what is allowed
    │   └── CronError                         a cron expression that does not parse or never fires
    ├── NotFound                              a named object does not exist
    ├── Conflict                              a unique name or rule would be broken
    ├── PermissionDenied                      the actor's role does not allow the action
    ├── AuthenticationFailed                  bad credentials or token
    │   └── SsoRefused                        a single sign-on log-in refused (its reason)
    ├── TooManyAttempts                       a password check refused by the rate limit
    ├── ConfigError                           configuration invalid or inconsistent at start
    ├── StoreError                            the database is unreachable or not usable
    │   └── SchemaOutOfDate                   the database needs `fleetcron db upgrade`
    ├── SecretError                           the master key is missing or cannot decrypt
    ├── ExecutionError                        a command could not be run on a target
    │   ├── ConnectError                      TCP/SSH connection could not be set up
    │   ├── AuthError                         the target refused our key
    │   └── HostKeyMismatch                   the target's host key is not the pinned one
    └── CoordinationError                     ownership cannot be proven: fail closed

Adapters convert third-party errors at the edge with ``raise X from exc``.

A run write the ownership guard refuses raises nothing: it is not made, and a refused
completion is recorded in ``fenced_writes`` (see :mod:`fleetcron.store.runs`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class FleetcronError(Exception):
    """Something went wrong in fleetcron."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidInput(FleetcronError, ValueError):
    """The input is not valid."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: Any = None,
        allowed: str | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.value = value
        self.allowed = allowed


class CronError(InvalidInput):
    """The cron expression is not valid."""


class NotFound(FleetcronError):
    """The object does not exist."""

    def __init__(self, kind: str, name: object, *, field: str | None = None) -> None:
        super().__init__(f"{kind} {name!s} does not exist")
        self.kind = kind
        self.name = name
        #: the input field that named it, when that is not the object's own name
        self.field = field


def found(get: Callable[[], T], field: str) -> T:
    """``get()``, whose :class:`NotFound` (if any) names the input ``field`` that named the
    missing object (a silence's or a blackout window's ``job``, ``target``)."""
    try:
        return get()
    except NotFound as exc:
        exc.field = field
        raise


class Conflict(FleetcronError):
    """The change conflicts with existing data."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class PermissionDenied(FleetcronError):
    """Your role does not allow this action."""


class AuthenticationFailed(FleetcronError):
    """The credentials were not accepted."""


class SsoRefused(AuthenticationFailed):
    """The identity provider's answer was not accepted; log in again."""

    def __init__(self, message: str, *, reason: str, detail: str = "") -> None:
        super().__init__(message)
        #: a stable word for the admin's log and the audit log (``state_expired``,
        #: ``token_signature``, ``no_role``, ...): the log line's action is ``sso.<reason>``
        self.reason = reason
        #: what went wrong in the admin's words (never shown to the user: it may name the
        #: provider's internals)
        self.detail = detail


class TooManyAttempts(FleetcronError):
    """Too many password checks; try again later."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        #: seconds until a new attempt may be admitted (the ``Retry-After`` header)
        self.retry_after_s = retry_after_s


class ConfigError(FleetcronError):
    """The configuration is not valid."""


class StoreError(FleetcronError):
    """The database cannot be used."""


class TransientStoreError(StoreError):
    """The database aborted the transaction only because of another one (a deadlock, a
    serialization failure): run whole again, it succeeds (``store.db.retry_transient``)."""


class SchemaOutOfDate(StoreError):
    """The database schema is older than this fleetcron; run `fleetcron db upgrade`."""


class SecretError(FleetcronError):
    """The master key is missing or does not decrypt the stored secrets."""


class ExecutionError(FleetcronError):
    """The command could not be run on the target."""


class ConnectError(ExecutionError):
    """The target could not be reached."""


class AuthError(ExecutionError):
    """The target refused the credentials."""


class HostKeyMismatch(ExecutionError):
    """The target's host key is not the pinned one; the command was not run."""


class CoordinationError(FleetcronError):
    """This node cannot prove it is the authorized owner; nothing runs."""
