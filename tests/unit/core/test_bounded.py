"""A count read up to a cap says how many and whether there were more."""

from __future__ import annotations

from fleetcron.core.bounded import Bounded


def test_a_bounded_count_says_what_it_counted() -> None:
    assert [str(Bounded.of(n, 100)) for n in (0, 100, 101)] == ["0", "100", "more than 100"]
    assert [Bounded.of(n, 1000).short for n in (999, 1001)] == ["999", "1,000+"]
