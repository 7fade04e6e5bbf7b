"""Rollouts in the run store: start, or halt, the ``pending`` rows of rolled-out slots.

Part of the run write path (:class:`~fleetcron.store.runs.RunStore` calls :func:`advance`
as ``RunStore.advance_rollouts``). When a slot of a job with rollout options fires,
``claim_due`` records every target's row at once as ``pending``, under the same unique
constraint on (assignment, slot, attempt) as any slot, so the slot still happens at most
once per target. Each tick the owner asks, in one transaction per batch of slots:

1. which slots have ``pending`` rows (``ix_runs_status``); on PostgreSQL their jobs' rows
   are locked (``FOR UPDATE``, in id order), so a second scheduler on the same database
   waits, then reads the rows the first one started (SQLite has a single writer anyway);
2. for each, every row of the slot (all attempts), read as plain columns;
3. :func:`fleetcron.core.rollout.plan_rollout` over those rows and the job's options
   *now*, which says which rows start, which wait and whether the rest is halted;
4. the rows that start become ``running`` with their claim deadline and execution claim
   (through the guard, like a queued run); halted rows become ``skipped`` with the
   ``rollout_halted`` kind and the reason naming the threshold and the failures.

Nothing is kept in memory between two decisions: a new owner after a failover continues
the plan from the rows. A row whose target was paused meanwhile is skipped as paused; one
whose assignment was disabled, as disabled; one whose assignment is gone, as removed; one
whose assignment still has an older generation's live claim waits, like a queued run.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, select, tuple_, update
from sqlalchemy.orm import Session

from fleetcron.core.ownership import Verdict
from fleetcron.core.planning import live_old_claims
from fleetcron.core.rollout import (
    Attempt,
    Member,
    RolloutOptions,
    RolloutPlan,
    manual_run_options,
    plan_rollout,
    rollout_options,
)
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.errors import InvalidInput
from fleetcron.store import tick_work
from fleetcron.store.run_dispatch import (
    Dispatch,
    RunWriter,
    claim_runs,
    deadline_of,
    dispatch_from,
    dispatch_query,
    take_stamp,
    target_hold_of,
    with_jumps,
)
from fleetcron.store.run_newest import refresh_for_runs
from fleetcron.store.run_writes import moved, set_status
from fleetcron.store.schema import Assignment, Job, Run, Target

log = logging.getLogger(__name__)

#: Slots with pending rows decided in one transaction at most.
SLOT_BATCH = 50
#: The triggers of rows that belong to a slot's rollout: a scheduled slot's, and a manual
#: run's that follows the job's rollout (its rows are ``pending`` from the request on; a
#: manual run asked all at once is ``queued`` and never here). A retry joins its slot.
SLOT_TRIGGERS = ("schedule", "catch-up", "retry", "manual")
REMOVED_REASON = "the job or its target was removed before the run started"
DISABLED_REASON = "the job was disabled on this target before its turn in the rollout"


@dataclass(frozen=True)
class HaltedSlot:
    """A slot whose rest was halted by this decision."""

    job_id: int
    job_name: str
    scheduled_for: datetime
    reason: str
    skipped: int


@dataclass(frozen=True)
class RolloutStep:
    """What one decision did: the runs started (to dispatch), the slots halted, how many
    rows still wait, and the earliest end of a pause."""

    dispatches: list[Dispatch] = field(default_factory=list)
    halted: list[HaltedSlot] = field(default_factory=list)
    waiting: int = 0
    resume_at: datetime | None = None


def rolled_out(row: Row[Any]) -> bool:
    """Whether a due row's job has rollout options (the columns ``claim_due`` reads)."""
    return bool(row.batch or row.max_failures or row.canary)


