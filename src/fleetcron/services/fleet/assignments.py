"""Which targets a job covers: bulk membership by selector, and each assignment's next fire."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from sqlalchemy import func, select
from sqlalchemy.orm import Session, object_session

from fleetcron.app import Actor, App
from fleetcron.core.calendars import CalendarSchedule, rule_of
from fleetcron.core.labels import format_selector, selector_matches
from fleetcron.core.target_zones import (
    TARGET_LOCAL,
    assignment_schedule,
    dst_policy,
    effective_zone,
)
from fleetcron.core.targets import TargetKind
from fleetcron.cron.dst import DEFAULT as DEFAULT_DST
from fleetcron.cron.dst import DstPolicy
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, record
from fleetcron.services.fleet.local_gate import LocalRefused, admit, record_refusal
from fleetcron.services.projects.scope import place, projects_reached, target_reaches
from fleetcron.store.calendar_sets import load_calendars
from fleetcron.store.schema import Assignment, Job, Target


def get_target(session: Session, name: str, pid: int, *, shared: bool = False) -> Target:
    """Target ``name`` of project ``pid`` (with ``shared``, else one shared into it);
    NotFound otherwise, whatever other projects hold."""
    target = session.scalar(select(Target).where(Target.name == name, Target.project_id == pid))
    if target is None and shared:
        target = session.scalars(
            select(Target).where(Target.name == name, target_reaches(pid)).order_by(Target.id)
        ).first()
    if target is None:
        raise NotFound("target", name)
    return target


def next_fire(job: Job, after: datetime, *, target: Target | None, default_zone: str) -> datetime:
    """The assignment's first fire after ``after``: in the job's zone, or for a job in the
    ``target`` zone in its target's (``default_zone``, the ``timezone`` setting, when the
    target has none). The one home of this computation outside the run store, which
    advances ``next_fire_at`` with the same :func:`assignment_schedule`."""
    target_zone = target.timezone if target is not None and job.timezone == TARGET_LOCAL else None
    dst = dst_policy(job.dst_gap, job.dst_fold)
    schedule = assignment_schedule(job.schedule, job.timezone, target_zone, default_zone, dst)
    session = object_session(job)
    if (job.run_only_on or job.never_on) and session is not None:
        # The job's calendars drop dates (core/calendars.py); should they leave none,
        # the cron's own time stands and the claim path looks again then.
        with session.no_autoflush:
            rule = rule_of(job.run_only_on, job.never_on, load_calendars(session))
        if rule is not None:
            with contextlib.suppress(InvalidInput):
                return CalendarSchedule(schedule, rule).next_after(after)
    return schedule.next_after(after)


def zone_of(job: Job, target: Target | None, default_zone: str) -> str:
    """The zone the job's schedule runs in on ``target`` (see :func:`next_fire`)."""
    return effective_zone(job.timezone, target.timezone if target else None, default_zone)


def refire_assignments(
    assignments: Iterable[Assignment], job: Job | None, now: datetime, default_zone: str
) -> int:
    """Move each assignment to its next fire after ``now`` (after a change of schedule or
    zone, of the job or, with ``job=None``, of each assignment's target). Returns how many."""
    count = 0
    for assignment in assignments:
        the_job = job if job is not None else assignment.job
        # Only a job in the target zone needs the target (not loaded otherwise).
        target = assignment.target if the_job.timezone == TARGET_LOCAL else None
        assignment.next_fire_at = next_fire(the_job, now, target=target, default_zone=default_zone)
        assignment.updated_at = now
        count += 1
    return count


def refire_target_local(target: Target, now: datetime, default_zone: str) -> int:
    """After a change of the target's zone: move its assignments of jobs in the ``target``
    zone to their next fire in the new zone (others keep theirs). Returns how many."""
    local = [a for a in target.assignments if a.job.timezone == TARGET_LOCAL]
    return refire_assignments(local, None, now, default_zone)


def new_assignment(
    session: Session,
    app: App,
    job: Job,
    target: Target,
    *,
    enabled: bool,
    now: datetime,
) -> Assignment:
    """A new assignment, in the session and linked into ``job`` and ``target``: the one
    constructor of assignments, so every path passes the local gate here (raises
    :class:`~fleetcron.services.fleet.local_gate.LocalRefused`). A jump host runs no jobs."""
    if target.kind is TargetKind.JUMP:
        raise InvalidInput(
            f"target: {target.name} is a jump host; jump hosts run no jobs",
            field="target",
            value=target.name,
            allowed="a target of kind ssh or local",
        )
    admit(app, job, target)
    assignment = Assignment(
        job=job,
        target=target,
        enabled=enabled,
        next_fire_at=next_fire(job, now, target=target, default_zone=app.settings.timezone),
        created_at=now,
        updated_at=now,
    )
    session.add(assignment)
    return assignment


@dataclass(frozen=True)
class ZoneSpread:
    """Where a job in the ``target`` zone would fire: one zone in use, how many paired
    targets are in it, and the schedule's next fires there."""

    timezone: str
    targets: int
    fires: tuple[datetime, ...]


