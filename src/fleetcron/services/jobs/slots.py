"""The slots of a job: its newest distinct slot times, each with its runs counted per
status, paged by slot time (a bulk fire on all its targets, or one manual request, is one
slot). Read from the runs' ``(job_id, scheduled_for, status)`` index alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, func, literal, select, type_coerce
from sqlalchemy.orm import Session, aliased

from fleetcron.app import Actor, App
from fleetcron.core.rollout import ROLLOUT_FAILURES
from fleetcron.core.statuses import FAILED_VALUES, SkipKind
from fleetcron.core.validation import validate_int
from fleetcron.errors import NotFound
from fleetcron.services.projects.scope import place
from fleetcron.store.schema import Job, Run


@dataclass(frozen=True)
class SlotGroup:
    """One slot of a job: every run with the same ``scheduled_for`` (a bulk fire on all its
    targets, or one manual request), counted per status."""

    scheduled_for: datetime
    trigger: str
    runs: int
    by_status: dict[str, int]
    run_ids: tuple[int, ...] = ()

    @property
    def failed(self) -> int:
        return sum(self.by_status.get(s, 0) for s in FAILED_VALUES)


@dataclass(frozen=True)
class SlotsPage:
    job: str
    items: list[SlotGroup]
    limit: int
    #: The ``before`` cursor of the next (older) page, None on the last page.
    next_before: datetime | None


SLOTS_DEFAULT = 20


SLOTS_MAX = 200


def job_slots(
    app: App,
    actor: Actor,
    name: str,
    *,
    limit: int = SLOTS_DEFAULT,
    before: datetime | None = None,
    run_ids: bool = False,
) -> SlotsPage:
    """The newest slots of job ``name`` (older than ``before``), each with its counts per
    status; keyset paging by slot time. ``run_ids``: also list each slot's runs."""
    actor.authorize_in("run.read")
    validate_int(limit, field="limit", low=1, high=SLOTS_MAX)
    with app.db.read() as session:
        job = session.scalar(
            select(Job).where(Job.name == name, Job.project_id == place(session, actor))
        )
        if job is None:
            raise NotFound("job", name)
        found = _slot_times(session, job.id, before, limit + 1)
        more = len(found) > limit
        found = found[:limit]
        times = [at for at, _ in found]
        groups: list[SlotGroup] = []
        if times:
            # Counted from the (job_id, scheduled_for, status) index alone.
            rows = session.execute(
                select(Run.scheduled_for, type_coerce(Run.status, String()), func.count())
                .where(Run.job_id == job.id, Run.scheduled_for.in_(times))
                .group_by(Run.scheduled_for, Run.status)
            ).all()
            ids: dict[datetime, list[int]] = {}
            if run_ids:
                for at, run_id in session.execute(
                    select(Run.scheduled_for, Run.id)
                    .where(Run.job_id == job.id, Run.scheduled_for.in_(times))
                    .order_by(Run.id)
                ):
                    ids.setdefault(at, []).append(run_id)
            groups = _fold_slots(rows, found, ids)
        return SlotsPage(
            job=job.name,
            items=groups,
            limit=limit,
            next_before=times[-1] if more and times else None,
        )


def _slot_times(
    session: Session, job_id: int, before: datetime | None, n: int
) -> list[tuple[datetime, str]]:
    """The ``n`` newest distinct slot times of a job (older than ``before``), newest first,
    each with the trigger of one of its runs: a recursive walk that asks the
    (job_id, scheduled_for, status) index for the next older time at each step, so it reads
    ``n`` index entries, not the job's whole history."""
    newest = select(func.max(Run.scheduled_for).label("at"), literal(1).label("n")).where(
        Run.job_id == job_id
    )
    if before is not None:
        newest = newest.where(Run.scheduled_for < before)
    walk = newest.cte("slot_times", recursive=True)
    older = aliased(Run)
    step = select(
        select(func.max(older.scheduled_for))
        .where(older.job_id == job_id, older.scheduled_for < walk.c.at)
        .scalar_subquery(),
        walk.c.n + 1,
    ).where(walk.c.at.is_not(None), walk.c.n < n)
    walk = walk.union_all(step)
    trigger = (
        select(older.trigger)
        .where(older.job_id == job_id, older.scheduled_for == walk.c.at)
        .limit(1)
        .scalar_subquery()
    )
    found = session.execute(
        select(walk.c.at, trigger).where(walk.c.at.is_not(None)).order_by(walk.c.n)
    ).all()
    return [(at, trig) for at, trig in found if at is not None]


