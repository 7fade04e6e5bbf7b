"""Pairing and host keys: prove a target is reachable with its pinned host key, mark it
paired, re-pin a changed key; and, at pairing, read the target's time zone.

Pairing proves the target is reachable with its pinned host key and that the command
channel works, then, in one transaction, marks it paired and extends every matching bulk
job to it (the pair audit event is written last, after the extensions).

- **Pairing never replaces a pinned host key**; :func:`plan_repin` and :func:`repin_target`
  do, showing the old and the new fingerprint first and auditing both.
- **The time zone** is read in the same SSH connection, after the pinned key was
  accepted, with one command (``timedatectl``, else ``/etc/timezone``, else the
  ``/etc/localtime`` link; :mod:`fleetcron.core.target_zones`); a local target gets the
  scheduler host's zone the same way. Not finding one is no pairing failure: the zone stays
  empty and the result says why. A zone an operator set is never overwritten.
- Unpairing removes the assignments but remembers which jobs were disabled there;
  pairing again restores those per-job pauses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import stat
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.addresses import IPAddress, private_reason
from fleetcron.core.permissions import allowed
from fleetcron.core.target_zones import (
    DETECT_COMMAND,
    SOURCE_DETECTED,
    SOURCE_OPERATOR,
    parse_detected_zone,
)
from fleetcron.core.targets import TargetKind
from fleetcron.errors import (
    AuthError,
    Conflict,
    ConnectError,
    FleetcronError,
    HostKeyMismatch,
    InvalidInput,
)
from fleetcron.executors.base import SshTarget
from fleetcron.executors.hostkeys import fingerprint, normalize_key_line, split_host_ca
from fleetcron.services.audit import AuditNote, audited, record_failure
from fleetcron.services.fleet.assignments import extend_jobs_to, get_target, refire_target_local
from fleetcron.services.projects.scope import place
from fleetcron.services.targets.jumps import chain_of, hops_via
from fleetcron.services.targets.views import TargetView
from fleetcron.store.schema import Target

log = logging.getLogger(__name__)

#: How long detecting the scheduler host's own zone (for a local target) may take.
LOCAL_DETECT_TIMEOUT_S = 5.0


#: Words every message about a changed host key ends with; the CLI and the web pages add
#: how to re-pin (a command, or a button) when they see them.
REPIN_ADVICE = "re-pin its host key"


@dataclass(frozen=True)
class PairResult:
    target: TargetView
    host_key_fingerprint: str | None
    trusted_on_first_use: bool
    extended_jobs: tuple[str, ...]
    #: Jobs left disabled on the target because they were disabled when it was unpaired.
    kept_disabled: tuple[str, ...] = ()
    #: The target's zone after pairing (``None``: unknown) and how it came about: which
    #: source reported it, that an operator set it, or why none was found.
    timezone: str | None = None
    timezone_note: str = ""


@dataclass(frozen=True)
class RepinPlan:
    """What a re-pin would change: shown to a human before :func:`repin_target`."""

    target_name: str
    old_fingerprint: str | None
    new_key: str
    new_fingerprint: str
    trusted_on_first_use: bool


def missing_host_key(name: str) -> InvalidInput:
    return InvalidInput(
        f"host key: target {name} has no pinned host key; give the server's host key, or "
        "trust the key it offers now (trust on first use)",
        field="host_key",
        value=None,
        allowed="an OpenSSH public key line, or trust on first use",
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
    Jobs that were disabled on the target when it was unpaired stay disabled. The zone
    is detected in the same connection (see the module docstring). A target behind a jump
    host is checked through it; a jump host itself is checked like an ssh target and
    gets no jobs.
    """
    note = AuditNote("target.pair", target_name=name)
    target, checked = _verify_for_pairing(
        app, actor, name, note, host_key=host_key, trust_on_first_use=trust_on_first_use
    )
    with audited(app, actor, note) as session:
        current, zone_note, extended, kept_disabled = _save_pairing(
            session, app, actor, target, checked=checked, note=note
        )
    return PairResult(
        TargetView.of(current),
        fingerprint_or_none(checked.pinned),
        checked.tofu,
        tuple(extended),
        tuple(kept_disabled),
        current.timezone,
        zone_note,
    )


