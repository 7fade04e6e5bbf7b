"""Claim deadlines, watchdog budgets, self-fencing and the wait for an old owner's claims."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetcron.core.ownership import (
    CLOCK_RATE_TOLERANCE,
    START_LATENCY_S,
    claim_deadline,
    self_fence_after,
    watchdog_budget,
)
from fleetcron.core.planning import (
    AssignmentState,
    OldClaim,
    Plan,
    SlotOutcome,
    SlotPolicy,
    plan_assignment,
    wait_for_old_claims,
)
from fleetcron.cron import parse

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
POLICY = SlotPolicy(grace=timedelta(seconds=60))
EVERY_MINUTE = parse("* * * * *")


def old_claim(remaining_s: float, *, claim_id: int = 7) -> OldClaim:
    return OldClaim(
        claim_id=claim_id,
        run_id=70,
        node_id="alphanode",
        generation=1,
        deadline_at=T0 + timedelta(seconds=remaining_s),
        remaining_s=remaining_s,
    )


def due_plan(now: datetime) -> Plan:
    return plan_assignment(EVERY_MINUTE, AssignmentState(T0, "allow", "none", False), now, POLICY)


def test_the_claim_deadline_is_claim_time_plus_timeout_plus_margin() -> None:
    assert claim_deadline(T0, 30, timedelta(seconds=6)) == T0 + timedelta(seconds=36)


def test_the_watchdog_budget_is_the_claims_remaining_life_minus_clock_rate_and_latency() -> None:
    deadline = claim_deadline(T0, 30, timedelta(seconds=6))
    budget = watchdog_budget(deadline, T0, elapsed_s=2.5)
    assert budget == pytest.approx(36 * (1 - 2 * CLOCK_RATE_TOLERANCE) - 2.5 - START_LATENCY_S)
    # Even a machine whose clock runs slow by the tolerance ends the command in time.
    assert budget / (1 - CLOCK_RATE_TOLERANCE) + 2.5 * (1 + CLOCK_RATE_TOLERANCE) < 36


def test_an_exhausted_budget_is_not_positive() -> None:
    deadline = claim_deadline(T0, 3, timedelta(seconds=2))
    assert watchdog_budget(deadline, T0, elapsed_s=4.0) <= 0
    assert watchdog_budget(deadline, T0, elapsed_s=3.0) > 0


@pytest.mark.parametrize("lease_s", [0.8, 3.0, 30.0, 600.0])
def test_an_owner_fences_itself_before_its_lease_can_expire(lease_s: float) -> None:
    fence = self_fence_after(lease_s)
    assert 0 < fence < lease_s
    # A clock running slow by the tolerance still fences before the lease expires.
    assert fence * (1 + CLOCK_RATE_TOLERANCE) < lease_s


def test_with_no_old_claim_the_plan_is_unchanged() -> None:
    plan = due_plan(T0 + timedelta(seconds=1))
    assert wait_for_old_claims(plan, [], T0 + timedelta(seconds=1), POLICY) is plan


def test_an_old_claim_past_its_deadline_does_not_block() -> None:
    plan = due_plan(T0 + timedelta(seconds=1))
    assert wait_for_old_claims(plan, [old_claim(-0.1)], T0, POLICY) is plan


def test_a_slot_waits_when_the_old_claim_ends_within_the_misfire_grace() -> None:
    now = T0 + timedelta(seconds=5)
    assert wait_for_old_claims(due_plan(now), [old_claim(30)], now, POLICY) is None


def test_a_slot_is_skipped_naming_the_claim_when_the_old_claim_outlives_the_grace() -> None:
    now = T0 + timedelta(seconds=5)
    claims = [old_claim(20), old_claim(56, claim_id=9)]
    plan = wait_for_old_claims(due_plan(now), claims, now, POLICY)
    assert plan is not None
    (outcome,) = plan.outcomes
    assert outcome.outcome == "skipped" and outcome.slot == T0
    assert outcome.reason is not None
    assert "claim 9 of run 70 (node alphanode, generation 1)" in outcome.reason
    assert (T0 + timedelta(seconds=56)).isoformat() in outcome.reason
    assert plan.next_fire_at == due_plan(now).next_fire_at


def test_each_tick_decides_again_from_the_time_left_on_both_clocks() -> None:
    # Held at 09:00:10 (claim ends in 30 s, 50 s of grace left); if at 09:00:30 the claim
    # still has 35 s to go (a database clock slower than the scheduler's), only 30 s of
    # grace are left: the slot is skipped rather than waited for past its grace.
    early, late = T0 + timedelta(seconds=10), T0 + timedelta(seconds=30)
    assert wait_for_old_claims(due_plan(early), [old_claim(30)], early, POLICY) is None
    skipped = wait_for_old_claims(due_plan(late), [old_claim(35)], late, POLICY)
    assert skipped is not None
    assert [o.outcome for o in skipped.outcomes] == ["skipped"]


def test_missed_slots_are_recorded_as_usual_while_the_newest_waits() -> None:
    now = T0 + timedelta(minutes=3, seconds=2)
    plan = wait_for_old_claims(due_plan(now), [old_claim(100)], now, POLICY)
    assert plan is not None
    assert [o.outcome for o in plan.outcomes] == ["missed", "missed", "missed", "skipped"]


def test_a_plan_that_fires_nothing_is_unchanged() -> None:
    plan = Plan((SlotOutcome(T0, "missed", reason="down"),), T0 + timedelta(minutes=1))
    assert wait_for_old_claims(plan, [old_claim(100)], T0, POLICY) is plan
