"""Which targets a job covers: bulk membership by selector, and each assignment's next fire."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.labels import format_selector, selector_matches
from fleetcron.cron import parse_cached
from fleetcron.services.audit import AuditNote, record
from fleetcron.store.schema import Assignment, Job, Target


def next_fire(job: Job, after: datetime) -> datetime:
    return parse_cached(job.schedule, job.timezone).next_after(after)


def new_assignment(
    session: Session, job: Job, target: Target, *, enabled: bool, now: datetime
) -> Assignment:
    """A new assignment, in the session and linked into ``job`` and ``target``."""
    assignment = Assignment(
        job=job,
        target=target,
        enabled=enabled,
        next_fire_at=next_fire(job, now),
        created_at=now,
        updated_at=now,
    )
    session.add(assignment)
    return assignment


def matching_targets(session: Session, selector: dict[str, str]) -> list[Target]:
    """Paired targets a bulk job with this selector covers."""
    paired = session.scalars(select(Target).where(Target.paired.is_(True)).order_by(Target.name))
    return [t for t in paired if selector_matches(selector, t.labels)]


def extend_jobs_to(session: Session, app: App, actor: Actor, target: Target) -> list[str]:
    """Give a paired target an enabled assignment for every bulk job that selects it and
    every individual job of its own that lacks one (after an unpair); drop assignments of
    bulk jobs whose selector no longer matches. Each change is audited.
    Returns the names of the jobs extended."""
    now = app.now()
    have = {a.job_id: a for a in target.assignments}
    extended: list[str] = []
    jobs = session.scalars(
        select(Job).where((Job.origin == "bulk") | (Job.target_id == target.id)).order_by(Job.id)
    )
    for job in jobs:
        matches = job.target_id == target.id or selector_matches(job.selector, target.labels)
        if matches and job.id not in have:
            new_assignment(session, job, target, enabled=True, now=now)
            extended.append(job.name)
            _audit_membership(session, app, actor, "job.extend", job, target)
        elif not matches and job.id in have:
            session.delete(have[job.id])
            _audit_membership(session, app, actor, "job.retract", job, target)
    return extended


def sync_bulk_membership(
    session: Session, app: App, job: Job, *, disabled_on: Iterable[str] = ()
) -> tuple[int, int]:
    """Make a bulk job cover exactly the paired targets its selector matches.

    New assignments are enabled unless their target is in ``disabled_on``; existing ones
    keep their flag. Returns (added, removed)."""
    now = app.now()
    disabled = set(disabled_on)
    wanted = {t.id: t for t in matching_targets(session, job.selector)}
    have = {a.target_id: a for a in job.assignments}
    added = removed = 0
    for target_id, target in wanted.items():
        if target_id not in have:
            new_assignment(session, job, target, enabled=target.name not in disabled, now=now)
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
