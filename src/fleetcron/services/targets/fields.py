"""A target's fields beyond :meth:`~fleetcron.core.targets.TargetSpec.checked`: what needs
the SSH library, the database or the caller's role (the private key, the host key line,
a second target on one server, local targets allowed), and an edit's changes checked
against the target as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.labels import parse_labels
from fleetcron.core.target_zones import validate_target_timezone
from fleetcron.core.targets import DEFAULT_SSH_PORT, CheckedTarget, TargetKind, check_ssh_present
from fleetcron.errors import Conflict, InvalidInput, PermissionDenied
from fleetcron.executors.hostkeys import normalize_host_ca, normalize_key_line
from fleetcron.services.projects.scope import target_reaches
from fleetcron.services.targets.pairing import check_local_enabled
from fleetcron.store.schema import Target

#: Fields whose change means the connection must be checked again.
CONNECTION_FIELDS = (
    "kind",
    "host",
    "port",
    "user",
    "private_key",
    "host_key",
    "via_id",
    "host_ca",
    "client_cert",
)


@dataclass(frozen=True)
class TargetChanges:
    """What ``target edit`` changes; ``None`` (or empty) keeps the current value.

    ``labels`` replaces the whole label set when given. ``host_key`` replaces the pinned
    key (the connection is checked with it); ``trust_on_first_use`` pins the key the
    (new) address offers.
    """

    kind: TargetKind | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    private_key: bytes | None = None
    host_key: str | None = None
    trust_on_first_use: bool = False
    labels: Sequence[str] | None = None
    notes: str | None = None
    #: A new zone set by the operator (kept over detection); ``""`` clears the zone.
    timezone: str | None = None
    #: A new jump host to reach the target through; ``""``: reach it directly.
    via: str | None = None
    #: New host CA lines (trust by certificate); ``""``: back to a pinned host key.
    host_ca: str | None = None
    #: A new user certificate for the key; ``b""``: log in with the bare key again.
    client_cert: bytes | None = None


def check_local_allowed(app: App, actor: Actor) -> None:
    """A local target runs commands as the scheduler's own user: admins only, and only
    when the host's administrator enabled local targets."""
    try:
        actor.authorize("target.local")
    except PermissionDenied:
        raise PermissionDenied(
            f"{actor.name} ({actor.role}) may not add a local target: its commands run on the "
            "scheduler host itself, next to the database and the master key, so only an "
            "admin may add one"
        ) from None
    check_local_enabled(app)


def fill_ssh_fields(app: App, target: Target, fields: CheckedTarget) -> None:
    """The connection of a checked SSH target on its row: the key checked and encrypted,
    the host key normalized."""
    assert fields.private_key is not None
    target.kind = fields.kind
    target.host = fields.host
    target.port = fields.port
    target.user = fields.user
    check_private_key(fields.private_key)
    target.private_key_enc = app.master_key.encrypt(fields.private_key)
    if fields.host_key:
        target.host_key = normalize_key_line(fields.host_key)
    if fields.host_ca:
        target.host_ca = normalize_host_ca(fields.host_ca)
    if fields.client_cert:
        from fleetcron.executors.user_certs import read_user_cert  # SSH loaded when used

        info = read_user_cert(fields.client_cert, fields.private_key, now=app.now())
        target.client_cert_enc = app.master_key.encrypt(fields.client_cert)
        target.client_cert_expires_at = info.valid_before


def check_same_host(session: Session, target: Target, allow_same_host: bool) -> None:
    """Refuse a second target on the same ``user@host:port`` (reached the same way: the
    same address behind two jump hosts is two servers) unless it is declared on purpose:
    every bulk job would run twice on that server. Only among the targets of the target's
    project (and those shared into it): another project's are not named, nor counted."""
    if allow_same_host or target.kind != TargetKind.SSH or not target.host:
        return
    query = select(Target).where(
        target_reaches(target.project_id),
        Target.kind == TargetKind.SSH,
        func.lower(Target.host) == target.host.lower(),
        Target.port == target.port,
        Target.user == target.user,
        Target.via_id.is_(None) if target.via_id is None else Target.via_id == target.via_id,
    )
    if target.id is not None:
        query = query.where(Target.id != target.id)
    other = session.scalars(query.order_by(Target.name).limit(1)).first()
    if other is not None:
        raise Conflict(
            f"host: target {other.name} already uses {target.user}@{target.host}:{target.port}; "
            "two targets on one server run every bulk job twice there",
            field="host",
        )


def current_value(target: Target, key: str) -> Any:
    if key == "private_key":
        return target.private_key_enc
    if key == "client_cert":
        return target.client_cert_enc
    return getattr(target, key)