def _fold_slots(
    rows: Sequence[Any],
    found: Sequence[tuple[datetime, str]],
    ids: Mapping[datetime, list[int]],
) -> list[SlotGroup]:
    by: dict[datetime, dict[str, int]] = {}
    for at, status, n in rows:
        by.setdefault(at, {})[status] = n
    return [
        SlotGroup(
            scheduled_for=at,
            trigger=trigger,
            runs=sum(by.get(at, {}).values()),
            by_status=by.get(at, {}),
            run_ids=tuple(ids.get(at, ())),
        )
        for at, trigger in found
    ]


# -- halted slots and targets -----------------------------------------------------------------


def halt_label(reason: str, failed: int, members: int) -> str:
    """How the job page labels a slot whose rollout halted: ``halted: 3 of 10 failed,
    threshold 20%`` for a threshold, ``halted: canary web1 ended failed`` for a canary;
    ``reason`` is the one the rollout step wrote (``core/rollout.py``)."""
    rest = reason.removeprefix("rollout halted: ")
    if rest.startswith("max_failures "):
        spec = rest.removeprefix("max_failures ").split(" ", 1)[0]
        return f"halted: {failed} of {members} failed, threshold {spec}"
    return "halted: " + rest.split(";", 1)[0]


@dataclass(frozen=True)
class Halted:
    """The halted part of a job's slots and targets, for the job page's labels."""

    #: Slot time -> its label (:func:`halt_label`) and how many targets were skipped.
    slots: dict[datetime, tuple[str, int]]
    #: The runs (of those asked about) that the rollout halted: never started.
    runs: frozenset[int]


def halted(
    app: App, actor: Actor, name: str, times: Sequence[datetime], run_ids: Sequence[int]
) -> Halted:
    """Which of the job's slots ``times`` a rollout halted (with their labels), and which of
    ``run_ids`` are rows it halted (``skipped``, kind ``rollout_halted``)."""
    actor.authorize_in("run.read")
    with app.db.read() as session:
        job_id = session.scalar(
            select(Job.id).where(Job.name == name, Job.project_id == place(session, actor))
        )
        if job_id is None:
            raise NotFound("job", name)
        runs: frozenset[int] = frozenset()
        if run_ids:
            query = select(Run.id).where(
                Run.id.in_(list(run_ids)), Run.skip_kind == SkipKind.ROLLOUT_HALTED
            )
            runs = frozenset(session.scalars(query))
        slots: dict[datetime, tuple[str, int]] = {}
        if not times:
            return Halted(slots, runs)
        stopped = session.execute(
            select(Run.scheduled_for, func.min(Run.reason), func.count())
            .where(
                Run.job_id == job_id,
                Run.scheduled_for.in_(list(times)),
                Run.skip_kind == SkipKind.ROLLOUT_HALTED,
            )
            .group_by(Run.scheduled_for)
        ).all()
        for at, reason, skipped in stopped:
            members = session.scalar(
                select(func.count(func.distinct(Run.assignment_id))).where(
                    Run.job_id == job_id, Run.scheduled_for == at
                )
            )
            failed = session.scalar(
                select(func.count(func.distinct(Run.assignment_id))).where(
                    Run.job_id == job_id,
                    Run.scheduled_for == at,
                    Run.status.in_(ROLLOUT_FAILURES),
                )
            )
            slots[at] = (halt_label(reason or "", failed or 0, members or 0), skipped)
        return Halted(slots, runs)
