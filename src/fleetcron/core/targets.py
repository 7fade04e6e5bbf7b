"""What a target is before it is stored: its kind (:class:`TargetKind`, the
``targets.kind`` column) and :class:`TargetSpec`, a target as an operator describes it,
with the one check of its fields that needs no network, key parsing or database.

A new kind of target is a member of :class:`TargetKind`, its fields' rule in
:meth:`TargetSpec.checked`, the column's check constraint (``store/schema.py`` and a
migration) and an executor kind in ``executors/kinds.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

from fleetcron.core import validation as v
from fleetcron.core.labels import parse_labels
from fleetcron.core.target_zones import validate_target_timezone
from fleetcron.errors import InvalidInput

DEFAULT_SSH_PORT = 22
#: How long before its expiry a target's client certificate in use is warned about (the
#: executor logs it, `target trust` marks it).
CLIENT_CERT_EXPIRY_WARNING = timedelta(days=7)


class TargetKind(StrEnum):
    """How a target's commands run; the value is what ``targets.kind`` stores."""

    #: A server reached over SSH with a stored private key and a pinned host key.
    SSH = "ssh"
    #: The scheduler's own host, as the scheduler's user (``allow_local_targets``).
    LOCAL = "local"
    #: A bastion other targets are reached through (``via``); reached like an ssh target
    #: (own key, pinned host key) but runs no jobs.
    JUMP = "jump"

    @property
    def over_ssh(self) -> bool:
        """Reached over SSH with a host, a user, a key and a pinned host key."""
        return self is not TargetKind.LOCAL

    @classmethod
    def parse(cls, value: str, *, field: str = "kind") -> TargetKind:
        """The kind a user typed; an error names the field and the kinds there are."""
        return cls(v.validate_choice(value, tuple(cls), field=field))


#: ``targets.kind``'s check constraint, written from the kinds.
KIND_CHECK_SQL = "kind IN ({})".format(", ".join(f"'{kind.value}'" for kind in TargetKind))


@dataclass(frozen=True)
class CheckedTarget:
    """A :class:`TargetSpec` after :meth:`TargetSpec.checked`: names and addresses
    normalized, labels parsed; ``host``, ``port`` and ``user`` are None for a local
    target. The private key and host key are still as given (their parsing needs the
    SSH library)."""

    name: str
    kind: TargetKind
    host: str | None
    port: int | None
    user: str | None
    private_key: bytes | None
    host_key: str | None
    labels: dict[str, str]
    notes: str
    timezone: str | None
    #: The name of the jump host this target is reached through; None: directly.
    via: str | None = None
    #: Host CA lines trusted instead of a pinned host key (checked with the SSH library).
    host_ca: str | None = None
    #: A user certificate for the private key (checked with the SSH library).
    client_cert: bytes | None = None


@dataclass(frozen=True)
class TargetSpec:
    """A target as ``target add``, the API and the form describe it."""

    name: str
    kind: TargetKind = TargetKind.SSH
    host: str | None = None
    port: int = DEFAULT_SSH_PORT
    user: str | None = None
    private_key: bytes | None = None
    host_key: str | None = None
    labels: Sequence[str] = field(default_factory=tuple)
    notes: str = ""
    #: A zone set by the operator (kept over detection at pairing); None: detect it.
    timezone: str | None = None
    #: The jump host (a target of kind ``jump``) to reach this target through.
    via: str | None = None
    #: Trust the host by a certificate from this CA (and ``@revoked`` lines) instead of
    #: pinning its key.
    host_ca: str | None = None
    #: Log in with this OpenSSH user certificate for ``private_key``.
    client_cert: bytes | None = None

    def checked(self) -> CheckedTarget:
        """The fields checked in the order a user reads them (name, notes, labels, zone,
        then the connection); the first problem raises :class:`InvalidInput` naming
        its field."""
        name = v.validate_target_name(self.name, field="name")
        notes = v.validate_length(self.notes, field="notes", limit=v.NOTES_MAX_CHARS)
        labels = parse_labels(self.labels, field="labels")
        zone = validate_target_timezone(self.timezone) if self.timezone else None
        via = check_via(self.via, self.name, self.kind)
        if self.kind is TargetKind.LOCAL:
            if self.host or self.user or self.private_key or self.host_ca or self.client_cert:
                raise InvalidInput(
                    "kind: a local target takes no host, user or key",
                    field="kind",
                    value=TargetKind.LOCAL.value,
                    allowed="local alone, or host, user and key for ssh",
                )
            return CheckedTarget(name, self.kind, None, None, None, None, None, labels, notes, zone)
        check_ssh_present(self.host, self.user, self.private_key)
        assert self.host and self.user
        return CheckedTarget(
            name,
            self.kind,
            v.validate_host(self.host),
            v.validate_port(self.port),
            v.validate_user(self.user),
            self.private_key,
            self.host_key or None,
            labels,
            notes,
            zone,
            via,
            self.host_ca.strip() if self.host_ca and self.host_ca.strip() else None,
            self.client_cert or None,
        )


def check_ssh_present(
    host: str | None,
    user: str | None,
    key: object,
    *,
    allowed: str = "host, user and key for ssh, or a local target",
) -> None:
    """An SSH target needs a host, a user and a private key; the first missing is named."""
    missing = [name for name, value in (("host", host), ("user", user), ("key", key)) if not value]
    if missing:
        raise InvalidInput(
            f"{missing[0]}: an ssh target needs a host, a user and a private key "
            f"(missing: {', '.join(missing)})",
            field=missing[0],
            value=None,
            allowed=allowed,
        )


def check_via(via: str | None, name: str, kind: TargetKind) -> str | None:
    """The jump host's name, checked as a target name; a local target takes none and a
    target is not its own jump host. Whether it exists, is of kind ``jump`` and makes no
    loop needs the database (``services/targets/jumps.py``)."""
    if not via or not via.strip():
        return None
    if kind is TargetKind.LOCAL:
        raise InvalidInput(
            "via: a local target is not reached over SSH, so it takes no jump host",
            field="via",
            value=via,
            allowed="no jump host for a local target",
        )
    checked = v.validate_target_name(via.strip(), field="via")
    if checked == name:
        raise InvalidInput(
            f"via: target {name} cannot be its own jump host",
            field="via",
            value=via,
            allowed="the name of another target of kind jump",
        )
    return checked