def edited(
    app: App, actor: Actor, current: Target, changes: TargetChanges, *, via: Target | None
) -> dict[str, Any]:
    """The target's fields after ``changes``, validated (the private key encrypted, or the
    stored ciphertext when unchanged); ``via`` is the jump host after the change, already
    resolved (:func:`~fleetcron.services.targets.jumps.resolve_via`)."""
    kind = TargetKind(current.kind) if changes.kind is None else changes.kind
    values = _plain_values(current, changes)
    values["kind"] = kind
    if kind is TargetKind.LOCAL:
        _check_local_change(app, actor, current, changes)
        values.update(
            {
                "host": None,
                "port": None,
                "user": None,
                "private_key": None,
                "host_key": None,
                "via_id": None,
                "host_ca": None,
                "client_cert": None,
                "client_cert_expires_at": None,
            }
        )
        return values
    values.update(_connection_values(app, current, changes))
    values["via_id"] = via.id if via is not None else None
    return values


def _plain_values(current: Target, changes: TargetChanges) -> dict[str, Any]:
    """Labels, notes and zone after ``changes``, validated."""
    values: dict[str, Any] = {
        "labels": dict(current.labels),
        "notes": current.notes,
        "timezone": current.timezone,
    }
    if changes.timezone is not None:
        values["timezone"] = (
            validate_target_timezone(changes.timezone) if changes.timezone.strip() else None
        )
    if changes.labels is not None:
        values["labels"] = parse_labels(changes.labels, field="labels")
    if changes.notes is not None:
        values["notes"] = v.validate_length(changes.notes, field="notes", limit=v.NOTES_MAX_CHARS)
    return values


def _check_local_change(app: App, actor: Actor, current: Target, changes: TargetChanges) -> None:
    """A target becoming (or staying) local takes no connection; becoming one needs the
    right to add local targets."""
    given = (changes.host, changes.user, changes.private_key, changes.host_key, changes.via)
    if any(given) or changes.host_ca or changes.client_cert:
        raise InvalidInput(
            "kind: a local target takes no host, user, key or jump host",
            field="kind",
            value=TargetKind.LOCAL.value,
            allowed="local alone, or host, user and key for ssh",
        )
    if current.kind != TargetKind.LOCAL:
        check_local_allowed(app, actor)


def _connection_values(app: App, current: Target, changes: TargetChanges) -> dict[str, Any]:
    """Host, port, user, host key and (encrypted) private key after ``changes``."""
    host = changes.host if changes.host is not None else current.host
    user = changes.user if changes.user is not None else current.user
    port = changes.port if changes.port is not None else (current.port or DEFAULT_SSH_PORT)
    check_ssh_present(
        host,
        user,
        changes.private_key or current.private_key_enc,
        allowed="host, user and key for ssh",
    )
    assert host and user
    values: dict[str, Any] = {
        "host": v.validate_host(host),
        "port": v.validate_port(port),
        "user": v.validate_user(user),
        "host_key": normalize_key_line(changes.host_key) if changes.host_key else current.host_key,
        "host_ca": current.host_ca,
    }
    if changes.host_ca is not None:
        values["host_ca"] = normalize_host_ca(changes.host_ca) if changes.host_ca.strip() else None
    if changes.private_key is not None:
        check_private_key(changes.private_key)
        values["private_key"] = app.master_key.encrypt(changes.private_key)
    else:
        values["private_key"] = current.private_key_enc
    values.update(_cert_values(app, current, changes))
    return values


def _cert_values(app: App, current: Target, changes: TargetChanges) -> dict[str, Any]:
    """The user certificate after ``changes`` (checked against the key it will go with),
    encrypted, and its expiry; a new key without a new certificate drops the old one."""
    keep = changes.private_key is None
    if changes.client_cert is None:
        return {
            "client_cert": current.client_cert_enc if keep else None,
            "client_cert_expires_at": current.client_cert_expires_at if keep else None,
        }
    if not changes.client_cert.strip():
        return {"client_cert": None, "client_cert_expires_at": None}
    key = (
        changes.private_key
        if changes.private_key is not None
        else app.master_key.decrypt(current.private_key_enc or b"").reveal()
    )
    from fleetcron.executors.user_certs import read_user_cert  # SSH loaded when used

    info = read_user_cert(changes.client_cert, key, now=app.now())
    return {
        "client_cert": app.master_key.encrypt(changes.client_cert),
        "client_cert_expires_at": info.valid_before,
    }


def probe_target(current: Target, updated: Mapping[str, Any]) -> Target:
    """A detached copy of the target with the new connection values, to check them."""
    return Target(
        id=current.id,
        project_id=current.project_id,
        name=current.name,
        kind=updated["kind"],
        host=updated["host"],
        port=updated["port"],
        user=updated["user"],
        private_key_enc=updated["private_key"],
        via_id=updated["via_id"],
        host_ca=updated["host_ca"],
        client_cert_enc=updated["client_cert"],
    )


def check_private_key(private_key: bytes) -> None:
    """Refuse a key that cannot be used (encrypted with a passphrase, or not a key at all)."""
    import asyncssh  # loaded where a key is read

    try:
        asyncssh.import_private_key(private_key)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise InvalidInput(
            f"private key: not a usable private key ({exc})",
            field="private_key",
            value="(file contents not shown)",
            allowed="an unencrypted OpenSSH or PEM private key",
        ) from None
