"""Silences: muting incident messages during planned work, without deleting a rule.

A silence mutes everything, or one job, one target and/or the targets a label selector
matches, for a duration or until a time, with its author and reason. Runs are still
recorded and health still shows the failures; an incident whose targets are all covered
sends nothing while the silence lasts (``core/incidents.is_silenced``). An expired silence
lifts by itself (evaluation only reads silences in force); ``expire`` ends one early.
Adding and expiring need the operator role and are audited; listing needs a viewer. A
silence belongs to the project it was made in: it mutes that project's incidents only
(``core/incidents.of_project``), and is listed and expired there only (a role in the
project is enough).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.incidents import silence_window
from fleetcron.core.validation import validate_int
from fleetcron.errors import InvalidInput, NotFound, found
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.fleet.assignments import get_target
from fleetcron.services.jobs.edit import get_job
from fleetcron.services.projects.scope import place
from fleetcron.services.targets.reads import matching_selector
from fleetcron.store.schema import Silence

REASON_MAX: Final = 500
LIST_MAX: Final = 500


@dataclass(frozen=True)
class SilenceSpec:
    """What to mute (nothing named: everything; ``everything`` must then be True, so that
    muting it all is never an accident), for ``duration_s`` seconds or ``until`` a time."""

    reason: str
    job: str | None = None
    target: str | None = None
    selector: str | None = None
    everything: bool = False
    duration_s: float | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class SilenceView:
    id: int
    scope: str
    job: str | None
    target: str | None
    selector: str | None
    starts_at: datetime
    ends_at: datetime
    created_by: str
    reason: str
    expired_by: str | None
    active: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_silence(app: App, actor: Actor, spec: SilenceSpec) -> SilenceView:
    """Create a silence starting now. Raises InvalidInput naming the field (an unknown job
    or target is NotFound naming it; a selector matching no target, a duration out of 1
    minute .. 90 days, a silence already covering the same scope longer, a missing
    reason), changing nothing."""
    note = AuditNote(
        "silence.add",
        job_name=spec.job,
        target_name=spec.target,
        detail={"selector": spec.selector, "reason": spec.reason},
    )
    with audited(app, actor, note) as session:
        actor.authorize_in("silence.add")
        now = app.now()
        reason = _checked_reason(spec)
        duration = None if spec.duration_s is None else timedelta(seconds=spec.duration_s)
        starts, ends = silence_window(now, duration=duration, until=spec.until)
        job_id = target_id = None
        pid = place(session, actor)
        if spec.job is not None:
            job_id = note.job_id = found(lambda: get_job(session, spec.job or "", pid), "job").id
        if spec.target is not None:
            target_id = note.target_id = found(
                lambda: get_target(session, spec.target or "", pid, shared=True), "target"
            ).id
        selector = matching_selector(session, spec.selector) if spec.selector else None
        scope = _Scope(pid, job_id, target_id, selector)
        _no_overlap(session, now, ends, scope)
        silence = Silence(
            project_id=pid,
            job_id=job_id,
            job_name=spec.job,
            target_id=target_id,
            target_name=spec.target,
            selector=selector,
            starts_at=starts,
            ends_at=ends,
            created_by=actor.name,
            reason=reason,
            created_at=now,
        )
        session.add(silence)
        session.flush()
        note.detail.update({"silence": silence.id, "ends_at": ends.isoformat()})
        return _view(silence, now)


def _checked_reason(spec: SilenceSpec) -> str:
    """The reason, stripped; InvalidInput for an empty or long one, or for a silence that
    names nothing without ``everything`` (or names something with it)."""
    reason = spec.reason.strip()
    if not reason or len(reason) > REASON_MAX:
        raise InvalidInput(
            f"reason: say why, in 1 to {REASON_MAX} characters",
            field="reason",
            value=len(reason),
            allowed=f"1..{REASON_MAX} characters",
        )
    named = spec.job is not None or spec.target is not None or bool(spec.selector)
    if named == spec.everything:
        raise InvalidInput(
            "job: name a job, a target or a selector, or mute everything with --all (not both)",
            field="job",
            allowed="--job, --target, --selector or --all",
        )
    return reason


def list_silences(
    app: App, actor: Actor, *, include_expired: bool = False, limit: int = 100
) -> list[SilenceView]:
    """Silences in force (and with ``include_expired`` the ended ones) of the actor's
    project, newest first."""
    actor.authorize_in("silence.read")
    validate_int(limit, field="limit", low=1, high=LIST_MAX)
    now = app.now()
    with app.db.read() as session:
        query = (
            select(Silence)
            .where(Silence.project_id == place(session, actor))
            .order_by(Silence.id.desc())
            .limit(limit)
        )
        if not include_expired:
            query = query.where(Silence.ends_at > now)
        return [_view(s, now) for s in session.scalars(query)]


def expire_silence(app: App, actor: Actor, silence_id: int) -> SilenceView:
    """End a silence now. Raises NotFound, or InvalidInput (field ``silence``) for one that
    already ended, changing nothing; another project's silence is not found."""
    note = AuditNote("silence.expire", detail={"silence": silence_id})
    with audited(app, actor, note) as session:
        actor.authorize_in("silence.expire")
        now = app.now()
        silence = session.get(Silence, silence_id)
        if silence is None or silence.project_id != place(session, actor):
            raise NotFound("silence", silence_id, field="silence")
        if silence.ends_at <= now:
            raise InvalidInput(
                f"silence: #{silence_id} already ended at {silence.ends_at.isoformat()}",
                field="silence",
                value=silence_id,
                allowed="a silence in force (fleetcron silence list)",
            )
        silence.ends_at = max(now, silence.starts_at)
        silence.expired_by = actor.name
        note.job_name, note.target_name = silence.job_name, silence.target_name
        session.flush()
        return _view(silence, now)


