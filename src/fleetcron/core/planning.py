"""What is due, and what happens to each slot: a pure function of (assignment, now).

A *slot* is one fire time of an assignment's schedule. When the scheduler looks at an
assignment whose ``next_fire_at`` has come, every slot from ``next_fire_at`` up to now
gets exactly one outcome:

- the newest slot still within the misfire grace window **fires** (unless the job
  forbids overlap and a run is still going on that target: then it is **skipped**);
- older slots are **missed**, one record each up to a cap, then one summary record;
- with ``catchup = latest``, the newest missed slot within the catch-up window runs
  once instead (trigger ``catch-up``), as anacron would;
- a disabled assignment records nothing: pausing is not missing.

The caller writes the outcomes and the new ``next_fire_at`` in one transaction, under a
unique (assignment, slot, attempt) constraint, so a slot can never fire twice.

After a change of owner, :func:`wait_for_old_claims` adds one rule: a slot does not fire
while a claim of an older generation in the same shard has not reached its deadline (the
old owner's command may still be running until then, and in a shard at most one generation
executes at a time).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, Protocol

from fleetcron.core import blackouts
from fleetcron.core.statuses import Skip, SkipKind
from fleetcron.core.targets import TargetKind

Outcome = Literal["fire", "missed", "skipped", "deferred"]
Trigger = Literal["schedule", "manual", "catch-up", "retry", "deferred"]


class FireTimes(Protocol):
    """What planning asks of a schedule: a :class:`~fleetcron.cron.CronSchedule`, or one
    filtered by calendars (:class:`~fleetcron.core.calendars.CalendarSchedule`)."""

    def next_after(self, t: datetime) -> datetime: ...


@dataclass(frozen=True)
class SlotPolicy:
    """Scheduler-wide settings that shape the outcome of a slot."""

    grace: timedelta = timedelta(seconds=60)
    catchup_window: timedelta = timedelta(hours=24)
    max_missed_records: int = 10
    #: The ``allow_local_targets`` setting (the scheduler passes it; tools and tests that
    #: build a store by hand keep local targets running).
    allow_local_targets: bool = True
    #: The default zone of new jobs (the ``timezone`` setting): where a job in the
    #: ``target`` zone fires on a target whose zone is unknown.
    default_timezone: str = "UTC"
    #: Whether local commands run with the scheduler's privileges (no ``local_run_as``), and
    #: the least role that may write one (``local_job_role``): the local gate at dispatch
    #: (``core/local_clearance.py``). Tools and tests that build a store by hand leave it off.
    local_privileged: bool = False
    local_job_role: str = "operator"


@dataclass(frozen=True)
class AssignmentState:
    """What planning needs to know about one assignment, as plain data."""

    next_fire_at: datetime
    overlap: Literal["allow", "forbid"] | str
    catchup: Literal["none", "latest"] | str
    running: bool


@dataclass(frozen=True)
class SlotOutcome:
    slot: datetime
    outcome: Outcome
    trigger: Trigger = "schedule"
    reason: str | None = None
    skip_kind: SkipKind | None = None
    """Why a ``skipped`` outcome is skipped (the ``runs.skip_kind`` column); None otherwise."""
    not_before: datetime | None = None
    """A ``deferred`` outcome's start: the end of the blackout windows covering its slot."""


@dataclass(frozen=True)
class Plan:
    outcomes: tuple[SlotOutcome, ...]
    next_fire_at: datetime


def plan_assignment(
    schedule: FireTimes, state: AssignmentState, now: datetime, policy: SlotPolicy
) -> Plan:
    """Outcomes of every slot from ``state.next_fire_at`` up to ``now``, oldest first."""
    due = _due_slots(schedule, state.next_fire_at, now, policy.max_missed_records)
    if due.total == 0:
        return Plan((), state.next_fire_at)
    firing: SlotOutcome | None = None
    if now - due.newest <= policy.grace:
        firing = _fire_or_skip(due.newest, "schedule", state)
    elif state.catchup == "latest" and now - due.newest <= policy.catchup_window:
        firing = _fire_or_skip(due.newest, "catch-up", state)
    missed_count = due.total - (1 if firing else 0)
    newest_missed = due.newest if firing is None else due.before_newest
    outcomes = _missed_records(due.oldest, missed_count, newest_missed, policy.max_missed_records)
    if firing is not None:
        outcomes.append(firing)
    return Plan(tuple(outcomes), schedule.next_after(due.newest))


@dataclass(frozen=True)
class _DueSlots:
    oldest: list[datetime]
    total: int
    newest: datetime
    before_newest: datetime | None


def _due_slots(schedule: FireTimes, first: datetime, now: datetime, keep: int) -> _DueSlots:
    """Count the slots in [first, now], keeping the oldest ``keep`` and the newest two."""
    oldest: list[datetime] = []
    total = 0
    newest, before_newest = first, None
    slot = first
    while slot <= now:
        total += 1
        if len(oldest) < keep:
            oldest.append(slot)
        before_newest, newest = (newest if total > 1 else None), slot
        slot = schedule.next_after(slot)
    return _DueSlots(oldest, total, newest, before_newest)


