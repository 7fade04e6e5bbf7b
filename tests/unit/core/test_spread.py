"""A job's spread: each target's stable offset inside the window, and its bound with jitter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from fleetcron.core import validation as v
from fleetcron.core.job_options import BY_KEY, check_job
from fleetcron.core.start_window import jitter_offset, spread_offset, start_window, window_words
from fleetcron.errors import InvalidInput

FLEET = range(1, 5001)


def evenly_spread(offsets: Sequence[float], window: int, buckets: int = 10) -> bool:
    """Whether ``offsets`` fill each tenth of ``window`` with 80-120 % of their share."""
    counts = Counter(min(int(o / window * buckets), buckets - 1) for o in offsets)
    share = len(offsets) / buckets
    return all(0.8 * share <= counts[b] <= 1.2 * share for b in range(buckets))


def test_an_offset_is_the_same_every_time_for_the_same_job_and_target() -> None:
    first = [spread_offset(7, target, 600) for target in range(200)]

    assert first == [spread_offset(7, target, 600) for target in range(200)]


def test_each_target_has_its_own_offset_and_each_job_its_own_order() -> None:
    one = [spread_offset(7, target, 600) for target in range(200)]
    other = [spread_offset(8, target, 600) for target in range(200)]

    assert len(set(one)) > 190
    assert one != other


def test_an_offset_lies_inside_the_window_in_millisecond_steps() -> None:
    for window in (1, 7, 600, v.MAX_JITTER_S):
        offsets = [spread_offset(3, target, window) for target in range(2000)]
        assert all(0 <= o < window for o in offsets), window
        assert all(abs(o * 1000 - round(o * 1000)) < 1e-6 for o in offsets), window


def test_a_fleet_falls_evenly_over_the_window() -> None:
    assert evenly_spread([spread_offset(42, t, 300) for t in FLEET], 300)
    assert evenly_spread([spread_offset(1, t, 3600) for t in FLEET], 3600)


def test_the_evenness_check_fails_for_a_fleet_bunched_in_half_the_window() -> None:
    # negative control: the same offsets squeezed into the first half are not even
    bunched = [spread_offset(42, t, 300) / 2 for t in FLEET]

    assert not evenly_spread(bunched, 300)


def test_no_spread_is_no_offset() -> None:
    assert {spread_offset(5, target, 0) for target in range(50)} == {0.0}


def test_the_spread_offset_is_not_the_jitter_offset() -> None:
    spread = [spread_offset(9, target, 60) for target in range(100)]
    jitter = [jitter_offset(9, target, 60) for target in range(100)]

    assert sum(1 for s, j in zip(spread, jitter, strict=True) if s == j) < 5


def test_a_start_waits_its_spread_offset_plus_its_jitter() -> None:
    for target in range(100):
        delay = start_window(11, target, jitter_s=30, spread_s=120).delay_s
        assert delay == spread_offset(11, target, 120) + jitter_offset(11, target, 30)
        assert 0 <= delay < 150


def test_without_spread_a_start_waits_what_jitter_alone_gave() -> None:
    for target in range(50):
        assert start_window(11, target, jitter_s=30, spread_s=0).delay_s == jitter_offset(
            11, target, 30
        )


# --- the option ---------------------------------------------------------------------------


def test_spread_is_declared_like_jitter() -> None:
    spread, jitter = BY_KEY["spread"], BY_KEY["jitter"]

    assert (spread.name, spread.flag, spread.default) == ("spread_s", "--spread", 0)
    assert (spread.low, spread.high) == (jitter.low, jitter.high) == (0, v.MAX_JITTER_S)


def test_spread_and_jitter_together_stay_within_the_bound_of_one() -> None:
    check_job({"jitter_s": 600, "spread_s": v.MAX_JITTER_S - 600})
    with pytest.raises(InvalidInput) as caught:
        check_job({"jitter_s": 600, "spread_s": v.MAX_JITTER_S - 599})

    error = caught.value
    assert error.message == (
        f"spread: {v.MAX_JITTER_S - 599} with jitter 600 could delay a start by "
        f"{v.MAX_JITTER_S + 1} s; spread and jitter together are at most {v.MAX_JITTER_S}"
    )
    assert (error.field, error.value, error.allowed) == (
        "spread",
        v.MAX_JITTER_S - 599,
        f"0-{v.MAX_JITTER_S - 600} with jitter 600",
    )


@pytest.mark.parametrize(
    ("spread", "jitter", "words"),
    [
        (0, 0, ""),
        (120, 0, "starts within 120 s, each target at its own fixed offset"),
        (0, 30, "starts within 30 s, each target at its own jitter (fixed too)"),
        (
            120,
            30,
            "starts within 150 s, each target at its own fixed offset in 120 s plus up to 30 s "
            "of jitter (fixed too)",
        ),
    ],
)
def test_the_start_window_is_one_window_in_words(spread: int, jitter: int, words: str) -> None:
    assert window_words(spread, jitter) == words
    # The length it names is the rule's bound: no target of the job starts later.
    if words:
        latest = max(start_window(3, t, spread_s=spread, jitter_s=jitter).delay_s for t in FLEET)
        assert latest <= spread + jitter and f"within {spread + jitter} s" in words