def _verify_for_pairing(
    app: App,
    actor: Actor,
    name: str,
    note: AuditNote,
    *,
    host_key: str | None,
    trust_on_first_use: bool,
) -> tuple[Target, _Checked]:
    """Authorize, load the target and check it over the network, outside any write
    transaction; the key or host CA trusted goes into the audit note. A failure is
    audited and raised (coarsened for an actor who may not see the target)."""
    try:
        actor.authorize_in("target.pair")
        with app.db.read() as session:
            target = get_target(session, name, place(session, actor))
            _ = (target.private_key_enc, target.client_cert_enc)
        note.target_id = target.id
        checked = _check_pairing(app, target, host_key, trust_on_first_use)
        if checked.pinned is not None:
            note.detail.update(
                {"host_key": fingerprint(checked.pinned), "trust_on_first_use": checked.tofu}
            )
        elif target.host_ca:
            note.detail["host_ca"] = ca_fingerprints(target.host_ca)
    except FleetcronError as exc:
        shown = coarse_for(actor, name, exc)
        record_failure(app, actor, note, shown)
        if shown is exc:
            raise
        raise shown from None
    return target, checked


@dataclass(frozen=True)
class _Checked:
    """What pairing found over the network: the key to pin (None for a local target),
    whether it was trusted on first use, and the zone detected (None: not asked)."""

    pinned: str | None
    tofu: bool
    detected: tuple[str | None, str] | None


def _check_pairing(
    app: App, target: Target, host_key: str | None, trust_on_first_use: bool
) -> _Checked:
    """Check the target's connection (through its jump hosts) with the key to pin, and
    read its zone unless an operator set it."""
    detect = target.timezone_source != SOURCE_OPERATOR
    if target.kind is TargetKind.LOCAL:
        check_local_enabled(app)
        return _Checked(None, False, local_zone() if detect else None)
    refuse_private_path(app, target)
    pinned, tofu = _resolve_host_key(app, target, host_key, trust_on_first_use)
    probe = DETECT_COMMAND if detect and target.kind is TargetKind.SSH else None
    try:
        output = verify_connection(app, target, pinned, probe=probe)
    except HostKeyMismatch as exc:
        exc.args = (repin_wording(exc),)
        raise
    return _Checked(pinned or None, tofu, parse_detected_zone(output or "") if probe else None)


def _save_pairing(
    session: Session,
    app: App,
    actor: Actor,
    target: Target,
    *,
    checked: _Checked,
    note: AuditNote,
) -> tuple[Target, str, list[str], list[str]]:
    """Mark the target paired with the checked key and extend its jobs to it; returns it,
    the zone note, the jobs extended and those kept disabled."""
    name = target.name
    current = get_target(session, name, target.project_id)
    if current.kind.over_ssh:
        changed = current.host_key not in (None, checked.pinned) or current.id != target.id
        if changed or current.host_ca != target.host_ca:
            raise Conflict(f"target {name} changed while it was being paired; try again")
        current.host_key = checked.pinned or current.host_key
    now = app.now()
    note.detail["repair"] = current.paired
    zone_note = take_detected_zone(app, current, checked.detected, now)
    note.detail["timezone"] = {"zone": current.timezone, "note": zone_note}
    current.paired = True
    current.paired_at = now
    current.unpaired_at = None
    current.updated_at = now
    extension = extend_jobs_to(session, app, actor, current)
    kept_disabled = _restore_disabled(current)
    note.detail["extended_jobs"] = len(extension.extended)
    if extension.refused:
        note.detail["refused_jobs"] = extension.refused
    if kept_disabled:
        note.detail["kept_disabled"] = kept_disabled
    return current, zone_note, extension.extended, kept_disabled


#: What a user who may not see why pairing failed is told (``target.diagnose``).
COARSE_PAIRING_ERROR = (
    "could not reach or authenticate the target {name}; an admin can see the cause in the "
    "scheduler's log"
)


def coarse_for(actor: Actor, name: str, exc: FleetcronError) -> FleetcronError:
    """``exc`` as ``actor`` may see it: a connection or authentication failure becomes one
    coarse answer (with the cause logged) unless the actor may ``target.diagnose``, so
    pairing answers do not tell an operator which hosts and ports of the scheduler's
    network answer."""
    if not isinstance(exc, ConnectError | AuthError) or allowed(actor.role, "target.diagnose"):
        return exc
    log.warning(
        "pairing target %s failed for %s: %s",
        name,
        actor.name,
        exc.message,
        extra={"action": "target.pair_failed", "actor": actor.name, "target": name},
    )
    return type(exc)(COARSE_PAIRING_ERROR.format(name=name))


def refuse_private_path(app: App, target: Target) -> None:
    """With ``ssh_refuse_private_hosts`` on, check every host on the way to ``target``:
    each jump host of its chain, the one reached directly first, then the target itself.
    A non-public one is refused (:func:`refuse_private_host`), a jump host under the field
    ``via`` naming it, before any connection."""
    if not app.settings.ssh_refuse_private_hosts:
        return
    with app.db.read() as session:
        hops = [(hop.name, hop.host or "") for hop in chain_of(session, target.via_id)]
    for name, host in hops:
        try:
            refuse_private_host(host)
        except InvalidInput as exc:
            raise InvalidInput(
                f"via: jump host {name} on the way to {target.name}: {exc.message} "
                "(every hop of a jump chain is checked)",
                field="via",
                value=name,
                allowed="jump hosts with public addresses",
            ) from None
    refuse_private_host(target.host or "")


