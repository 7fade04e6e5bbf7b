"""The rollout plan over one slot's rows (``core/rollout.py``): waves, pauses, canaries,
the failure threshold, and what counts as a failure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from fleetcron.core.rollout import (
    Amount,
    Attempt,
    Member,
    RolloutOptions,
    parse_amount,
    parse_canary,
    plan_rollout,
    rollout_options,
    threshold,
    waves_of,
)
from fleetcron.core.statuses import RunStatus
from fleetcron.errors import InvalidInput

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
P, R, S, F = RunStatus.PENDING, RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED


def member(
    aid: int,
    *statuses: RunStatus,
    name: str | None = None,
    canary: bool = False,
    finished: datetime | None = None,
) -> Member:
    done = finished or T0 + timedelta(seconds=aid)
    return Member(
        aid,
        name or f"t{aid:02d}",
        tuple(
            Attempt(s, None if s in (P, R) else done, run_id=100 * aid + i)
            for i, s in enumerate(statuses or (P,))
        ),
        canary=canary,
    )


def fleet(n: int, status: RunStatus = P) -> list[Member]:
    return [member(i, status) for i in range(1, n + 1)]


def opts(
    batch: str | None = None,
    pause: int = 0,
    max_failures: str | None = None,
    canary: str | None = None,
) -> RolloutOptions:
    return rollout_options(batch, pause, max_failures, canary)


def ids(members: Sequence[Member]) -> tuple[int, ...]:
    return tuple(m.assignment_id for m in members)


# -- amounts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "total", "count"),
    [
        ("10", 100, 10),
        ("10%", 100, 10),
        ("10%", 5, 1),  # 0.5 rounds up
        ("10%", 11, 2),  # 1.1 rounds up
        ("33%", 3, 1),  # 0.99 rounds up to 1
        ("34%", 3, 2),  # 1.02 rounds up to 2
        ("100%", 7, 7),
        ("50", 7, 7),  # larger than the fleet: the whole fleet
        ("1", 1, 1),
        ("1%", 5000, 50),
        ("1%", 1, 1),
    ],
)
def test_amount_of_a_fleet_rounds_percentages_up_and_never_exceeds_it(
    text: str, total: int, count: int
) -> None:
    amount = parse_amount(text, field="batch")
    assert amount is not None
    assert amount.of(total) == count


def test_an_amount_of_no_targets_is_none() -> None:
    assert Amount(10).of(0) == 0
    assert Amount(10, percent=True).of(0) == 0


@pytest.mark.parametrize("text", ["0", "0%", "101%", "-1", "ten", "1.5", "%", "10%%", "1e3"])
def test_a_bad_amount_names_the_field_the_value_and_what_is_allowed(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_amount(text, field="max_failures")
    assert caught.value.field == "max_failures"
    assert caught.value.value == text
    assert "max_failures" in str(caught.value) and repr(text) in str(caught.value)
    assert caught.value.allowed is not None and "percentage" in caught.value.allowed


@pytest.mark.parametrize("text", [None, "", "  "])
def test_an_empty_amount_is_not_set(text: str | None) -> None:
    assert parse_amount(text, field="batch") is None


def test_an_integer_amount_is_a_count() -> None:
    assert parse_amount(3, field="batch") == Amount(3)
    assert str(Amount(3)) == "3" and str(Amount(10, percent=True)) == "10%"


def test_canary_is_names_or_a_selector() -> None:
    names = parse_canary("web1, web2,web1")
    assert names.names == ("web1", "web2") and not names.selector
    assert names.matches("web2", {}) and not names.matches("web3", {"role": "canary"})
    selector = parse_canary("role=canary")
    assert dict(selector.selector) == {"role": "canary"} and not selector.names
    assert selector.matches("any", {"role": "canary"}) and not selector.matches("web1", {})
    assert not parse_canary("") and not parse_canary(None)
    assert parse_canary(["a", "b"]).names == ("a", "b")


@pytest.mark.parametrize("text", ["web1,role=canary", "Web 1", "role=ca nary"])
def test_a_bad_canary_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_canary(text)
    assert caught.value.field in ("canary", "selector")


def test_pause_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        rollout_options(None, -1, None, None)
    assert caught.value.field == "batch_pause_s"
    with pytest.raises(InvalidInput):
        rollout_options(None, 86401, None, None)


def test_only_batch_max_failures_or_canary_make_a_rollout() -> None:
    assert not opts().active
    assert not opts(pause=30).active
    assert opts(batch="1").active
    assert opts(max_failures="1").active
    assert opts(canary="web1").active


# -- waves --------------------------------------------------------------------------------


def test_zero_members_is_an_empty_finished_plan() -> None:
    plan = plan_rollout([], opts(batch="2", max_failures="1", canary="a"), T0)
    assert plan.finished and plan.halt is None and plan.waves == 0


def test_one_member_starts_at_once() -> None:
    plan = plan_rollout(fleet(1), opts(batch="10%", max_failures="10%"), T0)
    assert plan.start == (1,) and plan.wait == () and plan.waves == 1


def test_batch_larger_than_the_fleet_is_one_wave() -> None:
    plan = plan_rollout(fleet(3), opts(batch="50"), T0)
    assert plan.start == (1, 2, 3) and plan.waves == 1


def test_waves_are_ordered_by_target_name_then_id_not_by_input_order() -> None:
    members = [member(5, name="c"), member(2, name="a"), member(9, name="b"), member(1, name="b")]
    assert [ids(w) for w in waves_of(members, opts(batch="2"))] == [(2, 1), (9, 5)]


def test_batch_percentage_rounds_up() -> None:
    # 25% of 10 targets is 2.5: waves of 3.
    assert [len(w) for w in waves_of(fleet(10), opts(batch="25%"))] == [3, 3, 3, 1]


def test_the_first_wave_starts_and_the_rest_wait() -> None:
    plan = plan_rollout(fleet(5), opts(batch="2"), T0)
    assert plan.start == (1, 2) and plan.wait == (3, 4, 5)
    assert plan.wave == 0 and plan.waves == 3


def test_the_next_wave_waits_while_one_of_the_current_is_running() -> None:
    members = [member(1, S), member(2, R), *fleet(4)[2:]]
    plan = plan_rollout(members, opts(batch="2"), T0 + timedelta(hours=1))
    assert plan.start == () and plan.wait == (3, 4) and plan.wave == 1


def test_the_next_wave_starts_after_the_pause_from_the_last_finish() -> None:
    last = T0 + timedelta(seconds=50)
    members = [member(1, S, finished=T0), member(2, S, finished=last), *fleet(4)[2:]]
    options = opts(batch="2", pause=30)
    early = plan_rollout(members, options, last + timedelta(seconds=29))
    assert early.start == () and early.resume_at == last + timedelta(seconds=30)
    exactly = plan_rollout(members, options, last + timedelta(seconds=30))
    assert exactly.start == (3, 4) and exactly.wait == ()


def test_without_a_pause_the_next_wave_starts_as_soon_as_the_last_one_is_done() -> None:
    members = [member(1, S), member(2, F), *fleet(3)[2:]]
    assert plan_rollout(members, opts(batch="2"), T0).start == (3,)


def test_a_wave_started_in_part_starts_its_remaining_members() -> None:
    # Options edited between two decisions: wave 0 is now (1, 2, 3), 1 and 2 already ran.
    members = [member(1, S), member(2, R), member(3), member(4)]
    plan = plan_rollout(members, opts(batch="3"), T0)
    assert plan.start == (3,) and plan.wait == (4,)


def test_a_finished_rollout_has_nothing_left() -> None:
    plan = plan_rollout(fleet(4, S), opts(batch="2", max_failures="3"), T0)
    assert plan.finished and plan.halt is None and plan.wave == plan.waves == 2


def test_without_batch_everything_not_canary_is_one_wave() -> None:
    assert [len(w) for w in waves_of(fleet(7), opts(max_failures="2"))] == [7]


# -- canaries -----------------------------------------------------------------------------


def canary_fleet(*canary_states: RunStatus, rest: int = 4) -> list[Member]:
    canaries = [
        member(100 + i, *([s] if s != P else [P]), name=f"z-canary{i}", canary=True)
        for i, s in enumerate(canary_states)
    ]
    return [*fleet(rest), *canaries]


def test_canaries_run_first_whatever_their_name_and_whatever_the_batch() -> None:
    plan = plan_rollout(canary_fleet(P, P, P), opts(batch="1", canary="x"), T0)
    assert plan.start == (100, 101, 102) and plan.wait == (1, 2, 3, 4)
    assert plan.waves == 1 + 4


def test_the_rest_waits_until_every_canary_succeeded() -> None:
    plan = plan_rollout(canary_fleet(S, R), opts(canary="x"), T0)
    assert plan.start == () and plan.wait == (1, 2, 3, 4) and plan.halt is None
    plan = plan_rollout(canary_fleet(S, S), opts(canary="x"), T0)
    assert plan.start == (1, 2, 3, 4)


@pytest.mark.parametrize(
    "status",
    [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CONNECT_ERROR, RunStatus.INTERRUPTED],
)
def test_a_canary_that_did_not_succeed_halts_all_others(status: RunStatus) -> None:
    plan = plan_rollout(canary_fleet(S, status), opts(canary="x", batch="2"), T0)
    assert plan.start == () and plan.skip == (1, 2, 3, 4)
    assert plan.halt is not None and plan.halt.cause == "canary"
    assert plan.halt.reason == (
        f"rollout halted: canary z-canary1 ended {status}; the other targets do not start"
    )


def test_a_failed_canary_halts_even_while_another_canary_is_running() -> None:
    plan = plan_rollout(canary_fleet(F, R), opts(canary="x"), T0)
    assert plan.skip == (1, 2, 3, 4) and plan.halt is not None


def test_a_canary_that_failed_and_then_succeeded_on_retry_still_halts() -> None:
    members = [*fleet(2), member(50, F, S, name="c", canary=True)]
    plan = plan_rollout(members, opts(canary="c"), T0)
    assert plan.halt is not None
    assert plan.halt.reason.startswith("rollout halted: canary c ended failed")


def test_a_canary_option_matching_no_target_halts_before_anything_runs() -> None:
    plan = plan_rollout(fleet(3), opts(canary="web9"), T0)
    assert plan.start == () and plan.skip == (1, 2, 3)
    assert plan.halt is not None and plan.halt.cause == "no_canary"
    assert "canary web9" in plan.halt.reason


def test_without_canary_option_no_member_is_a_canary_and_nothing_halts() -> None:
    assert plan_rollout(fleet(2), opts(batch="1"), T0).halt is None


# -- the failure threshold -----------------------------------------------------------------


def test_threshold_is_a_count_or_a_percentage_rounded_up_at_least_one() -> None:
    assert threshold(opts(max_failures="2"), 10) == 2
    assert threshold(opts(max_failures="10%"), 5) == 1
    assert threshold(opts(max_failures="10%"), 25) == 3
    assert threshold(opts(max_failures="20"), 3) == 3
    assert threshold(opts(), 10) is None


def test_one_failure_below_the_threshold_goes_on() -> None:
    members = [member(1, F), member(2, S), *fleet(4)[2:]]
    plan = plan_rollout(members, opts(batch="2", max_failures="2"), T0)
    assert plan.halt is None and plan.start == (3, 4)


def test_threshold_exactly_reached_halts_the_rest_with_the_reason() -> None:
    members = [
        member(1, F, name="a", finished=T0 + timedelta(seconds=2)),
        member(2, RunStatus.TIMED_OUT, name="b", finished=T0 + timedelta(seconds=1)),
        *[member(i, name=f"n{i}") for i in (3, 4, 5)],
    ]
    plan = plan_rollout(members, opts(batch="2", max_failures="2"), T0)
    assert plan.start == () and plan.wait == () and plan.skip == (3, 4, 5)
    assert plan.halt is not None and plan.halt.cause == "max_failures"
    # The failures in the order they happened.
    assert plan.halt.failed == ("b", "a")
    assert plan.halt.reason == "rollout halted: max_failures 2 reached after failures on b, a"


def test_threshold_as_a_percentage_says_how_many_targets_it_was() -> None:
    members = [member(1, F, name="a"), *fleet(10)[1:]]
    plan = plan_rollout(members, opts(batch="1", max_failures="10%"), T0)
    assert plan.halt is not None
    assert plan.halt.reason == (
        "rollout halted: max_failures 10% (1 of 10 targets) reached after failures on a"
    )
    assert len(plan.skip) == 9


def test_halting_mid_wave_leaves_running_members_alone() -> None:
    members = [member(1, F, name="a"), member(2, R), member(3)]
    plan = plan_rollout(members, opts(batch="2", max_failures="1"), T0)
    assert plan.skip == (3,) and plan.start == () and plan.halt is not None


def test_a_retried_member_counts_once_even_if_the_retry_succeeds() -> None:
    members = [member(1, F, F, F, name="a"), member(2, F, S, name="b"), *fleet(5)[2:]]
    assert plan_rollout(members, opts(batch="2", max_failures="3"), T0).halt is None
    halted = plan_rollout(members, opts(batch="2", max_failures="2"), T0)
    assert halted.halt is not None and halted.halt.failed == ("a", "b")


def test_a_failed_attempt_counts_while_its_retry_runs() -> None:
    members = [member(1, F, R, name="a"), member(2), member(3)]
    plan = plan_rollout(members, opts(batch="1", max_failures="1"), T0)
    assert plan.halt is not None and plan.skip == (2, 3)


@pytest.mark.parametrize(
    "status",
    [
        RunStatus.FAILED,
        RunStatus.TIMED_OUT,
        RunStatus.CONNECT_ERROR,
        RunStatus.LOST,
        RunStatus.FENCED,
    ],
)
def test_every_failure_status_counts(status: RunStatus) -> None:
    members = [member(1, status), member(2)]
    assert plan_rollout(members, opts(batch="1", max_failures="1"), T0).halt is not None


@pytest.mark.parametrize("status", [RunStatus.INTERRUPTED, RunStatus.SUCCEEDED, RunStatus.SKIPPED])
def test_interrupted_succeeded_and_skipped_are_not_failures(status: RunStatus) -> None:
    members = [member(1, status), member(2)]
    plan = plan_rollout(members, opts(batch="1", max_failures="1"), T0)
    assert plan.halt is None and plan.start == (2,)


def test_without_max_failures_failures_never_halt() -> None:
    members = [*fleet(3, F), member(4)]
    plan = plan_rollout(members, opts(batch="3"), T0)
    assert plan.halt is None and plan.start == (4,)


def test_a_halted_slot_with_nothing_pending_skips_nothing_more() -> None:
    members = [member(1, F), member(2, RunStatus.SKIPPED)]
    plan = plan_rollout(members, opts(batch="1", max_failures="1"), T0)
    assert plan.halt is not None and plan.skip == () and plan.finished


def test_a_long_list_of_failures_is_cut_in_the_reason() -> None:
    members = [member(i, F) for i in range(1, 31)] + [member(31)]
    plan = plan_rollout(members, opts(max_failures="30"), T0)
    assert plan.halt is not None and len(plan.halt.failed) == 30
    assert plan.halt.reason.endswith("t20 and 10 more")


def test_the_plan_depends_only_on_the_rows_not_on_their_order() -> None:
    members = [member(1, S), member(2, F), member(3), member(4), member(5)]
    options = opts(batch="2", max_failures="2")
    assert plan_rollout(members, options, T0) == plan_rollout(members[::-1], options, T0)