@dataclass(frozen=True)
class _Scope:
    """What a silence mutes: in a project, a job, a target, a selector (None: any)."""

    project_id: int
    job_id: int | None
    target_id: int | None
    selector: str | None


def _no_overlap(session: Session, now: datetime, ends: datetime, scope: _Scope) -> None:
    # The same scope muted again before the first one ends is a mistake (or an extension:
    # expire the first one, then add a longer one), and two of them would be ambiguous.
    same = session.scalar(
        select(Silence)
        .where(
            Silence.ends_at > now,
            Silence.project_id == scope.project_id,
            Silence.job_id.is_(None) if scope.job_id is None else Silence.job_id == scope.job_id,
            Silence.target_id.is_(None)
            if scope.target_id is None
            else Silence.target_id == scope.target_id,
            Silence.selector.is_(None)
            if scope.selector is None
            else Silence.selector == scope.selector,
        )
        .limit(1)
    )
    if same is not None:
        raise InvalidInput(
            f"until: silence #{same.id} already mutes the same scope until "
            f"{same.ends_at.isoformat()}; expire it first to replace it",
            field="until",
            value=ends.isoformat(),
            allowed=f"a scope without a silence in force (#{same.id} is)",
        )


def _view(silence: Silence, now: datetime) -> SilenceView:
    parts = [
        f"job={silence.job_name}" if silence.job_name else "",
        f"target={silence.target_name}" if silence.target_name else "",
        f"selector={silence.selector}" if silence.selector else "",
    ]
    return SilenceView(
        id=silence.id,
        scope=" ".join(p for p in parts if p) or "everything",
        job=silence.job_name,
        target=silence.target_name,
        selector=silence.selector,
        starts_at=silence.starts_at,
        ends_at=silence.ends_at,
        created_by=silence.created_by,
        reason=silence.reason,
        expired_by=silence.expired_by,
        active=silence.starts_at <= now < silence.ends_at,
    )


__all__ = ["SilenceSpec", "SilenceView", "add_silence", "expire_silence", "list_silences"]
