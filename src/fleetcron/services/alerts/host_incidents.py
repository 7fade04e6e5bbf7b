"""Host incidents: one per target a fresh connection cannot reach, from the host probe.

The probe (:mod:`fleetcron.services.targets.reach`) records on each SSH target what a new
connection found. Each evaluation round, :func:`sync_host_incidents` opens one incident of
cause ``unreachable`` for every target whose newest probe failed (at most one open per
target: a partial unique index) and resolves it once a probe succeeds again (or the target
was removed). A paused target (maintenance) is probed and shown but opens no incident. A
host incident has no job (``job_id`` 0) and one member row, the target (``assignment_id``
0). While it is open, the target's job incidents are muted as if a silence covered the
target (:func:`host_mutes`): their runs are recorded, the incidents kept, but a job incident
all of whose targets are on unreachable hosts sends nothing.

Through a jump host: a target whose jump host (or one further up its chain) is down opens no
incident of its own, since the probe through a dead bastion fails on the bastion and records
it there (:mod:`fleetcron.services.targets.reach`): one incident, the bastion's ("b1:
connection refused"), not one per target behind it. The targets behind it keep their own
state and the error naming the hop, and their job incidents are muted with the bastion's
(:func:`host_mutes` with the chains, :func:`behind_down`). One opened before its bastion went
down stays open until the target is reachable again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core import incidents as core
from fleetcron.core.reach import DOWN, Reach, is_down, words
from fleetcron.core.targets import TargetKind
from fleetcron.store.planner import written_in
from fleetcron.store.run_dispatch import MAX_JUMPS
from fleetcron.store.schema import DEFAULT_PROJECT_ID, Incident, IncidentTarget, Target

log = logging.getLogger(__name__)

#: The member row of a host incident: the target itself, not one of its assignments.
HOST_MEMBER = 0


@dataclass(frozen=True)
class _Down:
    target_id: int
    name: str
    reach: Reach
    since: datetime
    error: str | None
    paused: bool
    via_id: int | None = None
    project_id: int = DEFAULT_PROJECT_ID

    @property
    def reason(self) -> str:
        said = f"{self.name}: {words(self.reach)}"
        return f"{said} ({self.error})" if self.error else said


def _down_targets(session: Session, now: datetime) -> dict[int, _Down]:
    rows = session.execute(
        # Written into the statement: the partial index of down targets finds them.
        select(
            Target.id,
            Target.name,
            Target.reach,
            Target.reach_since,
            Target.reach_error,
            Target.paused,
            Target.via_id,
            Target.project_id,
        ).where(written_in(Target.reach, list(DOWN)))
    )
    return {
        tid: _Down(tid, name, Reach(reach), since or now, error, paused, via, project)
        for tid, name, reach, since, error, paused, via, project in rows
        if reach is not None and is_down(Reach(reach))
    }


def _jump_chains(session: Session) -> dict[int, int | None]:
    """Each jump host's own jump host (None: reached directly)."""
    rows = session.execute(
        select(Target.id, Target.via_id).where(Target.kind == TargetKind.JUMP)
    ).all()
    return {tid: via for tid, via in rows}


def _behind(via: int | None, down: set[int], jumps: dict[int, int | None]) -> int | None:
    """The first down jump host on the chain that starts at ``via`` (None: none is down)."""
    for _ in range(MAX_JUMPS):
        if via is None:
            return None
        if via in down:
            return via
        via = jumps.get(via)
    return None


def behind_down(session: Session, down: set[int]) -> dict[int, int]:
    """The targets reached through a jump host among ``down`` (directly or further up
    their chains), each with the first such jump host."""
    if not down:
        return {}
    jumps = _jump_chains(session)
    out: dict[int, int] = {}
    for tid, via in session.execute(
        select(Target.id, Target.via_id).where(Target.via_id.is_not(None))
    ):
        hop = _behind(via, down, jumps)
        if hop is not None:
            out[tid] = hop
    return out


