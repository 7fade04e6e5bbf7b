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

from typing import Any


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


class Conflict(FleetcronError):
    """The change conflicts with existing data."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class PermissionDenied(FleetcronError):
    """Your role does not allow this action."""


class AuthenticationFailed(FleetcronError):
    """The credentials were not accepted."""


class ConfigError(FleetcronError):
    """The configuration is not valid."""


class StoreError(FleetcronError):
    """The database cannot be used."""


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