def _missed_records(
    oldest: list[datetime], missed_count: int, newest_missed: datetime | None, cap: int
) -> list[SlotOutcome]:
    """One record per missed slot up to ``cap``, then one summary at the newest missed slot."""
    reason = "scheduler was not running at this time"
    records = [
        SlotOutcome(slot, "missed", reason=reason) for slot in oldest[: min(cap, missed_count)]
    ]
    if missed_count > cap and newest_missed is not None:
        records.append(
            SlotOutcome(
                newest_missed,
                "missed",
                reason=f"scheduler was not running; {missed_count - cap} more slots missed "
                f"after the {cap} recorded one by one, up to this one",
            )
        )
    return records


def _fire_or_skip(slot: datetime, trigger: Trigger, state: AssignmentState) -> SlotOutcome:
    if state.overlap == "forbid" and state.running:
        return SlotOutcome(
            slot, "skipped", trigger, "overlap: the previous run is still going", SkipKind.OVERLAP
        )
    return SlotOutcome(slot, "fire", trigger)


@dataclass(frozen=True)
class BlackoutState:
    """What the blackout rule needs for one assignment: the windows in force, whose they
    are (:class:`~fleetcron.core.blackouts.Subject`), the job's ``on_blackout`` and whether
    a deferred run of the assignment already waits."""

    windows: Sequence[blackouts.Window]
    subject: blackouts.Subject
    on_blackout: str = "skip"
    deferred_waiting: bool = False


def black_out(plan: Plan, state: BlackoutState) -> Plan:
    """The plan once blackout windows are respected: a slot that would fire inside a window
    is ``skipped`` (:attr:`SkipKind.BLACKOUT`, the reason names the window), or with
    ``on_blackout: defer`` ``deferred`` until no window covers the assignment any more
    (one deferred run per assignment at a time: later slots are skipped, saying so).
    Missed and already skipped slots are unchanged; so is ``next_fire_at``."""
    if not state.windows:
        return plan
    waiting = state.deferred_waiting
    outcomes: list[SlotOutcome] = []
    for outcome in plan.outcomes:
        hit = None
        if outcome.outcome == "fire":
            hit = blackouts.hit_at(state.windows, state.subject, outcome.slot)
        if hit is None:
            outcomes.append(outcome)
            continue
        why = blackouts.reason(hit)
        if state.on_blackout == "defer" and not waiting:
            until = blackouts.clear_at(state.windows, state.subject, outcome.slot)
            outcomes.append(
                replace(
                    outcome,
                    outcome="deferred",
                    trigger="deferred",
                    reason=f"deferred by {why}: starts at {until.isoformat()}",
                    not_before=until,
                )
            )
            waiting = True
            continue
        if state.on_blackout == "defer":
            why += "; a deferred run of this assignment already waits for the window's end"
        outcomes.append(
            replace(outcome, outcome="skipped", reason=why, skip_kind=SkipKind.BLACKOUT)
        )
    return replace(plan, outcomes=tuple(outcomes))


@dataclass(frozen=True)
class OldClaim:
    """An execution claim of an older generation in the shard of the assignment being
    planned, whose command may still be running: it ends by ``deadline_at`` (database
    clock), which is ``remaining_s`` seconds after the moment of the decision."""

    claim_id: int
    run_id: int
    node_id: str
    generation: int
    deadline_at: datetime
    remaining_s: float

    def describe(self) -> str:
        return (
            f"claim {self.claim_id} of run {self.run_id} (node {self.node_id}, generation "
            f"{self.generation}) is live until {self.deadline_at.isoformat()}"
        )


def live_old_claims(claims: Sequence[OldClaim]) -> list[OldClaim]:
    """The claims that still block: deadline not reached."""
    return [c for c in claims if c.remaining_s > 0]


def wait_for_old_claims(
    plan: Plan, claims: Sequence[OldClaim], now: datetime, policy: SlotPolicy
) -> Plan | None:
    """The plan once the previous owners' claims in this assignment's shard are respected.

    No live old claim: ``plan`` unchanged (idle assignments start at once after a
    failover). Otherwise the firing slot waits: when the last old claim reaches its
    deadline while the slot is still within its misfire grace (catch-up window for a
    catch-up), the answer is ``None`` — write nothing and leave ``next_fire_at`` as it is,
    so a later tick fires the slot late; when it would not, the slot is recorded
    ``skipped`` with a reason naming the claim and its deadline. ``now`` is the
    scheduler's clock; ``remaining_s`` is measured on the database clock.
    """
    blocking = live_old_claims(claims)
    if not blocking:
        return plan
    firing = [o for o in plan.outcomes if o.outcome == "fire"]
    if not firing:
        return plan
    fire = firing[0]
    last = max(blocking, key=lambda c: c.remaining_s)
    window = policy.catchup_window if fire.trigger == "catch-up" else policy.grace
    left_s = (fire.slot + window - now).total_seconds()
    if last.remaining_s < left_s:
        return None
    skipped = replace(
        fire,
        outcome="skipped",
        reason=f"waiting for the previous owner: {last.describe()}, past this slot's misfire grace",
        skip_kind=SkipKind.OLD_CLAIM,
    )
    return replace(plan, outcomes=tuple(skipped if o is fire else o for o in plan.outcomes))