def resolve_host(host: str) -> list[IPAddress]:
    """The addresses ``host`` resolves to here (an address is itself); none when it does
    not resolve (the connection then fails with its own coarse error)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]


def refuse_private_host(host: str) -> None:
    """Raise InvalidInput (field ``host``) when ``host`` is, or resolves to, a non-public
    address (:func:`fleetcron.core.addresses.private_reason`): the
    ``ssh_refuse_private_hosts`` setting."""
    for address in resolve_host(host):
        reason = private_reason(address)
        if reason is not None:
            raise InvalidInput(
                f"host: {host} is {reason}, and ssh_refuse_private_hosts is on",
                field="host",
                value=host,
                allowed="a host with a public address",
            )


def take_detected_zone(
    app: App, target: Target, detected: tuple[str | None, str] | None, now: datetime
) -> str:
    """Record a detected zone unless an operator set one; returns what the pairing result
    says about the zone. A failed detection keeps an earlier detected zone."""
    if target.timezone_source == SOURCE_OPERATOR or detected is None:
        return "set by an operator" if target.timezone else "not detected"
    zone, how = detected
    if zone is None:
        kept = f"; keeping {target.timezone}" if target.timezone else ""
        return f"not detected: {how}{kept}"
    changed = zone != target.timezone
    target.timezone, target.timezone_source = zone, SOURCE_DETECTED
    if changed:
        refire_target_local(target, now, app.settings.timezone)
    return f"detected by {how}"


#: Where the detection finds the scheduler host's zone (``timedatectl`` reads the link of
#: ``/etc/localtime`` too): while their state is unchanged, so is what it prints.
LOCAL_ZONE_FILES = (Path("/etc/timezone"), Path("/etc/localtime"))
#: The host's zone as last detected, with the state of :data:`LOCAL_ZONE_FILES` then.
_last_local_zone: tuple[tuple[object, ...], tuple[str, str]] | None = None


def _zone_files_state() -> tuple[object, ...]:
    """What changes when the host's zone does: each zone file's inode, modification time,
    size and link (the link's own, not its target's: ``lstat``), or None when absent."""
    state: list[object] = []
    for path in LOCAL_ZONE_FILES:
        try:
            found = path.lstat()
            link = os.readlink(path) if stat.S_ISLNK(found.st_mode) else None
        except OSError:
            state.append(None)
            continue
        state.append((found.st_ino, found.st_mtime_ns, found.st_size, link))
    return tuple(state)


def local_zone() -> tuple[str | None, str]:
    """The scheduler host's own zone (for a local target), read like a server's; detected
    again only when a zone file changed since the last detection that found a zone (adding
    many local targets runs the detection's shell and commands once, not once each)."""
    global _last_local_zone
    state = _zone_files_state()
    if _last_local_zone is not None and _last_local_zone[0] == state:
        return _last_local_zone[1]
    zone, how = _detect_local_zone()
    if zone is not None:
        _last_local_zone = (state, (zone, how))
    return zone, how


def _detect_local_zone() -> tuple[str | None, str]:
    """Run :data:`DETECT_COMMAND` on this host and read what it printed."""
    try:
        done = subprocess.run(
            ["sh", "-c", DETECT_COMMAND],
            capture_output=True,
            text=True,
            timeout=LOCAL_DETECT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"could not run the detection on this host ({exc})"
    return parse_detected_zone(done.stdout)


def check_local_enabled(app: App) -> None:
    """Local targets are off unless the host's administrator enabled them."""
    if not app.settings.allow_local_targets:
        raise InvalidInput(
            "kind: local targets are disabled on this server; the administrator of the "
            "scheduler host can enable them with the allow_local_targets setting "
            "(FLEETCRON_ALLOW_LOCAL_TARGETS=true)",
            field="kind",
            value=TargetKind.LOCAL.value,
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


def repin_wording(exc: FleetcronError) -> str:
    """A host-key mismatch names re-pinning, the one way to accept a changed key."""
    message = exc.message
    if isinstance(exc, HostKeyMismatch):
        message = message.split(" If the server's key was changed on purpose", 1)[0]
        message += f" If the server was reinstalled on purpose, {REPIN_ADVICE}."
    return message


def _resolve_host_key(
    app: App, target: Target, given: str | None, trust_on_first_use: bool
) -> tuple[str, bool]:
    """The host key to pin: the one given, the one already pinned, or (TOFU) the one offered;
    none (``""``) for a target trusted by its host CA.

    A pinned key is never replaced here (neither by a given key nor by trust on first use):
    that is :func:`repin_target`'s job, which shows both fingerprints first."""
    if target.host_ca:
        if given:
            raise InvalidInput(
                f"host key: target {target.name} is trusted by its host CA, so no key is "
                "pinned; clear its host CA to pin one",
                field="host_key",
                value=given[:80],
                allowed="no host key for a target trusted by a host CA",
            )
        return "", False
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
        raise missing_host_key(target.name)
    assert target.host and target.port
    from fleetcron.executors import ssh_jump  # loaded where a connection is made

    timeout = app.settings.ssh_connect_timeout_s
    hops = hops_via(app, target.via_id)
    offered = run_ssh(ssh_jump.fetch_host_key_via(hops, target.host, target.port, timeout))
    return offered, True


def verify_connection(
    app: App, target: Target, host_key: str, *, probe: str | None = None
) -> str | None:
    """Log in with ``host_key`` pinned (through the target's jump hosts, each with its own
    pinned key) and check the command channel; with ``probe``, run that command too and
    return what it printed (``None`` without)."""
    from fleetcron.executors import ssh_jump  # loaded where a connection is made

    assert target.host and target.port and target.user and target.private_key_enc
    endpoint = SshTarget(
        name=target.name,
        host=target.host,
        port=target.port,
        user=target.user,
        private_key=app.master_key.decrypt(target.private_key_enc).reveal(),
        host_key=host_key,
        via=hops_via(app, target.via_id),
        host_ca=target.host_ca or "",
        client_cert=app.master_key.decrypt(target.client_cert_enc).reveal()
        if target.client_cert_enc
        else "",
    )
    timeout = app.settings.ssh_connect_timeout_s
    if target.kind is TargetKind.JUMP:
        # A jump host need only allow forwarding: logging in is the check.
        run_ssh(ssh_jump.login_via(endpoint, timeout))
        return None
    output: str | None = run_ssh(ssh_jump.verify_via(endpoint, timeout, probe=probe))
    return output


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
    actor.authorize_in("target.repin")
    with app.db.read() as session:
        target = get_target(session, name, place(session, actor))
    _check_repinnable(target)
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
        refuse_private_path(app, target)
        from fleetcron.executors import ssh_jump  # loaded where a connection is made

        new_key = run_ssh(
            ssh_jump.fetch_host_key_via(
                hops_via(app, target.via_id),
                target.host,
                target.port,
                app.settings.ssh_connect_timeout_s,
            )
        )
    if new_key == target.host_key:
        raise Conflict(
            f"host key: target {name} already has host key {fingerprint(new_key)} pinned; "
            "nothing to re-pin",
            field="host_key",
        )
    return RepinPlan(
        name, fingerprint_or_none(target.host_key), new_key, fingerprint(new_key), not host_key
    )


def _check_repinnable(target: Target) -> None:
    """Only a target with a pinned host key (ssh or jump, not trusted by a CA) is re-pinned."""
    name = target.name
    if target.host_ca:
        raise InvalidInput(
            f"name: target {name} is trusted by its host CA; it has no pinned key to re-pin "
            "(a reinstalled server needs a new host certificate)",
            field="name",
            value=name,
            allowed="a target with a pinned host key",
        )
    if not target.kind.over_ssh:
        raise InvalidInput(
            f"name: target {name} is local; only ssh and jump targets have a host key",
            field="name",
            value=name,
            allowed="an ssh target",
        )


def repin_target(app: App, actor: Actor, plan: RepinPlan) -> TargetView:
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
        actor.authorize_in("target.repin")
        with app.db.read() as session:
            target = get_target(session, plan.target_name, place(session, actor))
            _ = (target.private_key_enc, target.client_cert_enc)
        note.target_id = target.id
        verify_connection(app, target, plan.new_key)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    with audited(app, actor, note) as session:
        current = get_target(session, plan.target_name, target.project_id)
        if fingerprint_or_none(current.host_key) != plan.old_fingerprint:
            raise Conflict(
                f"host key: the pinned key of target {plan.target_name} changed to "
                f"{fingerprint_or_none(current.host_key)} meanwhile; start the re-pin again",
                field="host_key",
            )
        current.host_key = plan.new_key
        current.updated_at = app.now()
    return TargetView.of(current)


def ca_fingerprints(host_ca: str) -> list[str]:
    """The fingerprints of a host CA field's CA keys."""
    return [fingerprint(line) for line in split_host_ca(host_ca)[0]]


def fingerprint_or_none(host_key: str | None) -> str | None:
    return fingerprint(host_key) if host_key else None


def run_ssh(coro: Any) -> Any:
    """Run one SSH step to completion from synchronous service code."""
    return asyncio.run(coro)