def advance(store: RunWriter, now: datetime, limit: int = SLOT_BATCH) -> RolloutStep:
    """Decide every slot with ``pending`` rows (up to ``limit`` slots, oldest first), in
    one transaction; returns the runs started and the slots halted."""
    with store.db.session() as session:
        slots = session.execute(_pending_slots(store).limit(limit)).all()
        if not slots:
            return RolloutStep()
        verdict = store.guard.verdict(session, of_shards=_pending_shards(session, slots, store))
        if not verdict.may_claim:
            # Only the owner advances a rollout; the rows wait for it.
            return RolloutStep()
        if store.db.dialect == "postgresql":
            _lock_jobs(session, {job_id for job_id, _ in slots})
        stamp = take_stamp(store.guard, session, now)
        starting: list[tuple[Row[Any], Run]] = []
        halted: list[HaltedSlot] = []
        changed: list[int] = []
        waiting = 0
        resume: list[datetime] = []
        for job_id, slot in slots:
            outcome = _advance_slot(
                store, session, verdict, job_id, slot, now=now, claimed_at=stamp.at
            )
            starting += outcome.starting
            changed += outcome.skipped
            if outcome.halted is not None:
                halted.append(outcome.halted)
            waiting += outcome.waiting
            if outcome.resume_at is not None:
                resume.append(outcome.resume_at)
        session.flush()
        refresh_for_runs(session, [*changed, *(run.id for _, run in starting)])
        claim_runs(store.guard, session, verdict, [run for _, run in starting], stamp.at)
        dispatches = with_jumps(session, [dispatch_from(row, run, stamp) for row, run in starting])
    return RolloutStep(dispatches, halted, waiting, min(resume) if resume else None)


def _pending_slots(store: RunWriter) -> Select[int, datetime]:
    """The slots with pending rows this scheduler starts (:meth:`RunWriter.mine`: a
    worker's shards, a node's own shards), oldest first."""
    return (
        select(Run.job_id, Run.scheduled_for)
        .where(*tick_work.pending(store.mine))
        .group_by(Run.job_id, Run.scheduled_for)
        .order_by(Run.scheduled_for, Run.job_id)
    )


@dataclass
class _SlotOutcome:
    starting: list[tuple[Row[Any], Run]] = field(default_factory=list)
    #: The rows recorded as skipped (their assignments' newest runs are refreshed).
    skipped: list[int] = field(default_factory=list)
    halted: HaltedSlot | None = None
    waiting: int = 0
    resume_at: datetime | None = None


def _pending_shards(
    session: Session, slots: Sequence[Row[int, datetime]], store: RunWriter
) -> set[int]:
    """The shards of the slots' pending rows this scheduler starts: the guard locks and
    decides those only."""
    return set(
        session.scalars(
            select(Run.shard)
            .where(
                Run.status == RunStatus.PENDING,
                tuple_(Run.job_id, Run.scheduled_for).in_([tuple(s) for s in slots]),
                *store.mine(Run.shard),
            )
            .distinct()
        )
    )


def _decided_pending(store: RunWriter, verdict: Verdict, rows: Sequence[Any]) -> dict[int, int]:
    """The slot's pending rows this step may start or skip (assignment id -> run id):
    those of the shards the verdict decided (a row of another shard, recorded after the
    shards were read, waits for the next round; with the members placement, another
    node's rows are its own to start) and of this worker's shards."""
    return {
        r.assignment_id: r.id
        for r in rows
        if r.status == RunStatus.PENDING
        and (not verdict.generations or r.shard in verdict.generations)
        and (store.shards is None or r.shard in store.shards)
    }


def _lock_jobs(session: Session, job_ids: set[int]) -> None:
    """One decision per job at a time (PostgreSQL): a second scheduler on the same database
    waits here, then reads the rows the first one wrote."""
    # Locked in id order, all at once, so two deciders never wait for each other. NO KEY
    # UPDATE: it excludes the other decider but not the foreign-key checks of assignment
    # writes (a row updated twice in a transaction is checked against its job: FOR UPDATE
    # would make that writer and this decider wait for each other).
    session.execute(
        select(Job.id)
        .where(Job.id.in_(sorted(job_ids)))
        .order_by(Job.id)
        .with_for_update(key_share=True)  # FOR NO KEY UPDATE
    ).all()