@dataclass(frozen=True)
class CleanupClaim:
    """An unfinished claim of an older generation, with the target its command runs on:
    the input of active cleanup after a change of owner."""

    claim_id: int
    target_id: int
    target_kind: str
    generation: int
    assignment_id: int = 0
    #: The claim's shard (its target's): older than that shard's generation.
    shard: int = 0


def generation_of_shard(
    claim: CleanupClaim, generation: int, generations: Mapping[int, int] | None
) -> int:
    """The new owner's generation of the claim's shard (``generation`` when the shards'
    generations are not given: one for all)."""
    return generations.get(claim.shard, generation) if generations else generation


def shards_held_for_cleanup(
    claims: Sequence[CleanupClaim], generation: int, pending_targets: Collection[int]
) -> frozenset[int]:
    """The shards not to plan while the cleanup of one of their targets is still under
    way: an older claim in them may be cleared in a moment, so deciding now would record
    the shard's slots ``skipped`` (waiting for the deadline) a second before the wait ends.
    The cleanup's per-target time limit bounds the delay; afterwards the usual rules apply."""
    return frozenset(
        c.shard
        for c in claims
        if c.target_id in pending_targets
        and c.target_kind == TargetKind.SSH
        and c.generation < generation
    )


@dataclass(frozen=True)
class TargetCleanup:
    """What active cleanup reported for one target: ``mark`` is the highest-generation
    mark now on the target when the mark was written and the scan and kill succeeded;
    ``None`` (with ``error``) when that is not known (unreachable, timed out, failed)."""

    target_id: int
    mark: int | None
    killed: int = 0
    error: str | None = None


def targets_to_clean(claims: Sequence[CleanupClaim], generation: int) -> list[int]:
    """The targets a new owner at ``generation`` asks to clean: SSH targets on which a claim
    of an older generation may still have a command running.

    Local targets are never among them: an old owner's local commands ran on the old
    owner's machine, which this node's cleanup cannot reach; they keep waiting for their
    claims' deadlines."""
    return sorted(
        {
            c.target_id
            for c in claims
            if c.target_kind == TargetKind.SSH and c.generation < generation
        }
    )


def claims_cleared_by(
    claims: Sequence[CleanupClaim],
    generation: int,
    outcomes: Sequence[TargetCleanup],
    *,
    generations: Mapping[int, int] | None = None,
) -> list[int]:
    """The claims whose wait active cleanup ends early: an older generation's claim on an SSH
    target whose mark now stands at ``generation`` or above (written before the scan) and
    whose scan and kill succeeded. From then on no command of that claim runs there, and
    none can start there (the wrapper refuses). Every other claim keeps its deadline.

    ``generations``: each shard's generation; a claim is then measured against its own
    shard's (the target's mark is that shard's mark), not one generation for all."""
    marks = {o.target_id: o.mark for o in outcomes if o.error is None and o.mark is not None}
    cleared = []
    for c in claims:
        mine = generation_of_shard(c, generation, generations)
        mark = marks.get(c.target_id)
        clean = mark is not None and mark >= mine
        if c.target_kind == TargetKind.SSH and c.generation < mine and clean:
            cleared.append(c.claim_id)
    return sorted(cleared)


def retry_delay(attempt: int, backoff_s: int) -> float:
    """Exponential backoff: ``backoff_s`` after the first attempt, doubling after each."""
    return float(backoff_s * 2 ** max(attempt - 1, 0))


def should_retry(status: str, attempt: int, retries: int, retry_on: list[str]) -> bool:
    return status in retry_on and attempt <= retries


def target_hold(
    kind: str, paused: bool, paused_reason: str | None, allow_local_targets: bool
) -> Skip | None:
    """Why a target's due slots (and queued runs and retries) must not run now, recorded
    as a ``skipped`` run; ``None`` when they may.

    A paused target keeps every assignment and its flag: pausing is maintenance, so each
    slot is recorded (unlike a disabled assignment, which records nothing)."""
    if paused:
        reason = f"target paused: {paused_reason}" if paused_reason else "target paused"
        return Skip(SkipKind.TARGET_PAUSED, reason)
    if kind == TargetKind.LOCAL and not allow_local_targets:
        return Skip(SkipKind.LOCAL_DISABLED, "local targets are disabled")
    return None
