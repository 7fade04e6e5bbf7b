"""Reading a target's time zone again (``target detect-zone``), and applying what was read.

The zone is read as at pairing, with the one detection command of
:mod:`fleetcron.core.target_zones` (``timedatectl``, else ``/etc/timezone``, else the
``/etc/localtime`` link): over SSH with the target's pinned host key, or on the scheduler
host for a local target. Reading writes nothing; applying is its own audited change per
target (``target.zone_detect``), which moves the target's assignments of jobs in the
``target`` zone to their next fire in the new zone.

A zone an operator set is kept when every target is read (``--all``): replacing it takes
naming the target, so a sweep over the fleet never undoes a deliberate choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core.target_zones import (
    DETECT_COMMAND,
    SOURCE_DETECTED,
    SOURCE_OPERATOR,
    parse_detected_zone,
)
from fleetcron.core.targets import TargetKind
from fleetcron.errors import Conflict, FleetcronError, InvalidInput
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.fleet.assignments import get_target, refire_target_local
from fleetcron.services.projects.scope import place
from fleetcron.services.targets.pairing import local_zone, verify_connection
from fleetcron.store.schema import Target

#: Targets read at once when every target is read (each is one SSH login).
PARALLEL_READS = 8

#: What a read found, as :attr:`ZoneCheck.result` says it.
UNCHANGED = "unchanged"
WOULD_CHANGE = "would change"
CHANGED = "changed"
NOT_DETECTED = "not detected"
KEPT = "kept"


@dataclass(frozen=True)
class ZoneCheck:
    """One target's zone as stored and as the target reports it now."""

    target: str
    #: The stored zone and who set it (``detected``, ``operator``; ``None``: no zone, the
    #: default zone of new jobs applies).
    zone: str | None
    source: str | None
    #: The zone the target reports (``None``: none found, ``how`` says why).
    detected: str | None
    #: Which source answered (``timedatectl``, ``/etc/timezone``, ``/etc/localtime``), or
    #: why nothing did.
    how: str
    #: ``unchanged``, ``would change`` (read only), ``changed`` (applied), ``not
    #: detected``, or ``kept`` (an operator's zone, kept: see :attr:`note`).
    result: str
    note: str = ""

    @property
    def differs(self) -> bool:
        return self.detected is not None and self.detected != self.zone


def detect_zones(
    app: App,
    actor: Actor,
    names: Sequence[str] = (),
    *,
    every: bool = False,
    apply: bool = False,
) -> list[ZoneCheck]:
    """Read the zone of the targets ``names`` (or of every paired target, ``every``) and,
    with ``apply``, record each one that differs (audited per target).

    Raises ``InvalidInput`` when neither or both of ``names`` and ``every`` are given,
    ``NotFound`` for an unknown name, ``Conflict`` for a named target that is not paired.
    Unreachable targets are no error: their row says why nothing was detected."""
    actor.authorize("target.edit")
    targets = _targets_to_read(app, actor, names, every=every)
    with ThreadPoolExecutor(max_workers=min(PARALLEL_READS, max(len(targets), 1))) as pool:
        read = list(pool.map(lambda t: _read_zone(app, t), targets))
    checks = []
    for target, (detected, how) in zip(targets, read, strict=True):
        check = _compare(target, detected, how, named=not every)
        if apply and check.result == WOULD_CHANGE:
            check = _apply(app, actor, target, check)
        checks.append(check)
    return checks


def _targets_to_read(app: App, actor: Actor, names: Sequence[str], *, every: bool) -> list[Target]:
    """The targets named (each once, each paired) or every paired target by name, their
    keys loaded for the reads made after the session closes."""
    if bool(names) == every:
        raise InvalidInput(
            "name one or more targets, or ask for every target (--all), not both",
            field="target",
            value=",".join(names) or None,
            allowed="target names, or all",
        )
    with app.db.read() as session:
        pid = place(session, actor)
        if every:
            targets = list(
                session.scalars(
                    select(Target)
                    .where(Target.paired.is_(True), Target.project_id == pid)
                    .order_by(Target.name)
                ).all()
            )
        else:
            targets = [get_target(session, name, pid) for name in dict.fromkeys(names)]
            _check_paired(targets)
        for target in targets:
            _ = (target.private_key_enc, target.client_cert_enc)  # loaded before the session closes
    return targets


def _check_paired(targets: Iterable[Target]) -> None:
    """A conflict for the first of ``targets`` that is not paired (pairing reads its zone)."""
    for target in targets:
        if not target.paired:
            raise Conflict(
                f"target {target.name} is not paired; pair it first "
                f"(`fleetcron target pair {target.name}`), which reads its zone",
                field="target",
            )


def _read_zone(app: App, target: Target) -> tuple[str | None, str]:
    if target.kind is TargetKind.LOCAL:
        return local_zone()
    if not target.host_key:
        return None, "no pinned host key (pair the target again)"
    try:
        output = verify_connection(app, target, target.host_key, probe=DETECT_COMMAND)
    except FleetcronError as exc:
        return None, f"could not reach the target: {exc.message}"
    return parse_detected_zone(output or "")


def _compare(target: Target, detected: str | None, how: str, *, named: bool) -> ZoneCheck:
    def check(result: str, note: str = "") -> ZoneCheck:
        return ZoneCheck(
            target=target.name,
            zone=target.timezone,
            source=target.timezone_source,
            detected=detected,
            how=how,
            result=result,
            note=note,
        )

    if detected is None:
        return check(NOT_DETECTED)
    if detected == target.timezone:
        return check(UNCHANGED)
    if target.timezone_source == SOURCE_OPERATOR and not named:
        return check(
            KEPT, f"set by an operator; name the target to replace it (detect-zone {target.name})"
        )
    return check(WOULD_CHANGE)


def _apply(app: App, actor: Actor, read: Target, check: ZoneCheck) -> ZoneCheck:
    note = AuditNote("target.zone_detect", target_id=read.id, target_name=read.name)
    note.detail.update(
        {"old": check.zone, "old_source": check.source, "new": check.detected, "how": check.how}
    )
    with audited(app, actor, note) as session:
        target = get_target(session, read.name, read.project_id)
        if (target.id, target.timezone, target.timezone_source) != (
            read.id,
            read.timezone,
            read.timezone_source,
        ):
            raise Conflict(f"target {read.name}'s zone changed while it was read; try again")
        target.timezone, target.timezone_source = check.detected, SOURCE_DETECTED
        now = app.now()
        target.updated_at = now
        note.detail["assignments_moved"] = refire_target_local(target, now, app.settings.timezone)
    return ZoneCheck(
        target=check.target,
        zone=check.detected,
        source=SOURCE_DETECTED,
        detected=check.detected,
        how=check.how,
        result=CHANGED,
        note=f"was {check.zone or 'not set'} ({check.source or 'default'})",
    )
