"""What fires in the next hours: the jobs' assignments read in two queries, the fire
times computed per (job, zone) by :mod:`fleetcron.core.upcoming`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.calendars import Calendar, DateRule, rule_of
from fleetcron.core.dst_preview import DstNote
from fleetcron.core.rollout import RolloutOptions, rollout_options
from fleetcron.core.target_zones import dst_policy
from fleetcron.core.upcoming import (
    MAX_HOURS,
    JobFacts,
    Member,
    Upcoming,
    dst_preview,
    upcoming,
)
from fleetcron.core.validation import validate_int
from fleetcron.errors import FleetcronError, InvalidInput, NotFound
from fleetcron.services.projects.scope import place, target_reaches
from fleetcron.store.calendar_sets import load_calendars
from fleetcron.store.schema import Assignment, Job, Target

#: The most slots one listing returns.
LIMIT_MAX = 10_000


@dataclass(frozen=True)
class UpcomingQuery:
    hours: float = 24
    job: str | None = None
    target: str | None = None
    limit: int = 1000


def _check(query: UpcomingQuery) -> None:
    if not 0 < query.hours <= MAX_HOURS:
        raise InvalidInput(
            f"hours: {query.hours:g} is out of range; allowed: more than 0, at most {MAX_HOURS}",
            field="hours",
            value=query.hours,
            allowed=f"more than 0 and at most {MAX_HOURS} (a week)",
        )
    validate_int(query.limit, field="limit", low=1, high=LIMIT_MAX)


def _rollout(job: Job) -> RolloutOptions:
    try:
        return rollout_options(job.batch, job.batch_pause_s, job.max_failures, job.canary)
    except FleetcronError:
        return RolloutOptions()  # a stored option this version cannot read: shown without


def _dates(job: Job, calendars: Mapping[str, Calendar]) -> DateRule | None:
    try:
        return rule_of(job.run_only_on, job.never_on, calendars)
    except FleetcronError:
        return None  # a calendar removed under the job: shown without (the claim path logs)


def upcoming_fires(app: App, actor: Actor, query: UpcomingQuery) -> Upcoming:
    """The fires in (now, now + hours] of every job (or ``job``), on every target (or
    ``target``), soonest first."""
    actor.authorize_in("job.read")
    _check(query)
    with app.db.read() as session:
        facts = _job_facts(session, place(session, actor), query.job, query.target)
    return upcoming(
        facts,
        app.now(),
        query.hours,
        app.settings.timezone,
        limit=query.limit,
        target=query.target,
    )


def dst_preview_of(app: App, actor: Actor, job: str) -> list[DstNote]:
    """The next DST transitions of every zone the job's targets are in, and what the job
    does at each (the job page's preview)."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        facts = _job_facts(session, place(session, actor), job, None)
    return dst_preview(facts, app.now(), app.settings.timezone, all_notes=True)


def _paired_targets(session: Session) -> dict[int, tuple[str, str | None, bool, dict[str, str]]]:
    """Every paired target once (their labels are JSON: decoded 5,000 times, not once per
    assignment): name, zone, paused, labels by id."""
    return {
        target_id: (name, zone, bool(paused), labels or {})
        for target_id, name, zone, paused, labels in session.execute(
            select(Target.id, Target.name, Target.timezone, Target.paused, Target.labels).where(
                Target.paired.is_(True)
            )
        )
    }


def _job_facts(session: Session, pid: int, job: str | None, target: str | None) -> list[JobFacts]:
    """What decides the fires of every job (or ``job``; with ``target``, its jobs)."""
    targets = _paired_targets(session)
    jobs_q = select(Job).where(Job.project_id == pid).order_by(Job.name)
    members_q = select(Assignment.job_id, Assignment.target_id, Assignment.enabled)
    if job is not None:
        job_id = session.scalar(select(Job.id).where(Job.name == job, Job.project_id == pid))
        if job_id is None:
            raise NotFound("job", job)
        jobs_q = jobs_q.where(Job.id == job_id)
        members_q = members_q.where(Assignment.job_id == job_id)
    if target is not None:
        target_id = session.scalar(
            select(Target.id).where(Target.name == target, target_reaches(pid))
        )
        if target_id is None:
            raise NotFound("target", target)
        # Every assignment of the target's jobs: a rollout is planned over the whole
        # slot, whichever of its targets is asked about.
        its_jobs = select(Assignment.job_id).where(Assignment.target_id == target_id)
        members_q = members_q.where(Assignment.job_id.in_(its_jobs))
        jobs_q = jobs_q.where(Job.id.in_(its_jobs))
    members: dict[int, list[Member]] = {}
    for job_id, target_id, enabled in session.execute(members_q):
        found = targets.get(target_id)
        if found is None:
            continue  # an unpaired target runs nothing
        name, zone, paused, labels = found
        members.setdefault(job_id, []).append(
            Member(name, zone, bool(enabled), paused, labels, target_id)
        )
    calendars = load_calendars(session)
    return [_facts(job, members.get(job.id, []), calendars) for job in session.scalars(jobs_q)]


def _facts(job: Job, members: list[Member], calendars: Mapping[str, Calendar]) -> JobFacts:
    return JobFacts(
        job.name,
        job.origin,
        job.schedule,
        job.timezone,
        members,
        spread_s=int(job.spread_s or 0),
        rollout=_rollout(job),
        jitter_s=int(job.jitter_s or 0),
        job_id=job.id,
        dates=_dates(job, calendars),
        dst=dst_policy(job.dst_gap, job.dst_fold),
    )
