"""History at a glance: the last slots of a job as chart bars, a strip per job on a
target, and duration percentiles.

A *slot* is one scheduled time of a job; on a bulk job it holds one run per target. A
bar shows the slot's worst outcome (failed over running over skipped over succeeded)
and its longest duration. The pure part (:func:`bars_of`, :func:`percentile`) takes rows
and returns geometry, so the page only draws it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.status_display import CHART_COLOURS, OUTCOMES, Outcome, outcome_of
from fleetcron.core.statuses import FAILED, RunStatus
from fleetcron.errors import NotFound
from fleetcron.services.projects.scope import place, target_reaches
from fleetcron.store.schema import Assignment, Job, Run, Target

SLOTS = 60


@dataclass(frozen=True)
class Slot:
    """One slot of a job: when, how many runs of each outcome, the longest duration."""

    scheduled_for: datetime
    counts: dict[str, int]
    duration_ms: int | None
    run_id: int  # a run of the slot (the worst one), for the link

    @property
    def outcome(self) -> Outcome:
        return next(o for o in OUTCOMES if self.counts.get(o))

    @property
    def runs(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Bar:
    x: int
    y: int
    width: int
    height: int
    outcome: str
    colour: str
    title: str
    href: str


@dataclass(frozen=True)
class Chart:
    """An SVG chart's geometry: bars oldest to newest, left to right."""

    width: int
    height: int
    bars: list[Bar]
    longest_ms: int
    slots: list[Slot]

    @property
    def empty(self) -> bool:
        return not self.bars


def _duration(ms: int | None) -> str:
    if ms is None:
        return "no duration"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def bars_of(
    slots: Sequence[Slot], *, height: int = 60, bar: int = 8, gap: int = 2, min_height: int = 3
) -> Chart:
    """Bars for ``slots`` (given in any order, drawn oldest first): height in proportion to
    the slot's longest duration (a slot with none gets the minimum), colour by outcome."""
    ordered = sorted(slots, key=lambda s: s.scheduled_for)
    longest = max((s.duration_ms or 0 for s in ordered), default=0)
    bars = []
    for index, slot in enumerate(ordered):
        scaled = round((slot.duration_ms or 0) / longest * height) if longest else 0
        h = max(min_height, min(height, scaled))
        counts = ", ".join(f"{slot.counts[o]} {o}" for o in OUTCOMES if slot.counts.get(o))
        bars.append(
            Bar(
                x=index * (bar + gap),
                y=height - h,
                width=bar,
                height=h,
                outcome=slot.outcome,
                colour=CHART_COLOURS[slot.outcome],
                title=(
                    f"{slot.scheduled_for.isoformat(sep=' ', timespec='minutes')}: "
                    f"{counts}; longest {_duration(slot.duration_ms)}"
                ),
                href=f"/runs/{slot.run_id}",
            )
        )
    width = max(len(bars) * (bar + gap) - gap, 0)
    return Chart(width, height, bars, longest, ordered)


def _slots_from_rows(rows: Iterable[Any]) -> list[Slot]:
    """Rows of (scheduled_for, status, count, longest, a run id) -> one Slot per time."""
    by_time: dict[datetime, dict[str, Any]] = {}
    for at, status, count, longest, run_id in rows:
        entry = by_time.setdefault(at, {"counts": {}, "longest": None, "runs": {}})
        outcome = outcome_of(status)
        entry["counts"][outcome] = entry["counts"].get(outcome, 0) + count
        if longest is not None:
            entry["longest"] = max(entry["longest"] or 0, longest)
        entry["runs"].setdefault(outcome, run_id)
    return [
        Slot(
            at,
            e["counts"],
            e["longest"],
            next(e["runs"][o] for o in OUTCOMES if o in e["runs"]),
        )
        for at, e in by_time.items()
    ]


#: About how many runs one chart reads: a job on many targets shows fewer slots (at least
#: :data:`MIN_SLOTS`), so the job page costs the same at 5,000 targets as at 50.
CHART_RUN_BUDGET = 20_000
MIN_SLOTS = 10


def _newest_slot_times(session: Session, job_id: int, limit: int) -> list[datetime]:
    """The newest ``limit`` slot times of a job, newest first: one index seek each on
    (job_id, scheduled_for), however many runs a slot has."""
    times: list[datetime] = []
    before: datetime | None = None
    while len(times) < limit:
        query = select(func.max(Run.scheduled_for)).where(Run.job_id == job_id)
        if before is not None:
            query = query.where(Run.scheduled_for < before)
        newest = session.scalar(query)
        if newest is None:
            break
        times.append(newest)
        before = newest
    return times


