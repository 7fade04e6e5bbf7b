"""The fleet at a glance: per job, how its targets stand (:func:`job_counts`), and the
grid of paired targets by bulk jobs, each cell the state of the newest run there
(:func:`fleet_grid`); one statement for every job, one for a grid page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, and_, case, func, or_, select, true, type_coerce
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.reach import Reach, is_down, words
from fleetcron.core.status_display import STATE_OF, STATES, State, state_of
from fleetcron.core.validation import validate_int
from fleetcron.services.fleet.states import (
    OFFSET_MAX,
    PAGE_MAX,
    JobCounts,
    with_newest,
)
from fleetcron.services.projects.scope import place, target_reaches
from fleetcron.store.schema import Assignment, Job, Target


@dataclass(frozen=True)
class GridCell:
    state: State
    enabled: bool
    run_id: int | None


@dataclass(frozen=True)
class Unreachable:
    """What the newest host probe found on a target it could not reach."""

    words: str
    error: str | None


@dataclass(frozen=True)
class FleetGrid:
    """Targets (rows) by bulk jobs (columns), capped on both sides; ``unreachable``: the
    rows whose host the newest probe could not reach (their cells show older runs)."""

    jobs: list[str]
    targets: list[str]
    cells: dict[tuple[str, str], GridCell]
    total_targets: int
    total_jobs: int
    offset: int
    unreachable: dict[str, Unreachable]

    @property
    def more_targets(self) -> int:
        return max(0, self.total_targets - self.offset - len(self.targets))

    @property
    def more_jobs(self) -> int:
        return self.total_jobs - len(self.jobs)


def _newest_of_every(session: Session, where: ColumnElement[bool]) -> list[Any]:
    """(job_id, job name, target name, enabled, target paused, newest run id, its status)
    of every assignment matching ``where``."""
    columns = [
        Assignment.job_id.label("job_id"),
        Job.name.label("job"),
        Target.name.label("target"),
        Assignment.enabled.label("enabled"),
        Target.paused.label("target_paused"),
    ]
    return with_newest(session, columns, where, jobs=True)


def job_counts(app: App, actor: Actor, *, origin: str | None = "bulk") -> dict[str, JobCounts]:
    """Per job (by name), how its targets stand; one grouped statement for every job, over
    the newest-run status each assignment carries (no run is read)."""
    actor.authorize_in("run.read")
    with app.db.read() as session:
        where = and_(
            Job.project_id == place(session, actor), Job.origin == origin if origin else true()
        )
        paused = or_(Assignment.enabled.is_(False), Target.paused.is_(True))
        status = type_coerce(Assignment.newest_status, String())
        rows = session.execute(
            select(Job.name, status, func.count(), func.sum(case((paused, 1), else_=0)))
            .select_from(Assignment)
            .join(Job, Job.id == Assignment.job_id)
            .join(Target, Target.id == Assignment.target_id)
            .where(where)
            .group_by(Job.name, status)
        ).all()
    tallies: dict[str, dict[str, int]] = {}
    for job, newest, n, n_paused in rows:
        tally = tallies.setdefault(job, dict.fromkeys(("total", "paused", *STATES), 0))
        tally["total"] += n
        tally[STATE_OF[newest]] += n
        tally["paused"] += n_paused or 0
    return {job: JobCounts(**tally) for job, tally in tallies.items()}


GRID_TARGETS = 40


GRID_JOBS = 12


def fleet_grid(
    app: App, actor: Actor, *, offset: int = 0, limit: int = GRID_TARGETS, jobs: int = GRID_JOBS
) -> FleetGrid:
    """Paired targets by bulk jobs, ``limit`` targets from ``offset`` and the first
    ``jobs`` bulk jobs by name; each cell the class of the newest run there."""
    actor.authorize_in("run.read")
    validate_int(offset, field="offset", low=0, high=OFFSET_MAX)
    validate_int(limit, field="limit", low=1, high=PAGE_MAX)
    with app.db.read() as session:
        pid = place(session, actor)
        # the project's targets and those shared into it; its own bulk jobs
        reached, bulk = target_reaches(pid), and_(Job.project_id == pid, Job.origin == "bulk")
        total_targets = session.scalar(select(func.count(Target.id)).where(reached)) or 0
        total_jobs = session.scalar(select(func.count(Job.id)).where(bulk)) or 0
        target_rows = session.execute(
            select(Target.id, Target.name, Target.reach, Target.reach_error)
            .where(reached)
            .order_by(Target.name)
            .offset(offset)
            .limit(limit)
        ).all()
        job_rows = session.execute(
            select(Job.id, Job.name).where(bulk).order_by(Job.name).limit(jobs)
        ).all()
        cells: dict[tuple[str, str], GridCell] = {}
        if target_rows and job_rows:
            where = and_(
                Assignment.target_id.in_([t.id for t in target_rows]),
                Assignment.job_id.in_([j.id for j in job_rows]),
            )
            for r in _newest_of_every(session, where):
                cells[(r.target, r.job)] = GridCell(
                    state_of(r.status), bool(r.enabled) and not r.target_paused, r.last_id
                )
        return FleetGrid(
            jobs=[j.name for j in job_rows],
            targets=[t.name for t in target_rows],
            cells=cells,
            total_targets=total_targets,
            total_jobs=total_jobs,
            offset=offset,
            unreachable={
                t.name: Unreachable(words(Reach(t.reach)), t.reach_error)
                for t in target_rows
                if t.reach and is_down(Reach(t.reach))
            },
        )
