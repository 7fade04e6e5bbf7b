"""Targets: add, edit, pair, re-pin, pause, label, unpair and remove the servers jobs run on.

Pairing proves the target is reachable with its pinned host key and that the command
channel works, then, in one transaction, marks it paired and extends every matching bulk
job to it (the pair audit event is written last, after the extensions).

Decisions worth knowing (docs/web.md and the CLI help say the same):

- **Editing** a paired SSH target's connection (kind, host, port, user, key, host key)
  checks the new connection before anything is saved; when the check fails nothing
  changes. With ``verify=False`` the change is saved and the target is unpaired (as
  :func:`unpair_target` does) until it is paired again. An unpaired target is saved as
  given; pairing checks it.
- **Pairing never replaces a pinned host key**; :func:`plan_repin` and :func:`repin_target`
  do, showing the old and the new fingerprint first and auditing both.
- **Pausing** a target keeps every assignment and its enabled flag; the scheduler records
  each due slot as ``skipped`` ("target paused"); resuming moves every assignment to its
  next slot after now, so nothing fires in a burst.
- **Unpairing** removes the assignments but remembers which jobs were disabled there;
  pairing again restores those per-job pauses.
- **Local targets** run commands on the scheduler host itself, next to the database and
  the master key: they need the ``allow_local_targets`` setting and the admin role.
- Two SSH targets on the same ``user@host:port`` would run every bulk job twice on one
  server: refused unless ``allow_same_host``.

Messages name the problem and the field; the CLI and the web pages add how to act on it
in their own words (a command, or a button).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncssh
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.labels import parse_labels
from fleetcron.errors import (
    Conflict,
    FleetcronError,
    HostKeyMismatch,
    InvalidInput,
    NotFound,
    PermissionDenied,
)
from fleetcron.executors import ssh
from fleetcron.executors.base import SshTarget
from fleetcron.executors.hostkeys import fingerprint, normalize_key_line
from fleetcron.services.audit import AuditNote, audited, command_excerpt, record, record_failure
from fleetcron.services.fleet import extend_jobs_to, next_fire
from fleetcron.store.schema import Assignment, Job, Target

DEFAULT_SSH_PORT = 22
#: Words every message about a changed host key ends with; the CLI and the web pages add
#: how to re-pin (a command, or a button) when they see them.
REPIN_ADVICE = "re-pin its host key"
PAUSE_REASON_MAX = 500
#: Fields whose change means the connection must be checked again.
CONNECTION_FIELDS = ("kind", "host", "port", "user", "private_key", "host_key")


@dataclass(frozen=True)
class PairResult:
    target: Target
    host_key_fingerprint: str | None
    trusted_on_first_use: bool
    extended_jobs: tuple[str, ...]
    #: Jobs left disabled on the target because they were disabled when it was unpaired.
    kept_disabled: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetChanges:
    """What ``target edit`` changes; ``None`` (or empty) keeps the current value.

    ``labels`` replaces the whole label set when given. ``host_key`` replaces the pinned
    key (the connection is checked with it); ``trust_on_first_use`` pins the key the
    (new) address offers.
    """

    kind: str | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    private_key: bytes | None = None
    host_key: str | None = None
    trust_on_first_use: bool = False
    labels: Sequence[str] | None = None
    notes: str | None = None


@dataclass(frozen=True)
class EditResult:
    target: Target
    changed: tuple[str, ...]
    #: The new connection was checked over SSH (host key, login, command channel).
    verified: bool
    #: The target was paired and is not any more (saved without the check).
    unpaired: bool
    host_key_fingerprint: str | None = None
    extended_jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class RepinPlan:
    """What a re-pin would change: shown to a human before :func:`repin_target`."""

    target_name: str
    old_fingerprint: str | None
    new_key: str
    new_fingerprint: str
    trusted_on_first_use: bool


@dataclass(frozen=True)
class PauseResult:
    target: Target
    #: False when the call found the target already in the asked state (nothing changed
    #: but, for a pause, its reason).
    changed: bool


@dataclass(frozen=True)
class RemoveResult:
    removed_jobs: tuple[str, ...] = field(default_factory=tuple)


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


def individual_jobs(app: App, actor: Actor, name: str) -> list[str]:
    """Names of the target's individual jobs (what ``rm --with-jobs`` would remove)."""
    actor.authorize("target.read")
    with app.db.read() as session:
        target = get_target(session, name)
        return list(
            session.scalars(select(Job.name).where(Job.target_id == target.id).order_by(Job.name))
        )


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
    allow_same_host: bool = False,
) -> PairResult:
    """Add a target; pair it right away unless ``verify`` is false (it then stays unpaired).

    Everything that can be checked without the network is checked before the target is
    written, including that pairing will know which host key to pin."""
    note = AuditNote("target.add", target_name=name, detail={"kind": "local" if local else "ssh"})
    with audited(app, actor, note) as session:
        actor.authorize("target.add")
        v.validate_name(name, field="name")
        v.validate_length(notes, field="notes", limit=v.NOTES_MAX_CHARS)
        parsed_labels = parse_labels(labels, field="labels")
        now = app.now()
        target = Target(
            name=name,
            labels=parsed_labels,
            notes=notes,
            paired=False,
            paused=False,
            created_at=now,
            updated_at=now,
        )
        if local:
            if host or user or private_key:
                raise InvalidInput(
                    "kind: a local target takes no host, user or key",
                    field="kind",
                    value="local",
                    allowed="local alone, or host, user and key for ssh",
                )
            check_local_allowed(app, actor)
            target.kind = "local"
        else:
            _fill_ssh_fields(app, target, host, port, user, private_key, host_key)
            if verify and not target.host_key and not trust_on_first_use:
                raise _no_host_key(name)
            _check_same_host(session, target, allow_same_host)
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
        exc.args = (f"target {name} was added but not paired: {exc.message}",)
        raise


