"""A count read up to a cap says how many and whether there were more; a list of names
is cut to a few and the rest counted."""

from __future__ import annotations

from fleetcron.core.bounded import Bounded, named_few


def test_a_bounded_count_says_what_it_counted() -> None:
    assert [str(Bounded.of(n, 100)) for n in (0, 100, 101)] == ["0", "100", "more than 100"]
    assert [Bounded.of(n, 1000).short for n in (999, 1001)] == ["999", "1,000+"]


def test_a_few_names_are_listed_and_the_rest_counted() -> None:
    names = [f"t{n}" for n in range(5)]
    assert named_few(names, 5) == "t0, t1, t2, t3, t4"
    assert named_few(names, 2) == "t0, t1 and 3 more"
    assert named_few(names[:2], 2, total=1_502) == "t0, t1 and 1,500 more"
    assert named_few([], 3) == ""
