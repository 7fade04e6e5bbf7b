"""The pure arithmetic of the watchdog: who signals when, and when a run must not start."""

from __future__ import annotations

import pytest

from fleetcron.executors.watchdog import MIN_STEP_S, plan, split_budget, watchdog_script


def test_a_budget_is_split_into_sigterm_then_the_grace() -> None:
    assert split_budget(10.0, 5.0) == (5.0, 5.0)
    assert split_budget(30.0, 5.0) == (25.0, 5.0)


def test_a_short_budget_keeps_a_sigterm_before_the_sigkill() -> None:
    term, grace = split_budget(2.0, 5.0)
    assert (term, grace) == (1.0, 1.0)


@pytest.mark.parametrize("remaining", [1e-9, 0.001, 0.5, 3.0, 1000.0])
def test_no_step_handed_to_timeout_is_zero(remaining: float) -> None:
    # timeout(1) reads 0 as "no limit".
    term, grace = split_budget(remaining, 5.0)
    assert term >= MIN_STEP_S and grace > 0


def test_without_a_budget_the_executor_signals_first_and_the_watchdog_backs_it_up() -> None:
    steps = plan(timeout_s=10, watchdog_s=None, kill_grace_s=5, elapsed_s=0)
    assert steps is not None
    assert (steps.limit, steps.grace, steps.deadline_first) == (10, 5, False)
    # The watchdog's SIGTERM comes a little after ours, and everything is gone at 15 s.
    assert 10 < steps.term_after < 15
    assert steps.term_after + steps.kill_grace == pytest.approx(15)


def test_a_budget_shorter_than_the_timeout_sets_the_executors_own_limit() -> None:
    steps = plan(timeout_s=60, watchdog_s=8, kill_grace_s=5, elapsed_s=2)
    assert steps is not None
    assert steps.deadline_first
    assert steps.term_after + steps.kill_grace == pytest.approx(6)
    assert steps.limit == steps.term_after
    assert steps.limit + steps.grace <= 6 + 1e-9


def test_a_budget_longer_than_the_timeout_keeps_the_timeout() -> None:
    steps = plan(timeout_s=10, watchdog_s=40, kill_grace_s=5, elapsed_s=1)
    assert steps is not None
    assert (steps.limit, steps.grace, steps.deadline_first) == (10, 5, False)
    assert steps.term_after + steps.kill_grace == pytest.approx(39)


def test_a_budget_too_short_for_timeout_plus_grace_moves_the_sigterm_earlier() -> None:
    # Gone by 12 s with a 5 s grace: SIGTERM at 7 s, before the 10 s timeout.
    steps = plan(timeout_s=10, watchdog_s=12, kill_grace_s=5, elapsed_s=0)
    assert steps is not None
    assert (steps.limit, steps.grace, steps.deadline_first) == (7, 5, True)


@pytest.mark.parametrize("elapsed", [3.0, 3.5, 100.0])
def test_nothing_left_means_do_not_start(elapsed: float) -> None:
    assert plan(timeout_s=10, watchdog_s=3, kill_grace_s=5, elapsed_s=elapsed) is None


def test_the_tag_is_set_on_timeout_only_and_values_are_quoted() -> None:
    script = watchdog_script("echo hi", {"X": "a'b"}, term_after_s=1, kill_grace_s=1, generation=7)
    assert "export X='a'\"'\"'b';" in script
    assert "FLEETCRON_GENERATION=7 timeout -s TERM -k 1.000 1.000 /bin/sh -c 'echo hi' &" in script
    assert "export FLEETCRON_GENERATION" not in script