def job_slots(
    app: App, actor: Actor, name: str, *, limit: int = SLOTS, target: str | None = None
) -> list[Slot]:
    """The newest slots of job ``name`` (on one target, if given), newest first: at most
    ``limit``, and for a job on many targets as many as :data:`CHART_RUN_BUDGET` runs
    allow (at least :data:`MIN_SLOTS`). Reads only the runs of the slots shown."""
    actor.authorize_in("run.read")
    with app.db.read() as session:
        job_id = session.scalar(
            select(Job.id).where(Job.name == name, Job.project_id == place(session, actor))
        )
        if job_id is None:
            raise NotFound("job", name)
        where = [Run.job_id == job_id]
        if target is not None:
            target_id = session.scalar(
                select(Target.id).where(
                    Target.name == target, target_reaches(place(session, actor))
                )
            )
            if target_id is None:
                raise NotFound("target", target)
            where.append(Run.target_id == target_id)
            times = _target_slot_times(session, where, limit)
        else:
            times = _budgeted_slot_times(session, job_id, limit)
        if not times:
            return []
        slots = _slots_at(session, where, times)
    return sorted(slots, key=lambda s: s.scheduled_for, reverse=True)


def _slots_at(
    session: Session, where: Sequence[ColumnElement[bool]], times: Sequence[datetime]
) -> list[Slot]:
    """The slots at ``times`` of the runs ``where`` selects, counted by status."""
    rows = session.execute(
        select(
            Run.scheduled_for,
            Run.status,
            func.count(),
            func.max(Run.duration_ms),
            func.min(Run.id),
        )
        .where(*where, Run.scheduled_for.in_(times))
        .group_by(Run.scheduled_for, Run.status)
    ).all()
    return _slots_from_rows(rows)


def _target_slot_times(
    session: Session, where: Sequence[ColumnElement[bool]], limit: int
) -> list[datetime]:
    """The newest ``limit`` slot times of one job's runs on one target (``where``).

    One target's runs of one job: few rows, read through the target's index."""
    return list(
        session.scalars(
            select(Run.scheduled_for)
            .where(*where)
            .group_by(Run.scheduled_for)
            .order_by(Run.scheduled_for.desc())
            .limit(limit)
        )
    )


def _budgeted_slot_times(session: Session, job_id: int, limit: int) -> list[datetime]:
    """The newest slot times of a job on all its targets: at most ``limit``, and no more
    than :data:`CHART_RUN_BUDGET` runs allow for its number of targets (at least
    :data:`MIN_SLOTS`)."""
    width = session.scalar(
        select(func.count()).select_from(Assignment).where(Assignment.job_id == job_id)
    )
    limit = min(limit, max(MIN_SLOTS, CHART_RUN_BUDGET // max(width or 1, 1)))
    return _newest_slot_times(session, job_id, limit)


def job_chart(app: App, actor: Actor, name: str, *, limit: int = SLOTS) -> Chart:
    return bars_of(job_slots(app, actor, name, limit=limit))


@dataclass(frozen=True)
class Strip:
    job: str
    chart: Chart


def target_strips(app: App, actor: Actor, target: str, *, limit: int = 30) -> list[Strip]:
    """For each job of the project ``actor`` acts in with runs on ``target``: a small
    chart of its newest slots there."""
    actor.authorize_in("run.read")
    with app.db.read() as session:
        pid = place(session, actor)
        target_id = session.scalar(
            select(Target.id).where(Target.name == target, target_reaches(pid))
        )
        if target_id is None:
            raise NotFound("target", target)
        # the project's jobs only: another project's on a shared target stay unseen
        names = list(
            session.scalars(
                select(Job.name)
                .where(Job.id.in_(select(Run.job_id).where(Run.target_id == target_id)))
                .where(Job.project_id == pid)
                .order_by(Job.name)
            )
        )
    return [
        Strip(name, bars_of(job_slots(app, actor, name, limit=limit, target=target), height=16))
        for name in names
    ]


def percentile(values: Sequence[int], p: float) -> int | None:
    """The ``p``-th percentile (0-100) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Durations:
    """Durations of a job's finished runs (the newest ``sample`` of them)."""

    runs: int
    p50_ms: int | None
    p95_ms: int | None
    max_ms: int | None

    def as_dict(self) -> dict[str, int | None]:
        return {
            "runs": self.runs,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "max_ms": self.max_ms,
        }


def duration_percentiles(
    app: App, actor: Actor, name: str, *, sample: int = 1000, target: str | None = None
) -> Durations:
    """p50, p95 and the longest duration of the newest ``sample`` runs of job ``name``
    that ran to an outcome (succeeded or failed)."""
    actor.authorize_in("run.read")
    with app.db.read() as session:
        job_id = session.scalar(
            select(Job.id).where(Job.name == name, Job.project_id == place(session, actor))
        )
        if job_id is None:
            raise NotFound("job", name)
        query = select(Run.duration_ms).where(
            Run.job_id == job_id,
            Run.duration_ms.is_not(None),
            Run.status.in_([RunStatus.SUCCEEDED, *FAILED]),
        )
        if target is not None:
            query = query.where(Run.target_name == target)
        values = [
            v
            # newest by slot: read backwards through the (job_id, scheduled_for, status)
            # index and stop at ``sample`` (by id, the planner sorts every run of the job)
            for v in session.scalars(query.order_by(Run.scheduled_for.desc()).limit(sample))
            if v is not None
        ]
    return Durations(
        len(values), percentile(values, 50), percentile(values, 95), max(values, default=None)
    )
