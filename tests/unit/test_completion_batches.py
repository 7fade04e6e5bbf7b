"""How long a finished run waits for others to share its recording transaction
(``fleetcron.scheduler.service.gather_again``)."""

from __future__ import annotations

import pytest

from fleetcron.scheduler.service import (
    FINISH_BATCH,
    FINISH_FEW,
    FINISH_GATHER_WAITS,
    gather_again,
)


def waits_taken(arrivals: list[int], in_flight: int = 100) -> tuple[int, int]:
    """Drive the rule as the writer does: one completion, then ``arrivals[i]`` more during
    wait i (0 when the list runs out). Returns (waits taken, completions gathered)."""
    gathered, brought, waits = 1, 0, 0
    while gather_again(gathered, brought, waits, in_flight):
        brought = arrivals[waits] if waits < len(arrivals) else 0
        gathered += brought
        waits += 1
    return waits, gathered


def test_a_lone_run_in_flight_is_written_at_once() -> None:
    assert waits_taken([5, 5, 5], in_flight=1) == (0, 1)
    assert waits_taken([5, 5, 5], in_flight=2)[0] > 0  # the control: others in flight


def test_a_full_batch_is_written_at_once() -> None:
    assert not gather_again(FINISH_BATCH, 0, 0, 1_000)
    assert gather_again(FINISH_BATCH - 1, 0, 0, 1_000)


def test_the_first_wait_is_taken_even_when_nothing_has_come_yet() -> None:
    assert waits_taken([]) == (1, 1)


def test_a_trickle_keeps_gathering_up_to_the_last_wait() -> None:
    # A worker's share of a fleet: a few completions per wait.
    assert waits_taken([3] * 20) == (FINISH_GATHER_WAITS, 1 + 3 * FINISH_GATHER_WAITS)


@pytest.mark.parametrize("arrivals", [[3, 0, 3, 3], [2, 2, 0]])
def test_a_wait_that_brings_nothing_ends_the_gathering(arrivals: list[int]) -> None:
    stop = arrivals.index(0)
    assert waits_taken(arrivals) == (stop + 1, 1 + sum(arrivals[:stop]))


def test_enough_completions_are_written_without_waiting_longer() -> None:
    waits, gathered = waits_taken([FINISH_FEW, 10, 10])
    assert (waits, gathered) == (1, 1 + FINISH_FEW)
    # the control: one fewer than enough waits again
    assert waits_taken([FINISH_FEW - 2, 10, 10])[0] == 2