def _no_host_key(name: str) -> InvalidInput:
    return InvalidInput(
        f"host key: target {name} has no pinned host key; give the server's host key, or "
        "trust the key it offers now (trust on first use)",
        field="host_key",
        value=None,
        allowed="an OpenSSH public key line, or trust on first use",
    )


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
        name for name, value in (("host", host), ("user", user), ("key", private_key)) if not value
    ]
    if missing:
        raise InvalidInput(
            f"{missing[0]}: an ssh target needs a host, a user and a private key "
            f"(missing: {', '.join(missing)})",
            field=missing[0],
            value=None,
            allowed="host, user and key for ssh, or a local target",
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


def _check_same_host(session: Session, target: Target, allow_same_host: bool) -> None:
    """Refuse a second target on the same ``user@host:port`` unless it is declared on
    purpose: every bulk job would run twice on that server."""
    if allow_same_host or target.kind != "ssh" or not target.host:
        return
    query = select(Target).where(
        Target.kind == "ssh",
        func.lower(Target.host) == target.host.lower(),
        Target.port == target.port,
        Target.user == target.user,
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


def edit_target(
    app: App,
    actor: Actor,
    name: str,
    changes: TargetChanges,
    *,
    verify: bool = True,
    allow_same_host: bool = False,
) -> EditResult:
    """Change a target's connection, labels or notes (see the module docstring for when
    the connection is checked and what ``verify=False`` does)."""
    note = AuditNote("target.edit", target_name=name)
    try:
        actor.authorize("target.edit")
        with app.db.read() as session:
            current = get_target(session, name)
            _ = current.private_key_enc
        note.target_id = current.id
        updated = _edited(app, actor, current, changes)
        tofu = False
        if changes.trust_on_first_use and updated["kind"] == "ssh" and not changes.host_key:
            updated["host_key"] = _run(
                ssh.fetch_host_key(
                    updated["host"], updated["port"], app.settings.ssh_connect_timeout_s
                )
            )
            tofu = True
        changed = tuple(k for k, val in updated.items() if val != _current_value(current, k))
        if not changed:
            raise InvalidInput(
                f"name: nothing to change on target {name}: every given value is its current one",
                field="name",
                value=name,
                allowed="at least one new value (host, port, user, key, host key, labels, notes)",
            )
        note.detail["changed"] = list(changed)
        if "host_key" in changed:
            note.detail["host_key"] = {
                "old": _fingerprint(current.host_key),
                "new": _fingerprint(updated["host_key"]),
                "trust_on_first_use": tofu,
            }
        moved = bool({"kind", "host", "port", "user"} & set(changed))
        if moved and not allow_same_host:
            with app.db.read() as session:
                _check_same_host(session, _probe_target(current, updated), allow_same_host)
        check = (
            any(k in CONNECTION_FIELDS for k in changed)
            and current.paired
            and updated["kind"] == "ssh"
        )
        if check and verify:
            if not updated["host_key"]:
                raise _no_host_key(name)
            try:
                _verify(app, _probe_target(current, updated), updated["host_key"])
            except FleetcronError as exc:
                exc.args = (f"target {name} was not changed: {_repin_wording(exc)}",)
                raise
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    unpair = check and not verify
    with audited(app, actor, note) as session:
        target = get_target(session, name)
        if target.updated_at != current.updated_at:
            raise Conflict(f"target {name} changed while it was being edited; try again")
        for key in changed:
            if key == "private_key":
                target.private_key_enc = updated["private_key"]
            else:
                setattr(target, key, updated[key])
        if moved:
            _check_same_host(session, target, allow_same_host)
        now = app.now()
        target.updated_at = now
        extended: list[str] = []
        if unpair:
            removed = _unpair(target, now)
            note.detail.update({"unpaired": True, "assignments_removed": removed})
        elif target.paired:
            extended = extend_jobs_to(session, app, actor, target)
            note.detail["extended_jobs"] = len(extended)
        note.detail["verified"] = check and verify
    return EditResult(
        target,
        changed,
        verified=check and verify,
        unpaired=unpair,
        host_key_fingerprint=_fingerprint(target.host_key),
        extended_jobs=tuple(extended),
    )


def _current_value(target: Target, key: str) -> Any:
    if key == "private_key":
        return target.private_key_enc
    return getattr(target, key)


def _edited(app: App, actor: Actor, current: Target, changes: TargetChanges) -> dict[str, Any]:
    """The target's fields after ``changes``, validated (the private key encrypted, or the
    stored ciphertext when unchanged)."""
    kind = current.kind if changes.kind is None else changes.kind
    v.validate_choice(kind, ("ssh", "local"), field="kind")
    values: dict[str, Any] = {
        "kind": kind,
        "labels": dict(current.labels),
        "notes": current.notes,
    }
    if changes.labels is not None:
        values["labels"] = parse_labels(changes.labels, field="labels")
    if changes.notes is not None:
        values["notes"] = v.validate_length(changes.notes, field="notes", limit=v.NOTES_MAX_CHARS)
    if kind == "local":
        if changes.host or changes.user or changes.private_key or changes.host_key:
            raise InvalidInput(
                "kind: a local target takes no host, user or key",
                field="kind",
                value="local",
                allowed="local alone, or host, user and key for ssh",
            )
        if current.kind != "local":
            check_local_allowed(app, actor)
        values.update(
            {"host": None, "port": None, "user": None, "private_key": None, "host_key": None}
        )
        return values
    host = changes.host if changes.host is not None else current.host
    user = changes.user if changes.user is not None else current.user
    port = changes.port if changes.port is not None else (current.port or DEFAULT_SSH_PORT)
    if not host or not user or (changes.private_key is None and current.private_key_enc is None):
        missing = [
            n
            for n, val in (
                ("host", host),
                ("user", user),
                ("key", changes.private_key or current.private_key_enc),
            )
            if not val
        ]
        raise InvalidInput(
            f"{missing[0]}: an ssh target needs a host, a user and a private key "
            f"(missing: {', '.join(missing)})",
            field=missing[0],
            value=None,
            allowed="host, user and key for ssh",
        )
    values.update(
        {
            "host": v.validate_host(host),
            "port": v.validate_port(port),
            "user": v.validate_user(user),
            "host_key": normalize_key_line(changes.host_key)
            if changes.host_key
            else current.host_key,
        }
    )
    if changes.private_key is not None:
        _check_private_key(changes.private_key)
        values["private_key"] = app.master_key.encrypt(changes.private_key)
    else:
        values["private_key"] = current.private_key_enc
    return values


def _probe_target(current: Target, updated: Mapping[str, Any]) -> Target:
    """A detached copy of the target with the new connection values, to check them."""
    return Target(
        id=current.id,
        name=current.name,
        kind=updated["kind"],
        host=updated["host"],
        port=updated["port"],
        user=updated["user"],
        private_key_enc=updated["private_key"],
    )


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
    Jobs that were disabled on the target when it was unpaired stay disabled.
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
        if target.kind == "local":
            check_local_enabled(app)
        if target.kind == "ssh":
            pinned, tofu = _resolve_host_key(app, target, host_key, trust_on_first_use)
            key_fingerprint = fingerprint(pinned)
            note.detail.update({"host_key": key_fingerprint, "trust_on_first_use": tofu})
            try:
                _verify(app, target, pinned)
            except HostKeyMismatch as exc:
                exc.args = (_repin_wording(exc),)
                raise
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
        kept_disabled = _restore_disabled(current)
        note.detail["extended_jobs"] = len(extended)
        if kept_disabled:
            note.detail["kept_disabled"] = kept_disabled
    return PairResult(current, key_fingerprint, tofu, tuple(extended), tuple(kept_disabled))


def check_local_enabled(app: App) -> None:
    """Local targets are off unless the host's administrator enabled them."""
    if not app.settings.allow_local_targets:
        raise InvalidInput(
            "kind: local targets are disabled on this server; the administrator of the "
            "scheduler host can enable them with the allow_local_targets setting "
            "(FLEETCRON_ALLOW_LOCAL_TARGETS=true)",
            field="kind",
            value="local",
            allowed="ssh (local targets are disabled)",
        )


def _restore_disabled(target: Target) -> list[str]:
    """After a re-pair: disable again the jobs that were disabled here at the unpair."""
    remembered = set(target.unpaired_disabled_jobs or ())
    target.unpaired_disabled_jobs = None
    kept: list[str] = []
    for assignment in target.assignments:
        # New assignments are not flushed yet: their job_id is still unset.
        if assignment.job.id in remembered and assignment.enabled:
            assignment.enabled = False
            kept.append(assignment.job.name)
    return sorted(kept)


def _repin_wording(exc: FleetcronError) -> str:
    """A host-key mismatch names re-pinning, the one way to accept a changed key."""
    message = exc.message
    if isinstance(exc, HostKeyMismatch):
        message = message.split(" If the server's key was changed on purpose", 1)[0]
        message += f" If the server was reinstalled on purpose, {REPIN_ADVICE}."
    return message


def _resolve_host_key(
    app: App, target: Target, given: str | None, trust_on_first_use: bool
) -> tuple[str, bool]:
    """The host key to pin: the one given, the one already pinned, or (TOFU) the one offered.

    A pinned key is never replaced here (neither by a given key nor by trust on first use):
    that is :func:`repin_target`'s job, which shows both fingerprints first."""
    if given:
        given = normalize_key_line(given)
        if target.host_key and target.host_key != given:
            raise Conflict(
                f"host key: target {target.name} has host key {fingerprint(target.host_key)} "
                f"pinned; the given one is {fingerprint(given)}. Pairing never replaces a "
                f"pinned key: to change it, {REPIN_ADVICE}",
                field="host_key",
            )
        return given, False
    if target.host_key:
        return target.host_key, False
    if not trust_on_first_use:
        raise _no_host_key(target.name)
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


def plan_repin(
    app: App,
    actor: Actor,
    name: str,
    *,
    host_key: str | None = None,
    trust_on_first_use: bool = False,
) -> RepinPlan:
    """The host key a re-pin would pin: the one given, or the one the server offers now.

    Writes nothing; :func:`repin_target` checks and pins it once a human has compared the
    fingerprints."""
    actor.authorize("target.repin")
    with app.db.read() as session:
        target = get_target(session, name)
    if target.kind != "ssh":
        raise InvalidInput(
            f"name: target {name} is local; only ssh targets have a host key",
            field="name",
            value=name,
            allowed="an ssh target",
        )
    if bool(host_key) == bool(trust_on_first_use):
        raise InvalidInput(
            "host key: give the server's new host key, or trust the key it offers now "
            "(trust on first use), not both",
            field="host_key",
            value=None,
            allowed="an OpenSSH public key line, or trust on first use",
        )
    if host_key:
        new_key = normalize_key_line(host_key)
    else:
        assert target.host and target.port
        new_key = _run(
            ssh.fetch_host_key(target.host, target.port, app.settings.ssh_connect_timeout_s)
        )
    if new_key == target.host_key:
        raise Conflict(
            f"host key: target {name} already has host key {fingerprint(new_key)} pinned; "
            "nothing to re-pin",
            field="host_key",
        )
    return RepinPlan(
        name, _fingerprint(target.host_key), new_key, fingerprint(new_key), not host_key
    )


def repin_target(app: App, actor: Actor, plan: RepinPlan) -> Target:
    """Pin ``plan.new_key`` after checking that the server presents it and that the login
    and the command channel work; audited with both fingerprints.

    Refused when the pinned key is no longer the one the plan showed (someone else
    re-pinned meanwhile). Pairing state and assignments do not change."""
    note = AuditNote(
        "target.repin",
        target_name=plan.target_name,
        detail={
            "old_host_key": plan.old_fingerprint,
            "new_host_key": plan.new_fingerprint,
            "trust_on_first_use": plan.trusted_on_first_use,
        },
    )
    try:
        actor.authorize("target.repin")
        with app.db.read() as session:
            target = get_target(session, plan.target_name)
            _ = target.private_key_enc
        note.target_id = target.id
        _verify(app, target, plan.new_key)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    with audited(app, actor, note) as session:
        current = get_target(session, plan.target_name)
        if _fingerprint(current.host_key) != plan.old_fingerprint:
            raise Conflict(
                f"host key: the pinned key of target {plan.target_name} changed to "
                f"{_fingerprint(current.host_key)} meanwhile; start the re-pin again",
                field="host_key",
            )
        current.host_key = plan.new_key
        current.updated_at = app.now()
    return current


def pause_target(app: App, actor: Actor, name: str, reason: str | None = None) -> PauseResult:
    """Maintenance pause: the target keeps its assignments and their flags, and the
    scheduler records each due slot as skipped ("target paused: REASON")."""
    note = AuditNote("target.pause", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.pause")
        target = get_target(session, name)
        note.target_id = target.id
        cleaned = _pause_reason(reason)
        was_paused = target.paused
        now = app.now()
        target.paused = True
        target.paused_reason = cleaned
        if not was_paused:
            target.paused_at = now
            target.paused_by = actor.name
        target.updated_at = now
        note.detail.update({"reason": cleaned, "already_paused": was_paused})
    return PauseResult(target, not was_paused)


def _pause_reason(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return None
    cleaned = reason.strip()
    if len(cleaned) > PAUSE_REASON_MAX or any(ord(ch) < 32 or ord(ch) == 127 for ch in cleaned):
        raise InvalidInput(
            f"reason: must be one line of at most {PAUSE_REASON_MAX} characters "
            f"(got {len(cleaned)} characters)",
            field="reason",
            value=cleaned[:40],
            allowed=f"one line of text, at most {PAUSE_REASON_MAX} characters",
        )
    return cleaned


def resume_target(app: App, actor: Actor, name: str) -> PauseResult:
    """End a pause. Every assignment continues from its next slot after now: slots that
    fell inside the pause stay skipped and nothing catches up in a burst."""
    note = AuditNote("target.resume", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.pause")
        target = get_target(session, name)
        note.target_id = target.id
        was_paused = target.paused
        now = app.now()
        if was_paused:
            note.detail.update(
                {
                    "reason": target.paused_reason,
                    "paused_at": target.paused_at.isoformat() if target.paused_at else None,
                    "paused_by": target.paused_by,
                }
            )
            for assignment in target.assignments:
                assignment.next_fire_at = next_fire(assignment.job, now)
                assignment.updated_at = now
            target.paused = False
            target.paused_reason = target.paused_at = target.paused_by = None
            target.updated_at = now
        note.detail["was_paused"] = was_paused
    return PauseResult(target, was_paused)


def unpair_target(app: App, actor: Actor, name: str) -> int:
    """Remove the target's assignments so nothing more fires there; history stays, and
    which jobs were disabled here is remembered for the next pairing."""
    note = AuditNote("target.unpair", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.unpair")
        target = get_target(session, name)
        note.target_id = target.id
        removed = _unpair(target, app.now())
        note.detail["assignments_removed"] = removed
        if target.unpaired_disabled_jobs:
            note.detail["remembered_disabled"] = len(target.unpaired_disabled_jobs)
    return removed


def _unpair(target: Target, now: Any) -> int:
    removed = len(target.assignments)
    disabled = sorted(a.job_id for a in target.assignments if not a.enabled)
    if target.paired or disabled:
        target.unpaired_disabled_jobs = disabled or None
    target.assignments.clear()
    target.paired = False
    target.unpaired_at = now
    target.updated_at = now
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


def remove_target(app: App, actor: Actor, name: str, *, with_jobs: bool = False) -> RemoveResult:
    """Remove a target (its run history stays). Its individual jobs go with it only when
    ``with_jobs`` is given; each of them is audited as ``job.remove``."""
    note = AuditNote("target.remove", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize("target.remove")
        target = get_target(session, name)
        note.target_id = target.id
        jobs = list(
            session.scalars(select(Job).where(Job.target_id == target.id).order_by(Job.name))
        )
        if jobs and not with_jobs:
            listed = ", ".join(job.name for job in jobs)
            raise Conflict(
                f"target {name} still has {len(jobs)} individual job(s): {listed}; remove "
                "them together with the target, or remove them first",
                field="with_jobs",
            )
        if jobs:
            actor.authorize("job.remove")
        for job in jobs:
            record(
                session,
                app,
                actor,
                AuditNote(
                    "job.remove",
                    job_id=job.id,
                    job_name=job.name,
                    target_id=target.id,
                    target_name=name,
                    detail={
                        "origin": job.origin,
                        "with_target": True,
                        "schedule": job.schedule,
                        "command": command_excerpt(job.command),
                    },
                ),
                success=True,
            )
            session.delete(job)
        session.flush()
        note.detail["removed_jobs"] = [job.name for job in jobs]
        session.delete(target)
    return RemoveResult(tuple(job.name for job in jobs))


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