def sync_host_incidents(session: Session, now: datetime) -> None:
    """Open a host incident for each target found down without one, resolve those whose
    target is reachable again (at the time its probe found it so) or gone."""
    down = _down_targets(session, now)
    jumps = _jump_chains(session) if any(d.via_id is not None for d in down.values()) else {}
    open_ones = {
        i.target_id: i
        for i in session.scalars(
            select(Incident).where(Incident.status == "open", Incident.target_id.is_not(None))
        )
        if i.target_id is not None
    }
    for target_id, found in sorted(down.items()):
        # A paused target (maintenance) opens none; one open before the pause stays open.
        # Nor does one behind a down jump host (the jump host's incident is the one).
        folded = _behind(found.via_id, set(down), jumps) is not None
        if target_id not in open_ones and not found.paused and not folded:
            _open(session, found)
    _resolve_returned(session, open_ones, set(down), now)
    session.flush()


def _resolve_returned(
    session: Session, open_ones: dict[int, Incident], down: set[int], now: datetime
) -> None:
    """Resolve the open host incidents whose target is down no more: at the time its probe
    found it reachable again, else (gone, or in another state) now. Nothing is read when
    none is open."""
    if not open_ones:
        return
    back = {
        tid: since
        for tid, since in session.execute(
            select(Target.id, Target.reach_since).where(
                Target.id.in_(sorted(open_ones)), Target.reach == Reach.REACHABLE.value
            )
        )
    }
    for target_id, incident in sorted(open_ones.items()):
        if target_id in down:
            continue
        _resolve(session, incident, back.get(target_id) or now)


def _open(session: Session, found: _Down) -> None:
    incident = Incident(
        project_id=found.project_id,
        job_id=0,
        job_name="",
        cause=core.HOST_CAUSE,
        status="open",
        opened_at=found.since,
        previous_state="ok",
        reason=found.reason,
        target_id=found.target_id,
        target_name=found.name,
    )
    session.add(incident)
    session.flush()
    session.add(
        IncidentTarget(
            incident_id=incident.id,
            assignment_id=HOST_MEMBER,
            target_id=found.target_id,
            target_name=found.name,
            joined_at=found.since,
            last_seen_at=found.since,
        )
    )
    log.info(
        "incident: #%d host %s unreachable opened: %s",
        incident.id,
        found.name,
        found.reach.value,
        extra={
            "action": "incident.host_opened",
            "incident_id": incident.id,
            "target": found.name,
            "reach": found.reach.value,
        },
    )


def _resolve(session: Session, incident: Incident, at: datetime) -> None:
    incident.status = "resolved"
    incident.resolved_at = max(at, incident.opened_at)
    for row in session.scalars(
        select(IncidentTarget).where(
            IncidentTarget.incident_id == incident.id, IncidentTarget.recovered_at.is_(None)
        )
    ):
        row.recovered_at = incident.resolved_at
    log.info(
        "incident: #%d host %s resolved",
        incident.id,
        incident.target_name,
        extra={
            "action": "incident.host_resolved",
            "incident_id": incident.id,
            "target": incident.target_name,
        },
    )


#: How long past ``now`` the mute of an unreachable host reaches: past the round, since it
#: is read again every round.
_MUTE_AHEAD = timedelta(days=1)


def host_mutes(
    incidents: list[Incident], now: datetime, behind: dict[int, int] | None = None
) -> list[core.SilenceFacts]:
    """A mute per target with an open host incident among ``incidents``, and per target
    ``behind`` one of those (a jump host: target id → the jump host's id): the job
    incidents over them are silenced as long as the host is unreachable."""
    opened = {
        i.target_id: i.opened_at
        for i in incidents
        if i.status == "open" and i.target_id is not None
    }
    hosts = [*opened.items()]
    hosts += [(tid, opened[hop]) for tid, hop in (behind or {}).items() if hop in opened]
    return [
        core.SilenceFacts(starts_at=at, ends_at=now + _MUTE_AHEAD, target_id=tid)
        for tid, at in hosts
    ]


def flap_key(incident: Incident) -> tuple[int, str]:
    """What flapping is counted over: a job and cause, or a host (a negative id, so it never
    meets a job's)."""
    if incident.target_id is not None:
        return (-incident.target_id, incident.cause)
    return (incident.job_id, incident.cause)


__all__ = ["HOST_MEMBER", "behind_down", "flap_key", "host_mutes", "sync_host_incidents"]
