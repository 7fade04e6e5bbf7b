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
from fleetcron.store.schema import Job, Silence, Target


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
    """The (job, target) pairs among ``pairs`` that a silence in force mutes now (no
    statement beyond one when no silence is in force)."""
    silences = active_silences(session, now)
    listed = list(pairs)
    if not silences or not listed:
        return set()
    labels = target_labels(session, (tid for _, tid in listed))
    return {
        (job_id, tid)
        for job_id, tid in listed
        if core.covered(silences, job_id, tid, labels.get(tid, {}), now)
    }


def silenced_names(
    session: Session, pairs: Iterable[tuple[str, str]], now: datetime
) -> set[tuple[str, str]]:
    """The (job name, target name) pairs among ``pairs`` that a silence in force mutes
    now, for the lines health lists (no statement beyond one when none is in force)."""
    silences = active_silences(session, now)
    listed = set(pairs)
    if not silences or not listed:
        return set()
    jobs = dict(
        session.execute(
            select(Job.name, Job.id).where(Job.name.in_(sorted({j for j, _ in listed})))
        ).all()
    )
    targets = {
        name: (tid, dict(labels or {}))
        for name, tid, labels in session.execute(
            select(Target.name, Target.id, Target.labels).where(
                Target.name.in_(sorted({t for _, t in listed}))
            )
        )
    }
    return {
        (job, target)
        for job, target in listed
        if job in jobs
        and target in targets
        and core.covered(silences, jobs[job], targets[target][0], targets[target][1], now)
    }


__all__ = ["active_silences", "silenced_names", "silenced_pairs", "target_labels"]
