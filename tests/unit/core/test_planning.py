"""The pure slot planner (``core/planning.py``): which due slots fire, which are missed or
skipped and why, catch-up, the cap on missed records; jitter and retry rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetcron.core.planning import (
    AssignmentState,
    SlotOutcome,
    SlotPolicy,
    plan_assignment,
    retry_delay,
    should_retry,
)
from fleetcron.core.start_window import jitter_offset
from fleetcron.core.statuses import SkipKind
from fleetcron.cron import parse

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
EVERY_MINUTE = parse("* * * * *")
HOURLY = parse("0 * * * *")
POLICY = SlotPolicy(grace=timedelta(seconds=60), max_missed_records=3)


def state(
    *, overlap: str = "allow", catchup: str = "none", running: bool = False
) -> AssignmentState:
    return AssignmentState(T0, overlap, catchup, running)


def test_nothing_is_due_before_the_next_fire_time() -> None:
    plan = plan_assignment(EVERY_MINUTE, state(), T0 - timedelta(seconds=1), POLICY)
    assert plan.outcomes == () and plan.next_fire_at == T0


def test_a_slot_within_the_grace_fires_and_the_next_slot_follows_it() -> None:
    plan = plan_assignment(EVERY_MINUTE, state(), T0 + timedelta(seconds=30), POLICY)
    assert plan.outcomes == (SlotOutcome(T0, "fire"),)
    assert plan.next_fire_at == T0 + timedelta(minutes=1)


def test_a_slot_past_the_grace_is_missed_with_its_reason() -> None:
    plan = plan_assignment(HOURLY, state(), T0 + timedelta(minutes=5), POLICY)
    assert plan.outcomes == (
        SlotOutcome(T0, "missed", reason="scheduler was not running at this time"),
    )
    assert plan.next_fire_at == T0 + timedelta(hours=1)


def test_older_slots_are_missed_and_only_the_newest_fires() -> None:
    plan = plan_assignment(EVERY_MINUTE, state(), T0 + timedelta(minutes=2, seconds=5), POLICY)
    assert [(o.slot - T0, o.outcome) for o in plan.outcomes] == [
        (timedelta(0), "missed"),
        (timedelta(minutes=1), "missed"),
        (timedelta(minutes=2), "fire"),
    ]


def test_missed_slots_beyond_the_cap_are_summed_up_in_one_record() -> None:
    now = T0 + timedelta(minutes=9, seconds=5)  # ten due slots, the newest fires
    plan = plan_assignment(EVERY_MINUTE, state(), now, POLICY)
    missed = [o for o in plan.outcomes if o.outcome == "missed"]
    assert [o.slot - T0 for o in missed] == [timedelta(minutes=m) for m in (0, 1, 2, 8)]
    assert missed[-1].reason == (
        "scheduler was not running; 6 more slots missed after the 3 recorded one by one, "
        "up to this one"
    )
    assert plan.outcomes[-1] == SlotOutcome(T0 + timedelta(minutes=9), "fire")


def test_catch_up_latest_fires_the_newest_missed_slot_within_the_window() -> None:
    now = T0 + timedelta(hours=2, minutes=5)
    plan = plan_assignment(HOURLY, state(catchup="latest"), now, POLICY)
    assert plan.outcomes[-1] == SlotOutcome(T0 + timedelta(hours=2), "fire", "catch-up")
    assert [o.outcome for o in plan.outcomes] == ["missed", "missed", "fire"]
    # Negative control: without catch-up the same slots are all missed.
    assert {o.outcome for o in plan_assignment(HOURLY, state(), now, POLICY).outcomes} == {"missed"}


def test_catch_up_does_not_reach_past_its_window() -> None:
    policy = SlotPolicy(grace=timedelta(seconds=60), catchup_window=timedelta(minutes=30))
    plan = plan_assignment(HOURLY, state(catchup="latest"), T0 + timedelta(minutes=45), policy)
    assert [o.outcome for o in plan.outcomes] == ["missed"]


def test_overlap_forbid_skips_a_slot_while_the_previous_run_goes() -> None:
    now = T0 + timedelta(seconds=5)
    plan = plan_assignment(EVERY_MINUTE, state(overlap="forbid", running=True), now, POLICY)
    assert plan.outcomes == (
        SlotOutcome(
            T0, "skipped", "schedule", "overlap: the previous run is still going", SkipKind.OVERLAP
        ),
    )
    # Negative controls: allowed overlap, or nothing running, fires.
    for other in (state(overlap="allow", running=True), state(overlap="forbid")):
        assert plan_assignment(EVERY_MINUTE, other, now, POLICY).outcomes[0].outcome == "fire"


def test_jitter_is_deterministic_per_target_within_its_bound() -> None:
    offsets = [jitter_offset(7, target, 30) for target in range(50)]
    assert offsets == [jitter_offset(7, target, 30) for target in range(50)]
    assert all(0 <= o <= 30 for o in offsets)
    assert len(set(offsets)) > 40  # spread, not one second for the whole fleet
    assert jitter_offset(7, 1, 0) == 0.0


@pytest.mark.parametrize(("attempt", "delay"), [(1, 30.0), (2, 60.0), (3, 120.0), (0, 30.0)])
def test_retry_backoff_doubles_after_each_attempt(attempt: int, delay: float) -> None:
    assert retry_delay(attempt, 30) == delay


def test_a_run_is_retried_only_for_a_listed_status_and_within_its_retries() -> None:
    assert should_retry("failed", 1, 2, ["failed"])
    assert should_retry("failed", 2, 2, ["failed"])
    assert not should_retry("failed", 3, 2, ["failed"])
    assert not should_retry("timed_out", 1, 2, ["failed"])
