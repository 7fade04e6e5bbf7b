"""Targets: add, edit, pause, label, unpair and remove the servers jobs run on; their
time zone. Pairing and host keys are in :mod:`fleetcron.services.targets.pairing`; the reads (lists,
counts, one target) in :mod:`fleetcron.services.targets.reads`.

Decisions worth knowing (docs/web.md and the CLI help say the same):

- **Editing** a paired SSH target's connection (kind, host, port, user, key, host key)
  checks the new connection before anything is saved; when the check fails nothing
  changes. With ``verify=False`` the change is saved and the target is unpaired (as
  :func:`unpair_target` does) until it is paired again. An unpaired target is saved as
  given; pairing checks it.
- **Pausing** a target keeps every assignment and its enabled flag; the scheduler records
  each due slot as ``skipped`` ("target paused"); resuming moves every assignment to its
  next slot after now, so nothing fires in a burst.
- **Unpairing** removes the assignments but remembers which jobs were disabled there;
  pairing again restores those per-job pauses.
- **Local targets** run commands on the scheduler host itself, next to the database and
  the master key: they need the ``allow_local_targets`` setting and the admin role.
- Two SSH targets on the same ``user@host:port`` would run every bulk job twice on one
  server: refused unless ``allow_same_host``.
- **A time zone** given by an operator (``timezone``) is kept over any detection at
  pairing; changing it moves the target's assignments of jobs in the ``target`` zone to
  their next fire in the new zone, in the same transaction. An empty zone clears it.

Messages name the problem and the field; the CLI and the web pages add how to act on it
in their own words (a command, or a button).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.coordination.shard_rows import fixed_shards
from fleetcron.core.labels import parse_labels
from fleetcron.core.shards import shard_of
from fleetcron.core.target_zones import (
    DETECT_COMMAND,
    SOURCE_OPERATOR,
    parse_detected_zone,
)
from fleetcron.core.targets import CheckedTarget, TargetKind, TargetSpec
from fleetcron.errors import (
    Conflict,
    FleetcronError,
    InvalidInput,
)
from fleetcron.services.audit import AuditNote, audited, command_excerpt, record, record_failure
from fleetcron.services.fleet.assignments import (
    extend_jobs_to,
    get_target,
    next_fire,
    refire_target_local,
)
from fleetcron.services.projects.scope import place
from fleetcron.services.targets.fields import (
    CONNECTION_FIELDS,
    TargetChanges,
    check_local_allowed,
    check_same_host,
    current_value,
    edited,
    fill_ssh_fields,
    probe_target,
)
from fleetcron.services.targets.jumps import hops_via, refuse_if_used, resolve_via
from fleetcron.services.targets.pairing import (
    REPIN_ADVICE,
    PairResult,
    RepinPlan,
    fingerprint_or_none,
    missing_host_key,
    pair_target,
    plan_repin,
    repin_target,
    repin_wording,
    run_ssh,
    take_detected_zone,
    verify_connection,
)
from fleetcron.services.targets.trust_rules import apply_label_trust
from fleetcron.services.targets.views import TargetView
from fleetcron.store.schema import Job, Target

#: Re-exported: the adapters reach pairing through this module too.
__all__ = [
    "REPIN_ADVICE",
    "PairResult",
    "RepinPlan",
    "TargetChanges",
    "check_local_allowed",
    "get_target",
    "pair_target",
    "plan_repin",
    "repin_target",
]

PAUSE_REASON_MAX = 500


@dataclass(frozen=True)
class EditResult:
    target: TargetView
    changed: tuple[str, ...]
    #: The new connection was checked over SSH (host key, login, command channel).
    verified: bool
    #: The target was paired and is not any more (saved without the check).
    unpaired: bool
    host_key_fingerprint: str | None = None
    extended_jobs: tuple[str, ...] = ()
    #: After a checked change of the connection: what the new server said about its zone
    #: (as at pairing; empty when the connection was not checked).
    timezone_note: str = ""


@dataclass(frozen=True)
class PauseResult:
    target: TargetView
    #: False when the call found the target already in the asked state (nothing changed
    #: but, for a pause, its reason).
    changed: bool


@dataclass(frozen=True)
class RemoveResult:
    removed_jobs: tuple[str, ...] = field(default_factory=tuple)


def add_target(
    app: App,
    actor: Actor,
    spec: TargetSpec,
    *,
    verify: bool = True,
    trust_on_first_use: bool = False,
    allow_same_host: bool = False,
) -> PairResult:
    """Add a target; pair it right away unless ``verify`` is false (it then stays unpaired).

    Everything that can be checked without the network is checked before the target is
    written, including that pairing will know which host key to pin."""
    name = spec.name
    note = AuditNote("target.add", target_name=name, detail={"kind": spec.kind.value})
    with audited(app, actor, note) as session:
        actor.authorize_in("target.add")
        pid = place(session, actor)
        fields = spec.checked()
        target = _new_row(app, fields)
        target.project_id = pid
        if fields.kind is TargetKind.LOCAL:
            check_local_allowed(app, actor)
            target.kind = TargetKind.LOCAL
        else:
            fill_ssh_fields(app, target, fields)
            target.via = resolve_via(session, name, fields.via, pid)
            apply_label_trust(session, [target])
            if verify and not (target.host_key or target.host_ca) and not trust_on_first_use:
                raise missing_host_key(name)
            check_same_host(session, target, allow_same_host)
        if session.scalar(select(Target.id).where(Target.name == name, Target.project_id == pid)):
            raise Conflict(f"target {name} already exists", field="name")
        session.add(target)
        session.flush()
        target.shard = shard_of(target.id, fixed_shards(app, session))
        note.target_id = target.id
        note.detail.update({"host": target.host, "labels": fields.labels})
        if fields.via:
            note.detail["via"] = fields.via
        if fields.timezone:
            note.detail["timezone"] = fields.timezone
    if not verify:
        return _unpaired_result(target)
    try:
        return pair_target(app, actor, name, trust_on_first_use=trust_on_first_use)
    except FleetcronError as exc:
        exc.args = (f"target {name} was added but not paired: {exc.message}",)
        raise


def _new_row(app: App, fields: CheckedTarget) -> Target:
    """A new target's row with what every kind has (the connection is filled in after)."""
    now = app.now()
    return Target(
        name=fields.name,
        labels=fields.labels,
        notes=fields.notes,
        timezone=fields.timezone,
        timezone_source=SOURCE_OPERATOR if fields.timezone else None,
        paired=False,
        paused=False,
        created_at=now,
        updated_at=now,
    )


