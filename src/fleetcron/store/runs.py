"""The single write path for runs.

Every write of a run row by the scheduler — claiming due slots, starting a queued manual
run, a retry, completion, loss, interruption — goes through :class:`RunStore`, and every
one of those transactions asks the :class:`RunGuard` before it writes. Standalone, the guard
lets everything through; with high availability it proves this node is the authorized
owner, and a write it does not allow is not made (a refused completion is recorded in
``fenced_writes``). The other run writes (queueing a manual run, fencing the runs of a
lost owner, retention) are in :mod:`fleetcron.store.run_writes`; every status written is
checked against the run vocabulary's allowed moves. What a started run carries to the
scheduler (:class:`~fleetcron.store.run_dispatch.Dispatch`) is read and made in
:mod:`fleetcron.store.run_dispatch`.

Exactly once per slot: a run row for (assignment, slot, attempt) is inserted under a
unique constraint in the same transaction that advances the assignment's
``next_fire_at``. PostgreSQL locks the due assignments with ``FOR UPDATE SKIP LOCKED``;
SQLite takes its single writer lock at ``BEGIN IMMEDIATE``. Either way two scheduler
processes on one database can never both dispatch the same slot.

Each started run gets a claim deadline (:func:`fleetcron.core.ownership.claim_deadline`,
the one rule) read from the guard's clock in the claim transaction; the dispatch carries the
deadline, that clock reading and this machine's monotonic time at it, so the scheduler can
hand the executor a watchdog budget that ends the command by the deadline. After a change
of owner, a slot whose assignment still has a claim of an older generation waits for it
(:func:`fleetcron.core.planning.wait_for_old_claims`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Row,
    Select,
    Table,
    and_,
    bindparam,
    func,
    select,
    update,
)
from sqlalchemy.orm import InstrumentedAttribute, Session

from fleetcron.core import blackouts
from fleetcron.core.calendars import Calendar, CalendarSchedule
from fleetcron.core.ownership import Verdict
from fleetcron.core.planning import (
    AssignmentState,
    BlackoutState,
    OldClaim,
    Plan,
    SlotOutcome,
    SlotPolicy,
    black_out,
    live_old_claims,
    plan_assignment,
    wait_for_old_claims,
)
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.errors import Conflict, InvalidInput
from fleetcron.executors.base import ExecResult
from fleetcron.store import run_newest, tick_work
from fleetcron.store.blackout_windows import in_force, subject_of
from fleetcron.store.bulk import RowsUpdate, insert_returning, update_rows
from fleetcron.store.calendar_sets import filtered_schedule, load_calendars
from fleetcron.store.db import Database, retry_transient
from fleetcron.store.run_dispatch import (
    Dispatch,
    Stamp,
    Started,
    claim_runs,
    deadline_of,
    dispatch_from,
    dispatch_query,
    take_stamp,
    target_hold_of,
    with_jumps,
)
from fleetcron.store.run_guard import STANDALONE_VERDICT as STANDALONE_VERDICT
from fleetcron.store.run_guard import NewClaim, shards_of_runs
from fleetcron.store.run_guard import RunGuard as RunGuard
from fleetcron.store.run_guard import Standalone as Standalone
from fleetcron.store.run_newest import refresh, refresh_for_runs
from fleetcron.store.run_rollouts import RolloutStep, rolled_out
from fleetcron.store.run_rollouts import advance as advance_rollouts
from fleetcron.store.run_writes import moved, set_status
from fleetcron.store.run_writes import request_stop as request_stop
from fleetcron.store.schema import Assignment, ClusterOwnership, FencedWrite, Run, Target

log = logging.getLogger(__name__)

#: A run's deadline is its timeout plus this margin (time to connect, to kill, to record).
#: Default time a claim outlives its run's timeout (see ``claim_margin_s`` in the settings).
DEADLINE_MARGIN = timedelta(seconds=60)
# Core tables for executemany updates (the ORM would try a bulk update by primary key).
ASSIGNMENTS = cast(Table, Assignment.__table__)
#: When a job's calendars leave it no fire time, it is looked at again this much later.
CALENDAR_RETRY = timedelta(days=1)
#: The trigger of a run a blackout window deferred (``core/planning.black_out``).
DEFERRED = "deferred"
RUNS = cast(Table, Run.__table__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Claimed:
    """What one claim transaction decided."""

    dispatches: list[Dispatch]
    missed: int
    skipped: int
    assignments: int = 0
    #: Assignments left due because an older generation's claim on them is still live.
    held: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Round:
    """What one claim transaction read once for all its due assignments."""

    running: set[int]
    old: Mapping[int, Sequence[OldClaim]]
    windows: Sequence[blackouts.Window]
    #: Assignments with a run deferred by a blackout still waiting (``queued``).
    deferred: set[int]
    #: The calendars, when a due job names any (``core/calendars.py``).
    calendars: Mapping[str, Calendar]


class RunStore:
    """Claims, starts and finishes runs; the only code that writes the runs table."""

    def __init__(
        self,
        db: Database,
        *,
        node: str,
        guard: RunGuard | None = None,
        policy: SlotPolicy | None = None,
        clock: Callable[[], datetime] = _utc_now,
        claim_margin: timedelta = DEADLINE_MARGIN,
        shards: frozenset[int] | None = None,
    ) -> None:
        self.db = db
        self.node = node
        #: The shards whose work this store's scheduler starts (a worker of a node with
        #: several, ``fleetcron scheduler --workers N``); None: every shard.
        self.shards = shards
        #: With the members placement: this node's id; it starts only the work of the
        #: shards it owns and does not drain (read in each statement that picks work).
        self.owner: str | None = None
        self.guard: RunGuard = guard or Standalone()
        self.policy = policy or SlotPolicy()
        self._now = clock
        self.margin = claim_margin
        #: The tick's questions (:meth:`waiting`), built for these shards and this owner.
        self._asked_for: tuple[frozenset[int] | None, str | None] | None = None
        self._asked: dict[bool, Select[bool, bool, bool, bool]] = {}

    def mine(
        self, shard: ColumnElement[int] | InstrumentedAttribute[int]
    ) -> list[ColumnElement[bool]]:
        """The conditions on ``shard`` (a column) that keep the work this scheduler starts:
        its worker's shards, and with the members placement the shards its node owns
        and does not drain. The guard still decides each write under the rows' locks."""
        conditions: list[ColumnElement[bool]] = []
        if self.shards is not None:
            conditions.append(shard.in_(sorted(self.shards)))
        if self.owner is not None:
            owned = select(ClusterOwnership.shard).where(
                ClusterOwnership.owner_node_id == self.owner, ClusterOwnership.draining.is_(False)
            )
            conditions.append(shard.in_(owned))
        return conditions

    # -- claiming ---------------------------------------------------------------------

    @retry_transient
    def claim_due(
        self,
        now: datetime,
        limit: int = 500,
        exclude: Collection[int] = (),
        held_shards: Collection[int] = (),
    ) -> Claimed:
        """Decide every due slot of up to ``limit`` due assignments, in one transaction.

        Reads only assignments whose indexed ``next_fire_at`` has come. Returns the runs to
        dispatch (already recorded as ``running``) and how many slots were recorded as
        missed or skipped. On a unique-constraint race nothing is written and nothing is
        returned; the next tick sees the winner's writes. ``exclude``: assignments held in
        an earlier batch of the same tick (so the next batch makes progress);
        ``held_shards``: shards left undecided (active cleanup under way there).
        """
        try:
            with self.db.session() as session:
                return self._claim_due(session, now, limit, (exclude, held_shards))
        except Conflict:
            log.warning("claim lost a race; retrying next tick", extra={"action": "claim.race"})
            return Claimed([], 0, 0)

    def _claim_due(
        self,
        session: Session,
        now: datetime,
        limit: int,
        exclude: tuple[Collection[int], Collection[int]],
    ) -> Claimed:
        rows = self._due_rows(session, now, limit, exclude)
        if not rows:
            return Claimed([], 0, 0, 0)
        verdict = self.guard.verdict(session, of_shards={r.shard for r in rows})
        if not verdict.may_claim and verdict.kind != "invalid":
            # Another node owns the work, or this one may not act: leave the slots due.
            return Claimed([], 0, 0, 0)
        stamp = self._stamp(session, now)
        context = self._round(session, rows, verdict, stamp, now)
        slots: list[tuple[Row[Any], dict[str, Any]]] = []
        held: list[int] = []
        next_fires: list[dict[str, Any]] = []
        for row in rows:
            plan = self._plan(row, now, context)
            if plan is None:
                # An older generation's command may still run here: leave the slot due.
                held.append(row.assignment_id)
                continue
            next_fires.append({"aid": row.assignment_id, "next": plan.next_fire_at, "now": now})
            slots += [(row, self._slot_values(row, o, verdict, stamp, now)) for o in plan.outcomes]
        ids = _insert_runs(session, [values for _, values in slots])
        self._advance(session, next_fires)
        firing = [(row, v) for row, v in slots if v["status"] is RunStatus.RUNNING]
        started = _claimed(self.guard, session, verdict, stamp=stamp, firing=firing, ids=ids)
        dispatches = with_jumps(
            session,
            [dispatch_from(row, run, stamp) for (row, _), run in zip(firing, started, strict=True)],
        )
        missed = sum(v["status"] is RunStatus.MISSED for _, v in slots)
        skipped = sum(v["status"] is RunStatus.SKIPPED for _, v in slots)
        return Claimed(dispatches, missed, skipped, len(rows), tuple(held))

    def _due_rows(
        self,
        session: Session,
        now: datetime,
        limit: int,
        exclude: tuple[Collection[int], Collection[int]],
    ) -> Sequence[Row[Any]]:
        """Up to ``limit`` enabled assignments whose slot has come, oldest first (through
        the ``next_fire_at`` index), with what dispatch needs, except the ``exclude``d
        assignments and shards; on PostgreSQL locked, skipping the rows another transaction
        holds."""
        assignments, shards = exclude
        query = (
            dispatch_query()
            .where(*tick_work.due(now, self.mine))
            .order_by(Assignment.next_fire_at)
            .limit(limit)
        )
        if assignments:
            query = query.where(Assignment.id.not_in(list(assignments)))
        if shards:
            query = query.where(Target.shard.not_in(list(shards)))
        if self.db.dialect == "postgresql":
            query = query.with_for_update(skip_locked=True, of=Assignment)
        return session.execute(query).all()

    def _round(
        self,
        session: Session,
        rows: Sequence[Row[Any]],
        verdict: Verdict,
        stamp: Stamp,
        now: datetime,
    ) -> _Round:
        """Read what planning the due ``rows`` needs besides the rows themselves."""
        ids = [r.assignment_id for r in rows]
        windows = in_force(session, now)
        return _Round(
            running=self._running_assignments(
                session, [r.assignment_id for r in rows if r.overlap == "forbid"]
            ),
            old=self.guard.old_claims(session, verdict, ids, claimed_at=stamp.at),
            windows=windows,
            deferred=self._deferred_assignments(session, ids) if windows else set(),
            calendars=load_calendars(session)
            if any(r.run_only_on or r.never_on for r in rows)
            else {},
        )

    def _plan(self, row: Row[Any], now: datetime, context: _Round) -> Plan | None:
        """The core's plan for one due assignment, after blackout windows and the older
        generations' claims on it (``None``: leave it due)."""
        aid = row.assignment_id
        try:
            schedule = filtered_schedule(row, self.policy.default_timezone, context.calendars)
            first = row.next_fire_at
            if isinstance(schedule, CalendarSchedule):
                # next_fire_at was set from the cron alone: start at the first allowed one.
                first = schedule.first_at_or_after(first)
            planned = plan_assignment(
                schedule,
                AssignmentState(first, row.overlap, row.catchup, aid in context.running),
                now,
                self.policy,
            )
        except InvalidInput as exc:
            # Its calendars leave no date (or one was removed): look again in a day.
            log.warning(
                "job %s: %s", row.job_name, exc.message, extra={"action": "calendar.no_fire"}
            )
            return Plan((), now + CALENDAR_RETRY)
        planned = black_out(
            planned,
            BlackoutState(
                context.windows,
                subject_of(row, self.policy.default_timezone),
                row.on_blackout,
                aid in context.deferred,
            ),
        )
        return wait_for_old_claims(planned, context.old.get(aid, ()), now, self.policy)

    def _slot_values(
        self, row: Row[Any], outcome: SlotOutcome, verdict: Verdict, stamp: Stamp, now: datetime
    ) -> dict[str, Any]:
        """The column values of one slot's planned outcome (every row of a claim has the
        same keys: they are inserted with one statement)."""
        values = self._new_values(row, outcome.slot, outcome.trigger, now)
        if outcome.outcome == "deferred":
            # Waits, queued, until the window ends; claim_queued starts it (or defers
            # it again if a window still covers it then).
            values.update(status=moved(None, RunStatus.QUEUED), reason=outcome.reason)
            values["not_before"] = outcome.not_before
        elif outcome.outcome != "fire":
            values.update(status=moved(None, RunStatus(outcome.outcome)), finished_at=now)
            values.update(reason=outcome.reason, skip_kind=outcome.skip_kind)
        elif verdict.kind == "invalid":
            # Fail closed: nobody can prove ownership, so the slot does not run.
            values.update(status=moved(None, RunStatus.SKIPPED), finished_at=now)
            values["reason"] = f"ownership uncertain: {verdict.reason}"
            values["skip_kind"] = SkipKind.OWNERSHIP_UNCERTAIN
        elif hold := target_hold_of(row, self.policy):
            # Target paused, local targets off, or the local gate: recorded, not run.
            values.update(status=moved(None, RunStatus.SKIPPED), finished_at=now)
            values.update(reason=hold.reason, skip_kind=hold.kind)
        elif rolled_out(row):
            # A rollout: every target's row is recorded now, held until the plan
            # starts it (advance_rollouts, store/run_rollouts.py).
            values["status"] = moved(None, RunStatus.PENDING)
        else:
            values.update(status=moved(None, RunStatus.RUNNING), started_at=now)
            values["deadline_at"] = deadline_of(row, outcome.trigger, stamp.at, self.margin)
        return values

    @staticmethod
    def _advance(session: Session, next_fires: list[dict[str, Any]]) -> None:
        """Move each planned assignment's ``next_fire_at`` on, and refresh its newest runs."""
        assignments = ASSIGNMENTS
        # Core executemany: one statement for every advanced assignment.
        if next_fires:
            session.connection().execute(
                update(assignments)
                .where(assignments.c.id == bindparam("aid"))
                .values(next_fire_at=bindparam("next"), last_fire_at=bindparam("now")),
                next_fires,
            )
        refresh(session, [fire["aid"] for fire in next_fires])

    def _start(self, run: Run, row: Row[Any], stamp: Stamp, now: datetime) -> None:
        """Record ``run`` as running from ``now``, with its claim deadline
        (:func:`~fleetcron.store.run_dispatch.deadline_of`)."""
        set_status(run, RunStatus.RUNNING)
        run.started_at = now
        run.deadline_at = deadline_of(row, run.trigger, stamp.at, self.margin)

    def _stamp(self, session: Session, now: datetime) -> Stamp:
        return take_stamp(self.guard, session, now)

    def _running_assignments(self, session: Session, assignment_ids: list[int]) -> set[int]:
        if not assignment_ids:
            return set()
        return set(
            session.scalars(
                select(Run.assignment_id).where(
                    # A row held by its rollout is still going, as far as overlap goes.
                    Run.status.in_((RunStatus.RUNNING, RunStatus.PENDING)),
                    Run.assignment_id.in_(assignment_ids),
                )
            )
        )

    @staticmethod
    def _deferred_assignments(session: Session, assignment_ids: list[int]) -> set[int]:
        if not assignment_ids:
            return set()
        return set(
            session.scalars(
                select(Run.assignment_id).where(
                    Run.status == RunStatus.QUEUED,
                    Run.trigger == DEFERRED,
                    Run.assignment_id.in_(assignment_ids),
                )
            )
        )

    def _new_run(self, row: Row[Any], slot: datetime, trigger: str, now: datetime) -> Run:
        return Run(**self._new_values(row, slot, trigger, now))

    def _new_values(
        self, row: Row[Any], slot: datetime, trigger: str, now: datetime
    ) -> dict[str, Any]:
        """A new run's columns from its assignment's row (the outcome's are still None)."""
        return {
            "assignment_id": row.assignment_id,
            "job_id": row.job_id,
            "job_name": row.job_name,
            "origin": row.origin,
            "command": row.command,
            "target_id": row.target_id,
            "target_name": row.target_name,
            "shard": row.shard,
            "scheduled_for": slot,
            "trigger": trigger,
            "attempt": 1,
            "node": self.node,
            "actor": "scheduler",
            "created_at": now,
            "job_version": row.job_version,
            "status": None,
            "reason": None,
            "skip_kind": None,
            "not_before": None,
            "finished_at": None,
            "started_at": None,
            "deadline_at": None,
        }

    def waiting(self, now: datetime, *, live: bool) -> tick_work.TickWork:
        """Which of a tick's transactions have something to do, in one read
        (:mod:`fleetcron.store.tick_work`; ``live``: this scheduler has runs in flight)."""
        state = (self.shards, self.owner)
        if self._asked_for != state:  # the shards it starts changed: build the questions anew
            self._asked_for, self._asked = state, {}
        asked = self._asked.get(live)
        if asked is None:
            asked = self._asked[live] = tick_work.question(self.node, self.mine, live=live)
        with self.db.read() as session:
            return tick_work.tick_work(session, asked, now)

    @retry_transient
    def advance_rollouts(self, now: datetime) -> RolloutStep:
        """Start the next rows of rolled-out slots, or halt their rest, as the rollout plan
        says (:func:`fleetcron.store.run_rollouts.advance`)."""
        return advance_rollouts(self, now)

    @retry_transient
    def claim_queued(self, now: datetime, limit: int = 100) -> list[Dispatch]:
        """Start queued manual runs (requested by the CLI, API or web on any node) and runs
        deferred by a blackout window whose ``not_before`` has come."""
        with self.db.session() as session:
            query = (
                select(Run).where(*tick_work.queued(now, self.mine)).order_by(Run.id).limit(limit)
            )
            if self.db.dialect == "postgresql":
                query = query.with_for_update(skip_locked=True)
            runs = session.scalars(query).all()
            if not runs:
                return []
            verdict = self.guard.verdict(session, of_shards={run.shard for run in runs})
            if not verdict.may_claim:
                # Queued runs wait for the owner; the request never runs on a non-owner.
                return []
            rows = {
                row.assignment_id: row
                for row in session.execute(
                    dispatch_query().where(Assignment.id.in_([r.assignment_id for r in runs]))
                )
            }
            stamp = self._stamp(session, now)
            old = self.guard.old_claims(session, verdict, list(rows), claimed_at=stamp.at)
            windows = in_force(session, now) if any(r.trigger == DEFERRED for r in runs) else []
            starting: list[tuple[Row[Any], Run]] = []
            for run in runs:
                row = rows.get(run.assignment_id)
                if self._queued_may_start(run, row, old, windows, now):
                    assert row is not None
                    run.node, run.command = self.node, row.command
                    run.job_version = row.job_version
                    self._start(run, row, stamp, now)
                    starting.append((row, run))
            # A run left queued changes no newest-run column (queued runs do not count,
            # store/run_newest.py): refresh only those started or skipped now, so a new
            # owner waiting for an older generation's claims does not lock and rewrite
            # the same assignments every tick until they end.
            taken_up = {run.assignment_id for run in runs if run.status != RunStatus.QUEUED}
            if taken_up:
                refresh(session, taken_up)
            claim_runs(self.guard, session, verdict, [run for _, run in starting], stamp.at)
            return with_jumps(session, [dispatch_from(row, run, stamp) for row, run in starting])

    def _queued_may_start(
        self,
        run: Run,
        row: Row[Any] | None,
        old: Mapping[int, Sequence[OldClaim]],
        windows: Sequence[blackouts.Window],
        now: datetime,
    ) -> bool:
        """Whether a queued run starts now; if not, it is recorded ``skipped`` (its job or
        target removed, its target held) or left queued (an older generation's claim, or
        a blackout window that still covers a deferred run: ``not_before`` moves on)."""
        if row is None:
            set_status(run, RunStatus.SKIPPED)
            run.finished_at = now
            run.reason = "the job or its target was removed before the run started"
            run.skip_kind = SkipKind.REMOVED
            return False
        if hold := target_hold_of(row, self.policy):
            set_status(run, RunStatus.SKIPPED)
            run.finished_at, run.reason, run.skip_kind = now, hold.reason, hold.kind
            return False
        if live_old_claims(old.get(run.assignment_id, ())):
            # Stays queued until the previous owner's claim reaches its deadline.
            return False
        if run.trigger == DEFERRED:
            subject = subject_of(row, self.policy.default_timezone)
            clear = blackouts.clear_at(windows, subject, now)
            if clear > now:
                # A window was extended, or another one opened: wait for it too.
                run.not_before = clear
                return False
        return True

    def start_retry(self, previous: Dispatch, now: datetime) -> Dispatch | None:
        """Record the next attempt of a failed run as running; None if it cannot start."""
        with self.db.session() as session:
            verdict = self.guard.verdict(session, of_shards={previous.shard})
            if not verdict.may_claim:
                return None
            row = session.execute(
                dispatch_query().where(
                    Assignment.id == previous.assignment_id, Assignment.enabled.is_(True)
                )
            ).first()
            # The target's shard never changes: a row of another shard is not this run's.
            if row is None or row.shard != previous.shard or target_hold_of(row, self.policy):
                return None
            if live_old_claims(
                self.guard.old_claims(session, verdict, [row.assignment_id]).get(
                    row.assignment_id, ()
                )
            ):
                return None
            stamp = self._stamp(session, now)
            run = self._new_run(row, previous.scheduled_for or now, "retry", now)
            run.attempt = previous.attempt + 1
            self._start(run, row, stamp, now)
            session.add(run)
            refresh(session, [row.assignment_id])
            claim_runs(self.guard, session, verdict, [run], stamp.at)
            return with_jumps(session, [dispatch_from(row, run, stamp)])[0]

    # -- finishing --------------------------------------------------------------------

    @retry_transient
    def finish(self, results: Sequence[tuple[int, ExecResult]]) -> list[int]:
        """Record the outcome of finished runs, in one transaction; returns the refused ones.

        Only runs whose claim is still live are written (standalone: all), and only while
        still ``running``: a run already closed as lost, interrupted or fenced keeps that
        status. A refused write is recorded in ``fenced_writes``.
        """
        if not results:
            return []
        with self.db.session() as session:
            run_ids = [run_id for run_id, _ in results]
            verdict = self._verdict_writing(session, run_ids)
            live = self.guard.live(session, verdict, run_ids)
            refused = [run_id for run_id, _ in results if run_id not in live]
            for run_id in refused:
                session.add(
                    FencedWrite(
                        at=self._now(),
                        node_id=self.node,
                        run_id=run_id,
                        reason=f"completion refused: {verdict.reason}; the claim is not live",
                    )
                )
            params = [_finish_params(rid, result) for rid, result in results if rid in live]
            if not params:
                return refused
            update_rows(session.connection(), _FINISH, params)
            run_newest.finished(session, live)
            self.guard.release(session, sorted(live))
        return refused

    def close_lost(self, now: datetime, held: Collection[int] = ()) -> int:
        """Runs of this node left ``running`` past their deadline become ``lost``: a crash
        left them (the process that ran them is gone; the deadline proves their commands
        are). ``held`` are the runs this process still runs or has yet to record."""
        with self.db.session() as session:
            past = session.scalars(
                select(Run.id).where(
                    Run.node == self.node,
                    Run.status == RunStatus.RUNNING,
                    Run.deadline_at < now,
                )
            ).all()
            lost = sorted(set(past) - set(held))
            if not lost:
                return 0
            session.execute(
                update(Run)
                .where(Run.id.in_(lost), Run.status == RunStatus.RUNNING)
                .values(
                    status=moved(RunStatus.RUNNING, RunStatus.LOST),
                    finished_at=now,
                    reason="the scheduler stopped while this run was going; its outcome is unknown",
                )
            )
            refresh_for_runs(session, lost)
            return len(lost)

    def _verdict_writing(self, session: Session, run_ids: Collection[int]) -> Verdict:
        """The guard's verdict for a transaction that writes the runs ``run_ids``: over
        their shards' rows only."""
        return self.guard.verdict(session, of_shards=shards_of_runs(self.guard, session, run_ids))

    @retry_transient
    def interrupt(self, run_ids: Collection[int], now: datetime, reason: str) -> None:
        """Record cancelled runs as ``interrupted``. Their claims stay live until their
        deadline: cancelling asked the executor to kill the command, but over SSH that kill
        can fail unseen (a broken connection), and only the deadline, enforced by the
        watchdog on the target, proves the command is gone; a handoff or a new owner waits
        for it. Maintenance expires the claims then."""
        ids = list(run_ids)
        if not ids:
            return
        with self.db.session() as session:
            verdict = self._verdict_writing(session, ids)
            live = sorted(self.guard.live(session, verdict, ids))
            session.execute(
                update(Run)
                .where(Run.id.in_(live), Run.status == RunStatus.RUNNING)
                .values(
                    status=moved(RunStatus.RUNNING, RunStatus.INTERRUPTED),
                    finished_at=now,
                    reason=reason,
                )
            )
            refresh_for_runs(session, live)

    # -- live runs and stops ----------------------------------------------------------

    @retry_transient
    def cancel(self, stopped: Sequence[tuple[int, ExecResult, str]]) -> list[int]:
        """Record runs an operator stopped (``(run id, what the executor reported, who)``)
        as ``cancelled``, with the output they printed until then, in one transaction;
        returns the refused ones (claim no longer live, as in :meth:`finish`)."""
        if not stopped:
            return []
        with self.db.session() as session:
            run_ids = [run_id for run_id, _, _ in stopped]
            verdict = self._verdict_writing(session, run_ids)
            live = self.guard.live(session, verdict, run_ids)
            refused = [run_id for run_id, _, _ in stopped if run_id not in live]
            for run_id in refused:
                session.add(
                    FencedWrite(
                        at=self._now(),
                        node_id=self.node,
                        run_id=run_id,
                        reason=f"cancel refused: {verdict.reason}; the claim is not live",
                    )
                )
            cancelled = moved(RunStatus.RUNNING, RunStatus.CANCELLED)
            for run_id, result, by in stopped:
                if run_id not in live:
                    continue
                values = _finish_params(run_id, result)
                del values["rid"]
                values.update(
                    status=cancelled,
                    exit_code=None,
                    reason=f"stopped by {by}",
                    stop_requested_by=func.coalesce(Run.stop_requested_by, by),
                    stop_requested_at=func.coalesce(Run.stop_requested_at, result.finished_at),
                    live_output=None,
                    live_bytes=None,
                    live_at=None,
                )
                session.execute(
                    update(Run)
                    .where(Run.id == run_id, Run.status == RunStatus.RUNNING)
                    .values(**values)
                )
            refresh_for_runs(session, live)
            self.guard.release(session, sorted(live))
        return refused

    def stop_requests(self) -> dict[int, str]:
        """The stops asked for (on any node, by the CLI or the web) of this node's running
        runs: run id -> who asked."""
        with self.db.read() as session:
            rows = session.execute(
                select(Run.id, Run.stop_requested_by).where(*tick_work.stop_asked(self.node))
            ).all()
        return {row.id: row.stop_requested_by or "someone" for row in rows}

    def write_live(self, snapshots: Sequence[tuple[int, str, int]], now: datetime) -> None:
        """Store the tail of running runs' output (``(run id, text, bytes so far)``) in one
        transaction, for readers in other processes; only runs still ``running`` whose
        claim is live are written."""
        if not snapshots:
            return
        with self.db.session() as session:
            run_ids = [run_id for run_id, _, _ in snapshots]
            verdict = self._verdict_writing(session, run_ids)
            live = self.guard.live(session, verdict, run_ids)
            params = [
                {"rid": run_id, "text": text, "bytes": total, "at": now}
                for run_id, text, total in snapshots
                if run_id in live
            ]
            if not params:
                return
            session.connection().execute(
                update(RUNS)
                .where(and_(RUNS.c.id == bindparam("rid"), RUNS.c.status == RunStatus.RUNNING))
                .values(
                    live_output=bindparam("text"),
                    live_bytes=bindparam("bytes"),
                    live_at=bindparam("at"),
                ),
                params,
            )


