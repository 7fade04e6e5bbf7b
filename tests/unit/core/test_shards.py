"""Shard placement (core/shards.py): complete, balanced, the same on every node, and
sticky: a leave or a drain moves only the leaver's shards, a join only what it needs."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.core.shards import Member, Move, capacity, moves, place, shard_of

Placer = Callable[[int, Sequence[Member], Mapping[int, str]], dict[int, str]]

members_st = st.lists(
    st.builds(
        Member,
        name=st.text(alphabet="abcdefgh", min_size=1, max_size=3),
        weight=st.sampled_from([1.0, 1.0, 2.0, 4.0, 0.5]),
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda m: m.name,
)
shards_st = st.integers(min_value=1, max_value=96)


def check_complete_and_balanced(
    shards: int, members: Sequence[Member], placed: Mapping[int, str]
) -> None:
    eligible = {m.name for m in members if m.weight > 0}
    assert sorted(placed) == list(range(shards))
    assert set(placed.values()) <= eligible
    counts = Counter(placed.values())
    for name, (floor, cap) in capacity(shards, members).items():
        assert floor <= counts[name] <= cap, (name, counts[name], floor, cap)


def leaves_moving_others(
    placer: Placer, shards: int, members: Sequence[Member]
) -> dict[str, list[Move]]:
    """Every member in turn leaves a settled placement: for each leaver, the moves that
    broke the rule (a shard of a member that stayed changed hands)."""
    settled = placer(shards, members, {})
    wrong: dict[str, list[Move]] = {}
    for leaver in members:
        rest = [m for m in members if m != leaver]
        after = placer(shards, rest, settled)
        others = [mv for mv in moves(settled, after) if mv.source != leaver.name]
        if others:
            wrong[leaver.name] = others
    return wrong


def sticky(shards: int, members: Sequence[Member], current: Mapping[int, str]) -> dict[int, str]:
    return place(shards, members, current)


def forgetful(
    shards: int, members: Sequence[Member], _current: Mapping[int, str]
) -> dict[int, str]:
    """The same rendezvous placement computed afresh, ignoring who holds what."""
    return place(shards, members, {})


@settings(max_examples=150, deadline=None)
@given(shards=shards_st, members=members_st, seed=st.integers(0, 2**16))
def test_every_shard_has_one_eligible_owner_within_one_of_its_share(
    shards: int, members: list[Member], seed: int
) -> None:
    rng = random.Random(seed)
    names = [m.name for m in members] + ["gone"]
    current = {s: rng.choice(names) for s in range(shards) if rng.random() < 0.7}
    if all(m.weight <= 0 for m in members):
        assert place(shards, members, current) == {}
        return
    check_complete_and_balanced(shards, members, place(shards, members, current))


@settings(max_examples=100, deadline=None)
@given(shards=shards_st, members=members_st)
def test_the_placement_is_the_same_whatever_the_order_and_settles_at_once(
    shards: int, members: list[Member]
) -> None:
    first = place(shards, members, {})
    assert place(shards, list(reversed(members)), {}) == first
    assert place(shards, members, first) == first


@settings(max_examples=100, deadline=None)
@given(
    shards=shards_st,
    size=st.integers(min_value=2, max_value=8),
)
def test_a_member_that_leaves_moves_only_its_own_shards(shards: int, size: int) -> None:
    """Equal members and at least size*(size-1) shards: a leaver's share spread over the
    others lifts each of them by a whole shard, so nothing else moves."""
    members = [Member(f"m{i}") for i in range(size)]
    shards = max(shards, size * (size - 1))
    assert leaves_moving_others(sticky, shards, members) == {}


@settings(max_examples=100, deadline=None)
@given(shards=shards_st, members=members_st.filter(lambda ms: len(ms) >= 2))
def test_with_unequal_weights_a_leave_moves_at_most_one_more_shard_per_member_for_rounding(
    shards: int, members: list[Member]
) -> None:
    for leaver, wrong in leaves_moving_others(sticky, shards, members).items():
        per_member = Counter(mv.destination for mv in wrong)
        assert all(n <= 1 for n in per_member.values()), (leaver, wrong)


def test_negative_control_a_placement_computed_afresh_moves_other_members_shards() -> None:
    members = [Member(n) for n in "abcde"]
    wrong = leaves_moving_others(forgetful, 64, members)
    assert wrong, "the leave checker found nothing wrong with a placement that forgets"


def test_a_draining_member_hands_over_exactly_what_a_leaving_one_would() -> None:
    members = [Member(n) for n in "abcd"]
    settled = place(64, members, {})
    drained = place(64, [*members[:3], Member("d", 0.0)], settled)
    left = place(64, members[:3], settled)
    assert drained == left
    assert {mv.source for mv in moves(settled, drained)} == {"d"}


@pytest.mark.parametrize("existing", [1, 2, 3, 5, 7])
def test_a_joining_member_takes_its_share_and_nothing_else_moves(existing: int) -> None:
    members = [Member(f"m{i}") for i in range(existing)]
    settled = place(64, members, {})
    newcomer = Member("new")
    after = place(64, [*members, newcomer], settled)
    moved = moves(settled, after)
    floor, cap = capacity(64, [*members, newcomer])["new"]
    assert all(mv.destination == "new" for mv in moved), moved
    assert floor <= len(moved) <= cap


def test_weights_divide_the_shards_by_cores() -> None:
    placed = place(64, [Member("big", 3.0), Member("small", 1.0)], {})
    assert Counter(placed.values()) == {"big": 48, "small": 16}


def test_shard_of_is_stable_and_spreads_targets_evenly() -> None:
    assert [shard_of(i, 64) for i in range(1, 6)] == [shard_of(i, 64) for i in range(1, 6)]
    assert {shard_of(i, 1) for i in range(100)} == {0}
    counts = Counter(shard_of(i, 64) for i in range(1, 20_001))
    assert len(counts) == 64
    assert max(counts.values()) < 1.2 * 20_000 / 64
    assert min(counts.values()) > 0.8 * 20_000 / 64


def test_a_shard_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="shards must be at least 1, got 0"):
        shard_of(3, 0)
    with pytest.raises(ValueError, match="shards must be at least 1, got 0"):
        place(0, [Member("a")], {})