def _advance_slot(
    store: RunWriter,
    session: Session,
    verdict: Verdict,
    job_id: int,
    slot: datetime,
    *,
    now: datetime,
    claimed_at: datetime,
) -> _SlotOutcome:
    """One rolled-out slot: what its plan starts now, skips, halts or leaves waiting."""
    rows = _slot_rows(session, job_id, slot)
    pending = _decided_pending(store, verdict, rows)
    if not pending:
        return _SlotOutcome()
    job = session.get(Job, job_id)
    if job is None:
        return _SlotOutcome(
            skipped=_skip(session, list(pending.values()), now, REMOVED_REASON, SkipKind.REMOVED)
        )
    try:
        options = rollout_options(job.batch, job.batch_pause_s, job.max_failures, job.canary)
    except InvalidInput as exc:
        reason = f"rollout halted: the job's rollout options are not valid: {exc}"
        return _halted(session, job, slot, list(pending.values()), reason, now=now)
    plan = _plan_slot(session, rows, options, now)
    outcome = _SlotOutcome(waiting=len(plan.wait), resume_at=plan.resume_at)
    if plan.halt is not None:
        skip = [pending[aid] for aid in plan.skip if aid in pending]
        halted = _halted(session, job, slot, skip, plan.halt.reason, now=now)
        outcome.skipped, outcome.halted = halted.skipped, halted.halted
        return outcome
    if plan.start:
        wave = {aid: pending[aid] for aid in plan.start if aid in pending}
        started = _start_wave(store, session, verdict, job, wave, now=now, claimed_at=claimed_at)
        outcome.starting, outcome.skipped = started.starting, started.skipped
        outcome.waiting += started.waiting
    return outcome


def _slot_rows(
    session: Session, job_id: int, slot: datetime
) -> Sequence[Row[int, int, int, str, int, RunStatus, datetime | None, str, int]]:
    """The slot's rows as plain tuples (a rollout of thousands of targets is read every
    tick; only the rows that change are loaded as objects), by assignment and attempt."""
    return session.execute(
        select(*_SLOT_COLUMNS)
        .where(Run.job_id == job_id, Run.scheduled_for == slot, Run.trigger.in_(SLOT_TRIGGERS))
        .order_by(Run.assignment_id, Run.attempt)
    ).all()


def _plan_slot(
    session: Session, rows: Sequence[Any], options: RolloutOptions, now: datetime
) -> RolloutPlan:
    """The slot's next step under the job's rollout ``options``: its targets' labels read
    only when a canary selector needs them; a manual run gated by canaries only when it
    includes one."""
    labels = _labels(session, {r.target_id for r in rows}) if options.canary.selector else {}
    members = _members(rows, options, labels)
    if any(r.trigger == "manual" for r in rows):
        options = manual_run_options(options, any(m.canary for m in members))
    return plan_rollout(members, options, now)


def _halted(
    session: Session, job: Job, slot: datetime, run_ids: list[int], reason: str, *, now: datetime
) -> _SlotOutcome:
    """The slot's rows ``run_ids`` skipped as halted, and the slot reported halted when
    there were any."""
    skipped = _skip(session, run_ids, now, reason, SkipKind.ROLLOUT_HALTED)
    halted = HaltedSlot(job.id, job.name, slot, reason, len(run_ids)) if run_ids else None
    return _SlotOutcome(skipped=skipped, halted=halted)


def _start_wave(
    store: RunWriter,
    session: Session,
    verdict: Verdict,
    job: Job,
    wave: dict[int, int],
    *,
    now: datetime,
    claimed_at: datetime,
) -> _SlotOutcome:
    """Start the rows the plan starts now (``wave``: assignment id to its pending run, in
    the plan's order). A row whose assignment was removed or disabled, or whose target is
    held, is skipped; one whose assignment still has an older generation's live claim
    waits; a row no longer pending (stopped meanwhile) is left as it is."""
    dispatch_rows, disabled = _wave_assignments(session, list(wave))
    old = store.guard.old_claims(session, verdict, list(dispatch_rows), claimed_at=claimed_at)
    runs = _locked_pending(store, session, list(wave.values()))
    outcome = _SlotOutcome()
    for aid in wave:
        if (run := runs.get(aid)) is None:
            continue
        row = dispatch_rows.get(aid)
        if row is None:
            outcome.skipped += _skip(session, [run.id], now, REMOVED_REASON, SkipKind.REMOVED)
            continue
        if aid in disabled and run.trigger != "manual":
            # A manual run named the target, which runs it even where the job is paused.
            outcome.skipped += _skip(session, [run.id], now, DISABLED_REASON, SkipKind.DISABLED)
            continue
        if hold := target_hold_of(row, store.policy):
            outcome.skipped += _skip(session, [run.id], now, hold.reason, hold.kind)
            continue
        if live_old_claims(old.get(aid, ())):
            # Waits until the previous owner's claim reaches its deadline.
            outcome.waiting += 1
            continue
        _start(store, run, row, job, now=now, claimed_at=claimed_at)
        outcome.starting.append((row, run))
    return outcome


