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
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from fleetcron.cron import CronSchedule

Outcome = Literal["fire", "missed", "skipped"]
Trigger = Literal["schedule", "manual", "catch-up", "retry"]


@dataclass(frozen=True)
class SlotPolicy:
    """Scheduler-wide settings that shape the outcome of a slot."""

    grace: timedelta = timedelta(seconds=60)
    catchup_window: timedelta = timedelta(hours=24)
    max_missed_records: int = 10


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


@dataclass(frozen=True)
class Plan:
    outcomes: tuple[SlotOutcome, ...]
    next_fire_at: datetime


def plan_assignment(
    schedule: CronSchedule, state: AssignmentState, now: datetime, policy: SlotPolicy
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


def _due_slots(schedule: CronSchedule, first: datetime, now: datetime, keep: int) -> _DueSlots:
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
        return SlotOutcome(slot, "skipped", trigger, "overlap: the previous run is still going")
    return SlotOutcome(slot, "fire", trigger)


def jitter_offset(job_id: int, target_id: int, jitter_s: int) -> float:
    """Deterministic delay in [0, jitter_s] seconds for one target of a bulk fire, so a fleet
    is not hit in the same second and each target keeps its own place in the spread."""
    if jitter_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"{job_id}:{target_id}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % (jitter_s * 1000 + 1)) / 1000


def retry_delay(attempt: int, backoff_s: int) -> float:
    """Exponential backoff: ``backoff_s`` after the first attempt, doubling after each."""
    return float(backoff_s * 2 ** max(attempt - 1, 0))


def should_retry(status: str, attempt: int, retries: int, retry_on: list[str]) -> bool:
    return status in retry_on and attempt <= retries