def _unpaired_result(target: Target) -> PairResult:
    zone = target.timezone
    return PairResult(
        TargetView.of(target),
        fingerprint_or_none(target.host_key),
        False,
        (),
        timezone=zone,
        timezone_note="set by an operator" if zone else "not detected (not paired)",
    )


@dataclass
class _EditPlan:
    """An edit worked out before anything is saved: the target as read, its values after
    the change, which of them changed, and what the connection check detected."""

    current: Target
    updated: dict[str, Any]
    changed: tuple[str, ...]
    #: The connection changed on a paired target reached over SSH: checked, or unpaired.
    check: bool
    detected: tuple[str | None, str] | None = None

    @property
    def moved(self) -> bool:
        return bool({"kind", "host", "port", "user", "via_id"} & set(self.changed))


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
        actor.authorize_in("target.edit")
        plan = _plan_edit(app, actor, name, changes, note)
        if plan.moved and not allow_same_host:
            with app.db.read() as session:
                check_same_host(session, probe_target(plan.current, plan.updated), allow_same_host)
        if plan.check and verify:
            plan.detected = _check_edited(app, plan)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    unpair = plan.check and not verify
    with audited(app, actor, note) as session:
        target, zone_note, extended = _save_edit(
            session, app, actor, plan, note, unpair=unpair, allow_same_host=allow_same_host
        )
        if "host_ca" in plan.changed:
            target.host_ca_rule_id = None  # set on the target: its own, which wins
        apply_label_trust(session, [target])
        note.detail["verified"] = plan.check and verify
    return EditResult(
        TargetView.of(target),
        plan.changed,
        verified=plan.check and verify,
        unpaired=unpair,
        host_key_fingerprint=fingerprint_or_none(target.host_key),
        extended_jobs=tuple(extended),
        timezone_note=zone_note,
    )


