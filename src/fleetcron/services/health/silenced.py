"""The silences in force, read once for whoever asks which job × target they mute: the
alert messages (:mod:`fleetcron.services.alerts.incidents`), health (a failure under a
silence is shown, marked silenced) and the metrics' incident gauges. Which silence covers
what is decided in :mod:`fleetcron.core.incidents` (``SilenceFacts.covers``); silences are
made and expired by :mod:`fleetcron.services.alerts.silences`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core import incidents as core
from fleetcron.core.labels import parse_selector
from fleetcron.store.schema import Assignment, Job, Project, Silence, Target


def active_silences(session: Session, now: datetime) -> list[core.SilenceFacts]:
    """The silences in force at ``now``."""
    rows = session.scalars(select(Silence).where(Silence.starts_at <= now, Silence.ends_at > now))
    return [
        core.SilenceFacts(
            starts_at=s.starts_at,
            ends_at=s.ends_at,
            job_id=s.job_id,
            target_id=s.target_id,
            selector=parse_selector(s.selector) if s.selector else None,
            project_id=s.project_id,
        )
        for s in rows
    ]


def target_labels(session: Session, target_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """Target -> its labels, read per 500 targets."""
    ids = sorted(set(target_ids))
    found: dict[int, dict[str, str]] = {}
    for start in range(0, len(ids), 500):
        for tid, labels in session.execute(
            select(Target.id, Target.labels).where(Target.id.in_(ids[start : start + 500]))
        ):
            found[tid] = dict(labels or {})
    return found


def silenced_pairs(
    session: Session, pairs: Iterable[tuple[int, int]], now: datetime
) -> set[tuple[int, int]]:
    """The (job, target) pairs among ``pairs`` that a silence of the job's project in force
    mutes now (no statement beyond one when no silence is in force)."""
    silences = active_silences(session, now)
    listed = list(pairs)
    if not silences or not listed:
        return set()
    labels = target_labels(session, (tid for _, tid in listed))
    projects = _job_projects(session, {job_id for job_id, _ in listed})
    return {
        (job_id, tid)
        for job_id, tid in listed
        if job_id in projects
        and core.covered(
            core.of_project(silences, projects[job_id]), job_id, tid, labels.get(tid, {}), now
        )
    }


def _job_projects(session: Session, job_ids: set[int]) -> dict[int, int]:
    ids = sorted(job_ids)
    found: dict[int, int] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        found.update(session.execute(select(Job.id, Job.project_id).where(Job.id.in_(chunk))).all())
    return found


def silenced_names(
    session: Session, names: Iterable[tuple[str, str, str]], now: datetime
) -> set[tuple[str, str, str]]:
    """The (project, job name, target name) among ``names`` that a silence of that project
    in force mutes now, for the lines health lists: each job is named in its project, each
    target among those its assignments run on (no statement beyond one when no silence is
    in force)."""
    silences = active_silences(session, now)
    listed = set(names)
    if not silences or not listed:
        return set()
    rows = session.execute(
        select(
            Project.name, Job.name, Target.name, Job.id, Job.project_id, Target.id, Target.labels
        )
        .join(Job, Job.project_id == Project.id)
        .join(Assignment, Assignment.job_id == Job.id)
        .join(Target, Target.id == Assignment.target_id)
        .where(
            Job.name.in_(sorted({j for _, j, _ in listed})),
            Target.name.in_(sorted({t for _, _, t in listed})),
        )
    )
    return {
        (project, job, target)
        for project, job, target, job_id, pid, tid, labels in rows
        if (project, job, target) in listed
        and core.covered(core.of_project(silences, pid), job_id, tid, dict(labels or {}), now)
    }


__all__ = ["active_silences", "silenced_names", "silenced_pairs", "target_labels"]