def _wave_assignments(
    session: Session, assignment_ids: list[int]
) -> tuple[dict[int, Row[Any]], set[int]]:
    """What dispatch needs of each assignment still there, and which ones are disabled."""
    dispatch_rows = {
        row.assignment_id: row
        for row in session.execute(dispatch_query().where(Assignment.id.in_(assignment_ids)))
    }
    disabled = set(
        session.scalars(
            select(Assignment.id).where(
                Assignment.id.in_(assignment_ids), Assignment.enabled.is_(False)
            )
        )
    )
    return dispatch_rows, disabled


def _start(
    store: RunWriter, run: Run, row: Row[Any], job: Job, *, now: datetime, claimed_at: datetime
) -> None:
    """Record the pending ``run`` as running from ``now``, with its claim deadline."""
    set_status(run, RunStatus.RUNNING)
    run.started_at, run.node, run.command = now, store.node, row.command
    run.job_version = job.version
    run.deadline_at = deadline_of(row, run.trigger, claimed_at, store.margin)


def _locked_pending(store: RunWriter, session: Session, run_ids: list[int]) -> dict[int, Run]:
    """The runs of ``run_ids`` still pending, by assignment, locked on PostgreSQL."""
    # Locked and still pending: a row an operator stopped meanwhile (cancelled) is left.
    query = select(Run).where(Run.id.in_(run_ids), Run.status == RunStatus.PENDING)
    if store.db.dialect == "postgresql":
        query = query.with_for_update()
    return {run.assignment_id: run for run in session.scalars(query)}


_SLOT_COLUMNS = (
    Run.id,
    Run.assignment_id,
    Run.target_id,
    Run.target_name,
    Run.attempt,
    Run.status,
    Run.finished_at,
    Run.trigger,
    Run.shard,
)


def _members(
    rows: Sequence[Any], options: RolloutOptions, labels: dict[int, dict[str, str]]
) -> list[Member]:
    """The slot's members: one per assignment, its rows oldest attempt first. Every row of
    the slot counts (a target skipped when the slot fired, paused say, is a member that
    does not run), so the percentages of a slot do not move while it rolls out."""
    by_assignment: dict[int, list[Any]] = defaultdict(list)
    for run in rows:
        by_assignment[run.assignment_id].append(run)
    members = []
    for aid, runs in by_assignment.items():
        first = runs[0]
        members.append(
            Member(
                aid,
                first.target_name,
                # Ordered by attempt by the query; the column reads as a RunStatus.
                tuple(Attempt(r.status, r.finished_at, r.id) for r in runs),
                canary=options.canary.matches(first.target_name, labels.get(first.target_id, {})),
            )
        )
    return members


def _labels(session: Session, target_ids: set[int]) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    ids = sorted(target_ids)
    for start in range(0, len(ids), 500):
        for tid, labels in session.execute(
            select(Target.id, Target.labels).where(Target.id.in_(ids[start : start + 500]))
        ):
            found[tid] = dict(labels or {})
    return found


def _skip(
    session: Session, run_ids: Sequence[int], now: datetime, reason: str, kind: SkipKind
) -> list[int]:
    """Record pending rows as skipped (one statement per 500 rows; a row no longer pending
    is left alone); returns the ids asked for."""
    if not run_ids:
        return []
    status = moved(RunStatus.PENDING, RunStatus.SKIPPED)
    ids = sorted(run_ids)
    for start in range(0, len(ids), 500):
        session.execute(
            update(Run)
            .where(Run.id.in_(ids[start : start + 500]), Run.status == RunStatus.PENDING)
            .values(status=status, finished_at=now, reason=reason, skip_kind=kind)
            .execution_options(synchronize_session=False)
        )
    return ids


__all__ = ["SLOT_BATCH", "HaltedSlot", "RolloutStep", "advance", "rolled_out"]