def zone_spread(
    app: App, actor: Actor, schedule: str, count: int, *, dst: DstPolicy = DEFAULT_DST
) -> list[ZoneSpread]:
    """The next ``count`` fires of ``schedule`` (under the DST choices ``dst``) in each zone
    of the paired targets (targets without a zone count in the default zone), earliest
    first; the default zone alone when there is no paired target. Raises CronError for a
    bad schedule."""
    actor.authorize_in("job.read")
    default = app.settings.timezone
    with app.db.read() as session:
        rows = session.execute(
            select(Target.timezone, func.count())
            .where(Target.paired.is_(True), target_reaches(place(session, actor)))
            .group_by(Target.timezone)
        ).all()
    counts: dict[str, int] = {}
    for zone, n in rows:
        counts[zone or default] = counts.get(zone or default, 0) + n
    now = app.now()
    spread = [
        ZoneSpread(
            zone,
            n,
            tuple(
                islice(
                    assignment_schedule(schedule, TARGET_LOCAL, zone, default, dst).iter_after(now),
                    count,
                )
            ),
        )
        for zone, n in (counts or {default: 0}).items()
    ]
    return sorted(spread, key=lambda z: (z.fires[:1], z.timezone))


def matching_targets(session: Session, selector: dict[str, str], pid: int) -> list[Target]:
    """Paired targets a bulk job of project ``pid`` with this selector covers: the
    project's own and those shared into it, never another project's (nor a jump host)."""
    paired = session.scalars(
        select(Target)
        .where(Target.paired.is_(True), Target.kind != TargetKind.JUMP, target_reaches(pid))
        .order_by(Target.name)
    )
    return [t for t in paired if selector_matches(selector, t.labels)]


@dataclass(frozen=True)
class Extension:
    """What :func:`extend_jobs_to` did: the jobs extended to the target, and those the
    local gate kept off it (each audited and logged)."""

    extended: list[str]
    refused: list[str]


def extend_jobs_to(
    session: Session, app: App, actor: Actor, target: Target, *, recheck: bool = False
) -> Extension:
    """Give a paired target an enabled assignment for every bulk job that selects it and
    every individual job of its own that lacks one (after an unpair); drop assignments of
    bulk jobs whose selector no longer matches. Each change is audited. A job the local
    gate refuses is left off the target (audited as refused) and the rest goes on; with
    ``recheck`` (the target has just become local) the gate is asked again of the
    assignments it has, and a refused one is dropped. A jump host gets none (it runs no
    jobs)."""
    if target.kind is TargetKind.JUMP:
        return Extension([], [])
    now = app.now()
    have = {a.job_id: a for a in target.assignments}
    extended: list[str] = []
    refused: list[str] = []
    bulk = (Job.origin == "bulk") & Job.project_id.in_(projects_reached(target))
    jobs = session.scalars(select(Job).where(bulk | (Job.target_id == target.id)).order_by(Job.id))
    for job in jobs:
        matches = job.target_id == target.id or selector_matches(job.selector, target.labels)
        if matches and job.id not in have:
            try:
                new_assignment(session, app, job, target, enabled=True, now=now)
            except LocalRefused as exc:
                record_refusal(session, app, actor, job, target, exc.message)
                refused.append(job.name)
                continue
            extended.append(job.name)
            _audit_membership(session, app, actor, "job.extend", job, target)
        elif matches and recheck:
            try:
                admit(app, job, target)
            except LocalRefused as exc:
                session.delete(have[job.id])
                record_refusal(session, app, actor, job, target, exc.message)
                refused.append(job.name)
        elif not matches and job.id in have:
            session.delete(have[job.id])
            _audit_membership(session, app, actor, "job.retract", job, target)
    return Extension(extended, refused)


def sync_bulk_membership(
    session: Session, app: App, job: Job, *, disabled_on: Iterable[str] = ()
) -> tuple[int, int]:
    """Make a bulk job cover exactly the paired targets its selector matches.

    New assignments are enabled unless their target is in ``disabled_on``; existing ones
    keep their flag. Returns (added, removed)."""
    now = app.now()
    disabled = set(disabled_on)
    wanted = {t.id: t for t in matching_targets(session, job.selector, job.project_id)}
    have = {a.target_id: a for a in job.assignments}
    added = removed = 0
    for target_id, target in wanted.items():
        if target_id not in have:
            new_assignment(session, app, job, target, enabled=target.name not in disabled, now=now)
            added += 1
    for target_id, assignment in have.items():
        if target_id not in wanted:
            job.assignments.remove(assignment)
            removed += 1
    return added, removed


def _audit_membership(
    session: Session, app: App, actor: Actor, action: str, job: Job, target: Target
) -> None:
    note = AuditNote(
        action,
        job_id=job.id,
        job_name=job.name,
        target_id=target.id,
        target_name=target.name,
        detail={"selector": format_selector(job.selector), "schedule": job.schedule},
    )
    record(session, app, actor, note, success=True)
