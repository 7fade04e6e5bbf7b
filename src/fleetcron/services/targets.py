"""Targets: add, pair, label, unpair and remove the servers jobs run on.

Pairing proves the target is reachable with its pinned host key and that the command
channel works, then, in one transaction, marks it paired and extends every matching bulk
job to it (the pair audit event is written last, after the extensions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh
from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core import validation as v
from fleetcron.core.labels import parse_labels
from fleetcron.errors import Conflict, FleetcronError, InvalidInput, NotFound
from fleetcron.executors import ssh
from fleetcron.executors.base import SshTarget
from fleetcron.executors.hostkeys import fingerprint, normalize_key_line
from fleetcron.services.audit import AuditNote, audited, record_failure
from fleetcron.services.context import Actor, App
from fleetcron.services.fleet import extend_jobs_to
from fleetcron.store.schema import Assignment, Job, Target

DEFAULT_SSH_PORT = 22


@dataclass(frozen=True)
class PairResult:
    target: Target
    host_key_fingerprint: str | None
    trusted_on_first_use: bool
    extended_jobs: tuple[str, ...]


def get_target(session: Session, name: str) -> Target:
    target = session.scalar(select(Target).where(Target.name == name))
    if target is None:
        raise NotFound("target", name)
    return target


def list_targets(app: App, actor: Actor) -> Sequence[Target]:
    actor.authorize("target.read")
    with app.db.read() as session:
        return session.scalars(select(Target).order_by(Target.name)).all()


def show_target(app: App, actor: Actor, name: str) -> tuple[Target, list[Assignment]]:
    actor.authorize("target.read")
    with app.db.read() as session:
        target = get_target(session, name)
        assignments = list(
            session.scalars(
                select(Assignment).where(Assignment.target_id == target.id).order_by(Assignment.id)
            )
        )
        for assignment in assignments:
            _ = assignment.job.name
        return target, assignments


def add_target(
    app: App,
    actor: Actor,
    name: str,
    *,
    local: bool = False,
    host: str | None = None,
    port: int = DEFAULT_SSH_PORT,
    user: str | None = None,
    private_key: bytes | None = None,
    host_key: str | None = None,
    trust_on_first_use: bool = False,
    labels: Sequence[str] = (),
    notes: str = "",
    verify: bool = True,
) -> PairResult:
    """Add a target; pair it right away unless ``verify`` is false (it then stays unpaired)."""
    note = AuditNote("target.add", target_name=name, detail={"kind": "local" if local else "ssh"})
    with audited(app, actor, note) as session:
        actor.authorize("target.add")
        v.validate_name(name, field="name")
        parsed_labels = parse_labels(labels, field="labels")
        now = app.now()
        target = Target(
            name=name,
            labels=parsed_labels,
            notes=notes,
            paired=False,
            created_at=now,
            updated_at=now,
        )
        if local:
            if host or user or private_key:
                raise InvalidInput(
                    "--local targets take no host, user or key",
                    field="kind",
                    value="local",
                    allowed="--local alone, or --host/--user/--key for ssh",
                )
            target.kind = "local"
        else:
            _fill_ssh_fields(app, target, host, port, user, private_key, host_key)
        if session.scalar(select(Target.id).where(Target.name == name)) is not None:
            raise Conflict(f"target {name} already exists", field="name")
        session.add(target)
        session.flush()
        note.target_id = target.id
        note.detail.update({"host": target.host, "labels": parsed_labels})
    if not verify:
        return PairResult(target, _fingerprint(target.host_key), False, ())
    try:
        return pair_target(app, actor, name, trust_on_first_use=trust_on_first_use)
    except FleetcronError as exc:
        exc.args = (
            f"target {name} was added but not paired: {exc.message}; "
            f"fix that, then run `fleetcron target pair {name}`",
        )
        raise


def _fill_ssh_fields(
    app: App,
    target: Target,
    host: str | None,
    port: int,
    user: str | None,
    private_key: bytes | None,
    host_key: str | None,
) -> None:
    missing = [
        flag
        for flag, value in (("--host", host), ("--user", user), ("--key", private_key))
        if not value
    ]
    if missing:
        raise InvalidInput(
            f"an ssh target needs {', '.join(missing)} (or use --local)",
            field=missing[0].lstrip("-"),
            value=None,
            allowed="--host H --user U --key FILE",
        )
    assert host and user and private_key
    target.kind = "ssh"
    target.host = v.validate_host(host)
    target.port = v.validate_port(port)
    target.user = v.validate_user(user)
    _check_private_key(private_key)
    target.private_key_enc = app.master_key.encrypt(private_key)
    if host_key:
        target.host_key = normalize_key_line(host_key)


def pair_target(
    app: App,
    actor: Actor,
    name: str,
    *,
    host_key: str | None = None,
    trust_on_first_use: bool = False,
) -> PairResult:
    """Verify the target and mark it paired; matching bulk jobs extend to it.

    The SSH check runs before the write transaction so no database lock is held while
    waiting on the network; the transaction then rechecks that the pinned key is unchanged.
    """
    note = AuditNote("target.pair", target_name=name)
    key_fingerprint: str | None = None
    pinned: str | None = None
    tofu = False
    try:
        actor.authorize("target.pair")
        with app.db.read() as session:
            target = get_target(session, name)
            _ = target.private_key_enc
        note.target_id = target.id
        if target.kind == "ssh":
            pinned, tofu = _resolve_host_key(app, target, host_key, trust_on_first_use)
            key_fingerprint = fingerprint(pinned)
            note.detail.update({"host_key": key_fingerprint, "trust_on_first_use": tofu})
            _verify(app, target, pinned)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    with audited(app, actor, note) as session:
        current = get_target(session, name)
        if current.kind == "ssh":
            if current.host_key not in (None, pinned) or current.id != target.id:
                raise Conflict(f"target {name} changed while it was being paired; try again")
            current.host_key = pinned
        now = app.now()
        note.detail["repair"] = current.paired
        current.paired = True
        current.paired_at = now
        current.unpaired_at = None
        current.updated_at = now
        extended = extend_jobs_to(session, app, actor, current)
        note.detail["extended_jobs"] = len(extended)
    return PairResult(current, key_fingerprint, tofu, tuple(extended))


def _resolve_host_key(
    app: App, target: Target, given: str | None, trust_on_first_use: bool
) -> tuple[str, bool]:
    """The host key to pin: the one given, the one already pinned, or (TOFU) the one offered."""
    if given:
        given = normalize_key_line(given)
        if target.host_key and target.host_key != given:
            raise Conflict(
                f"target {target.name} has host key {fingerprint(target.host_key)} pinned; "
                f"the given one is {fingerprint(given)}. Remove and re-add the target to change it",
                field="host_key",
            )
        return given, False
    if target.host_key:
        return target.host_key, False
    if not trust_on_first_use:
        raise InvalidInput(
            f"target {target.name} has no pinned host key; give --host-key KEY "
            "or --trust-on-first-use",
            field="host_key",
            value=None,
            allowed="an OpenSSH public key line, or --trust-on-first-use",
        )
    assert target.host and target.port
    offered = _run(ssh.fetch_host_key(target.host, target.port, app.settings.ssh_connect_timeout_s))
    return offered, True


def _verify(app: App, target: Target, host_key: str) -> None:
    assert target.host and target.port and target.user and target.private_key_enc
    endpoint = SshTarget(
        name=target.name,
        host=target.host,
        port=target.port,
        user=target.user,
        private_key=app.master_key.decrypt(target.private_key_enc).reveal(),
        host_key=host_key,
    )
    _run(ssh.verify_target(endpoint, app.settings.ssh_connect_timeout_s))


def unpair_target(app: App, actor: Actor, name: str) -> int:
    """Remove the target's assignments so nothing more fires there; history stays."""
    note = AuditNote("target.unpair", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.unpair")
        target = get_target(session, name)
        note.target_id = target.id
        removed = len(target.assignments)
        target.assignments.clear()
        now = app.now()
        target.paired = False
        target.unpaired_at = now
        target.updated_at = now
        note.detail["assignments_removed"] = removed
    return removed


def label_target(app: App, actor: Actor, name: str, labels: Sequence[str]) -> Target:
    """Set labels (``k=v``; ``k=`` removes ``k``); a paired target gains matching bulk jobs."""
    note = AuditNote("target.label", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.label")
        target = get_target(session, name)
        note.target_id = target.id
        merged = _merge_labels(target.labels, labels)
        target.labels = merged
        target.updated_at = app.now()
        extended = extend_jobs_to(session, app, actor, target) if target.paired else []
        note.detail.update({"labels": merged, "extended_jobs": len(extended)})
    return target


def _merge_labels(current: Mapping[str, Any], changes: Sequence[str]) -> dict[str, str]:
    merged = {str(k): str(val) for k, val in current.items()}
    removals = [item[:-1] for item in changes if item.endswith("=")]
    merged.update(parse_labels((i for i in changes if not i.endswith("=")), field="labels"))
    for key in removals:
        merged.pop(key, None)
    return merged


def remove_target(app: App, actor: Actor, name: str) -> None:
    note = AuditNote("target.remove", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.remove")
        target = get_target(session, name)
        note.target_id = target.id
        if session.scalar(select(Job.id).where(Job.target_id == target.id).limit(1)) is not None:
            raise Conflict(
                f"target {name} still has individual jobs; remove them first "
                f"(see `fleetcron job list --target {name}`)",
                field="name",
            )
        session.delete(target)


def _check_private_key(private_key: bytes) -> None:
    """Refuse a key that cannot be used (encrypted with a passphrase, or not a key at all)."""
    try:
        asyncssh.import_private_key(private_key)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise InvalidInput(
            f"private key: not a usable private key ({exc})",
            field="private_key",
            value="(file contents not shown)",
            allowed="an unencrypted OpenSSH or PEM private key",
        ) from None


def _fingerprint(host_key: str | None) -> str | None:
    return fingerprint(host_key) if host_key else None


def _run(coro: Any) -> Any:
    """Run one SSH step to completion from synchronous service code."""
    return asyncio.run(coro)
