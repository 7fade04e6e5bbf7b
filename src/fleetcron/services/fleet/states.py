"""How the targets of jobs stand, read in set-based statements: every assignment with its
newest run in one statement (:func:`with_newest`), the per-job counts, and the checks of the
ranges a page asks for (the *state* a run's status puts a target in is
:func:`fleetcron.core.status_display.state_of`).
Shared by the job page (:mod:`~fleetcron.services.fleet.job_page`), the fleet grid
(:mod:`~fleetcron.services.fleet.grid`), the slots of a job
(:mod:`~fleetcron.services.jobs.slots`) and the selections of a targeted run
(:mod:`~fleetcron.services.jobs.selection`).

Each assignment names its newest run (kept with every run write:
:mod:`fleetcron.store.run_newest`), so the cost grows with the targets, not with the
history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, null, select, type_coerce
from sqlalchemy.orm import Session

from fleetcron.store.run_newest import unindexed as unindexed
from fleetcron.store.schema import Assignment, Job, Run, Target

PAGE_MAX = 1000
#: The furthest a page of a list may start (rows skipped).
OFFSET_MAX = 10_000_000


@dataclass(frozen=True)
class JobCounts:
    """How a job's targets stand: by their newest run, and how many are paused (a paused
    target is also counted by its newest run)."""

    total: int = 0
    ok: int = 0
    failed: int = 0
    running: int = 0
    waiting: int = 0
    missed: int = 0
    skipped: int = 0
    never: int = 0
    paused: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "ok": self.ok,
            "failed": self.failed,
            "running": self.running,
            "waiting": self.waiting,
            "missed": self.missed,
            "skipped": self.skipped,
            "never": self.never,
            "paused": self.paused,
        }


def newest_slot(condition: ColumnElement[bool]) -> Any:
    """The slot time of the newest run of the enclosing assignment among those matching
    ``condition``, read backwards through the unique (assignment, slot, attempt) index
    (the newest run of any status is on the assignment: ``Assignment.newest_run_id``)."""
    return (
        select(Run.scheduled_for)
        .where(Run.assignment_id == Assignment.id, condition)
        .order_by(Run.scheduled_for.desc(), Run.attempt.desc())
        .limit(1)
        .correlate(Assignment)
        .scalar_subquery()
    )


#: A run status (its string) -> the state it puts a target in.
def with_newest(
    session: Session,
    columns: Sequence[Any],
    where: ColumnElement[bool],
    *,
    jobs: bool = False,
    times: bool = False,
    raw_times: bool = False,
) -> list[Any]:
    """``columns`` (labelled; of assignments, their targets and, with ``jobs``, their jobs)
    of the assignments matching ``where``, each with its newest run: ``last_id`` and
    ``status`` (the plain string: no enum conversion for thousands of rows), as the
    assignment carries them (``store/run_newest.py``); with ``times`` also the run's
    ``scheduled_for`` and ``duration_ms`` (one primary-key lookup per assignment; else
    None). One statement. ``raw_times``: ``scheduled_for`` as the driver gives it (text on
    SQLite), unconverted."""
    if times:
        slot: Any = type_coerce(Run.scheduled_for, String()) if raw_times else Run.scheduled_for
        duration: Any = Run.duration_ms
    else:
        slot = duration = null()
    query = select(
        *columns,
        Assignment.newest_run_id.label("last_id"),
        type_coerce(Assignment.newest_status, String()).label("status"),
        slot.label("scheduled_for"),
        duration.label("duration_ms"),
    ).select_from(Assignment)
    query = query.join(Target, Target.id == Assignment.target_id)
    if jobs:
        query = query.join(Job, Job.id == Assignment.job_id)
    if times:
        query = query.outerjoin(Run, Run.id == Assignment.newest_run_id)
    return list(session.execute(query.where(where)))


#: Ids per ``IN (...)`` list (SQLite allows 32,766 parameters; stay well below).
CHUNK = 900