def _plan_edit(
    app: App, actor: Actor, name: str, changes: TargetChanges, note: AuditNote
) -> _EditPlan:
    """Read the target, work out its values after ``changes`` (a key trusted on first use
    fetched now) and which changed; raises when nothing would."""
    with app.db.read() as session:
        current = get_target(session, name, place(session, actor))
        _ = (current.private_key_enc, current.client_cert_enc)
        via = _edited_via(session, current, changes)
    note.target_id = current.id
    updated = edited(app, actor, current, changes, via=via)
    tofu = False
    tofu_wanted = changes.trust_on_first_use and not changes.host_key and not updated["host_ca"]
    if tofu_wanted and updated["kind"].over_ssh:
        from fleetcron.executors import ssh_jump  # loaded where a connection is made

        updated["host_key"] = run_ssh(
            ssh_jump.fetch_host_key_via(
                hops_via(app, updated["via_id"]),
                updated["host"],
                updated["port"],
                app.settings.ssh_connect_timeout_s,
            )
        )
        tofu = True
    changed = tuple(k for k, val in updated.items() if val != current_value(current, k))
    given_zone = changes.timezone is not None and updated["timezone"]
    if given_zone and current.timezone_source != SOURCE_OPERATOR and "timezone" not in changed:
        # Confirming a detected zone makes it the operator's (kept over detection).
        changed += ("timezone",)
    if not changed:
        raise InvalidInput(
            f"name: nothing to change on target {name}: every given value is its current one",
            field="name",
            value=name,
            allowed="at least one new value (host, port, user, key, host key, jump host, "
            "labels, notes, time zone)",
        )
    _note_changes(note, current, updated, changed, tofu=tofu)
    check = (
        any(k in CONNECTION_FIELDS for k in changed) and current.paired and updated["kind"].over_ssh
    )
    return _EditPlan(current, updated, changed, check)


def _edited_via(session: Session, current: Target, changes: TargetChanges) -> Target | None:
    """The jump host after ``changes``, checked; a jump host changed into another kind
    while in use is refused."""
    if changes.kind is not None and changes.kind is not current.kind:
        refuse_if_used(session, current, "change the kind of")
    if changes.via is None:
        return current.via
    return resolve_via(session, current.name, changes.via.strip() or None, current.project_id)


def _note_changes(
    note: AuditNote,
    current: Target,
    updated: Mapping[str, Any],
    changed: tuple[str, ...],
    *,
    tofu: bool,
) -> None:
    note.detail["changed"] = list(changed)
    if "host_key" in changed:
        note.detail["host_key"] = {
            "old": fingerprint_or_none(current.host_key),
            "new": fingerprint_or_none(updated["host_key"]),
            "trust_on_first_use": tofu,
        }


def _check_edited(app: App, plan: _EditPlan) -> tuple[str | None, str] | None:
    """Check the new connection over SSH (through its jump hosts); returns the zone read
    there when it should be detected again (a moved target may be another server)."""
    current, updated = plan.current, plan.updated
    if not (updated["host_key"] or updated["host_ca"]):
        raise missing_host_key(current.name)
    detect = current.timezone_source != SOURCE_OPERATOR and "timezone" not in plan.changed
    try:
        output = verify_connection(
            app,
            probe_target(current, updated),
            updated["host_key"] or "",
            probe=DETECT_COMMAND if detect else None,
        )
    except FleetcronError as exc:
        exc.args = (f"target {current.name} was not changed: {repin_wording(exc)}",)
        raise
    return parse_detected_zone(output or "") if detect else None


def _save_edit(
    session: Session,
    app: App,
    actor: Actor,
    plan: _EditPlan,
    note: AuditNote,
    *,
    unpair: bool,
    allow_same_host: bool,
) -> tuple[Target, str, list[str]]:
    """Write the planned edit (refused when the target changed meanwhile); returns the
    target, what the zone note says and the jobs extended to it."""
    current, updated = plan.current, plan.updated
    target = get_target(session, current.name, current.project_id)
    if target.updated_at != current.updated_at:
        raise Conflict(f"target {current.name} changed while it was being edited; try again")
    stored = {"private_key": "private_key_enc", "client_cert": "client_cert_enc"}
    for key in plan.changed:
        setattr(target, stored.get(key, key), updated[key])
    if "via_id" in plan.changed:
        target.via = session.get(Target, updated["via_id"]) if updated["via_id"] else None
        note.detail["via"] = target.via.name if target.via else None
    if plan.moved:
        check_same_host(session, target, allow_same_host)
    now = app.now()
    target.updated_at = now
    if "timezone" in plan.changed:
        note.detail["timezone"] = {"old": current.timezone, "new": target.timezone}
        target.timezone_source = SOURCE_OPERATOR if target.timezone else None
        moved_fires = refire_target_local(target, now, app.settings.timezone)
        note.detail["timezone"]["assignments_moved"] = moved_fires
    zone_note = ""
    if plan.detected is not None:
        zone_note = take_detected_zone(app, target, plan.detected, now)
        note.detail["timezone"] = {"zone": target.timezone, "note": zone_note}
    return (
        target,
        zone_note,
        _save_jobs(session, app, actor, plan, target=target, note=note, unpair=unpair),
    )