def _insert_runs(session: Session, rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], int]:
    """Insert the run ``rows`` with one statement; their ids by slot key (assignment,
    slot, attempt: unique, so a claim's rows come back whatever order the database
    returns them in)."""
    if not rows:
        return {}
    inserted = insert_returning(
        session.connection(), RUNS, rows, ("id", "assignment_id", "scheduled_for", "attempt")
    )
    return {(aid, slot, attempt): rid for rid, aid, slot, attempt in inserted}


def _claimed(
    guard: RunGuard,
    session: Session,
    verdict: Verdict,
    *,
    stamp: Stamp,
    firing: list[tuple[Row[Any], dict[str, Any]]],
    ids: Mapping[tuple[Any, ...], int],
) -> list[Started]:
    """The guard's claims of the runs ``firing`` (inserted with ``ids``), each run's claim
    id and generation written on its row with one statement; the started runs, in order."""
    run_ids = [ids[v["assignment_id"], v["scheduled_for"], v["attempt"]] for _, v in firing]
    shards = {rid: v["shard"] for rid, (_, v) in zip(run_ids, firing, strict=True)}
    claims = guard.claim(
        session,
        verdict,
        [
            NewClaim(rid, v["deadline_at"], v["shard"])
            for rid, (_, v) in zip(run_ids, firing, strict=True)
        ],
        stamp.at,
    )
    if claims:
        update_rows(
            session.connection(),
            _CLAIMED,
            [
                {"rid": rid, "cid": cid, "gen": verdict.generation_of(shards[rid])}
                for rid, cid in claims.items()
            ],
        )
    return [
        Started(
            id=rid,
            scheduled_for=v["scheduled_for"],
            trigger=v["trigger"],
            attempt=v["attempt"],
            started_at=v["started_at"],
            deadline_at=v["deadline_at"],
            generation=verdict.generation_of(shards[rid]) if rid in claims else None,
            claim_id=claims.get(rid),
        )
        for rid, (_, v) in zip(run_ids, firing, strict=True)
    ]


#: The completion of runs still ``running``, each with its :func:`_finish_params` (the
#: statuses were checked as moves from running there); the live snapshot, for followers
#: while the run went on, is cleared: the record replaces it.
_FINISH = RowsUpdate(
    RUNS,
    "rid",
    sets={
        name: name
        for name in (
            "status",
            "exit_code",
            "stdout_head",
            "stdout_tail",
            "stdout_bytes",
            "stdout_truncated",
            "stderr_head",
            "stderr_tail",
            "stderr_bytes",
            "stderr_truncated",
            "error",
            "started_at",
            "finished_at",
            "duration_ms",
        )
    },
    where=(RUNS.c.status == RunStatus.RUNNING,),
    constants={"live_output": None, "live_bytes": None, "live_at": None},
)
#: Each claimed run's claim id and generation.
_CLAIMED = RowsUpdate(RUNS, "rid", sets={"cid": "claim_id", "gen": "generation"})


def _finish_params(run_id: int, result: ExecResult) -> dict[str, Any]:
    return {
        "rid": run_id,
        "status": moved(RunStatus.RUNNING, result.status),
        "exit_code": result.exit_code,
        "stdout_head": result.stdout.head,
        "stdout_tail": result.stdout.tail,
        "stdout_bytes": result.stdout.total_bytes,
        "stdout_truncated": result.stdout.truncated,
        "stderr_head": result.stderr.head,
        "stderr_tail": result.stderr.tail,
        "stderr_bytes": result.stderr.total_bytes,
        "stderr_truncated": result.stderr.truncated,
        "error": result.error,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "duration_ms": result.duration_ms,
    }