def _save_jobs(
    session: Session,
    app: App,
    actor: Actor,
    plan: _EditPlan,
    *,
    target: Target,
    note: AuditNote,
    unpair: bool,
) -> list[str]:
    """The edited target's assignments: none for a jump host or an unpaired target, else
    the bulk jobs that now select it; returns the jobs extended to it."""
    now = target.updated_at
    if target.kind is TargetKind.JUMP and target.assignments:
        # A jump host runs no jobs: a target made one keeps none.
        note.detail["assignments_removed"] = len(target.assignments)
        target.assignments.clear()
    extended: list[str] = []
    if unpair:
        removed = _unpair(target, now)
        note.detail.update({"unpaired": True, "assignments_removed": removed})
    elif target.paired:
        extension = extend_jobs_to(session, app, actor, target, recheck="kind" in plan.changed)
        extended = extension.extended
        note.detail["extended_jobs"] = len(extended)
        if extension.refused:
            note.detail["refused_jobs"] = extension.refused
    return extended


def pause_target(app: App, actor: Actor, name: str, reason: str | None = None) -> PauseResult:
    """Maintenance pause: the target keeps its assignments and their flags, and the
    scheduler records each due slot as skipped ("target paused: REASON")."""
    note = AuditNote("target.pause", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize_in("target.pause")
        target = get_target(session, name, place(session, actor))
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
    return PauseResult(TargetView.of(target), not was_paused)


def _pause_reason(reason: str | None) -> str | None:
    if reason is None or not reason.strip():
        return None
    cleaned = reason.strip()
    allowed = f"one line of text without control characters, at most {PAUSE_REASON_MAX} characters"
    control = next((ch for ch in cleaned if ord(ch) < 32 or ord(ch) == 127), None)
    if control is not None:
        where = cleaned.index(control) + 1
        what = (
            f"must be one line (a line break at position {where})"
            if control in "\r\n"
            else f"contains the control character {control!r} at position {where}"
        )
        raise InvalidInput(
            f"reason: {what}; allowed: {allowed}",
            field="reason",
            value=repr(cleaned[:40]),
            allowed=allowed,
        )
    if len(cleaned) > PAUSE_REASON_MAX:
        raise InvalidInput(
            f"reason: must be at most {PAUSE_REASON_MAX} characters (got {len(cleaned)}); "
            f"allowed: {allowed}",
            field="reason",
            value=cleaned[:40],
            allowed=allowed,
        )
    return cleaned


def resume_target(app: App, actor: Actor, name: str) -> PauseResult:
    """End a pause. Every assignment continues from its next slot after now: slots that
    fell inside the pause stay skipped and nothing catches up in a burst."""
    note = AuditNote("target.resume", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize_in("target.pause")
        target = get_target(session, name, place(session, actor))
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
                assignment.next_fire_at = next_fire(
                    assignment.job, now, target=target, default_zone=app.settings.timezone
                )
                assignment.updated_at = now
            target.paused = False
            target.paused_reason = target.paused_at = target.paused_by = None
            target.updated_at = now
        note.detail["was_paused"] = was_paused
    return PauseResult(TargetView.of(target), was_paused)


def unpair_target(app: App, actor: Actor, name: str) -> int:
    """Remove the target's assignments so nothing more fires there; history stays, and
    which jobs were disabled here is remembered for the next pairing."""
    note = AuditNote("target.unpair", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize_in("target.unpair")
        target = get_target(session, name, place(session, actor))
        note.target_id = target.id
        refuse_if_used(session, target, "unpair")
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


def label_target(app: App, actor: Actor, name: str, labels: Sequence[str]) -> TargetView:
    """Set labels (``k=v``; ``k=`` removes ``k``); a paired target gains matching bulk jobs."""
    note = AuditNote("target.label", target_name=name)
    with audited(app, actor, note) as session:
        actor.authorize_in("target.label")
        target = get_target(session, name, place(session, actor))
        note.target_id = target.id
        merged = _merge_labels(target.labels, labels)
        target.labels = merged
        target.updated_at = app.now()
        if apply_label_trust(session, [target]):
            note.detail["host_ca_by_label"] = target.host_ca_rule_id is not None
        extension = extend_jobs_to(session, app, actor, target) if target.paired else None
        extended = extension.extended if extension else []
        note.detail.update({"labels": merged, "extended_jobs": len(extended)})
        if extension and extension.refused:
            note.detail["refused_jobs"] = extension.refused
    return TargetView.of(target)


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
        actor.authorize_in("target.remove")
        target = get_target(session, name, place(session, actor))
        note.target_id = target.id
        refuse_if_used(session, target, "remove")
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
            actor.authorize_in("job.remove")
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
