"""Operator pins in the placement (core/shards.py ``place(pins=)``, core/members.py
``decide``, ``pin_ignored``): a pinned shard goes to its member when that member is
eligible; a pin to a member that is not (gone, drained: weight 0) is ignored and the shard
placed as any other; a new pin moves its shard and at most one other (one more for
rounding with unequal weights), and pins count
against the pinned member's capacity so the rest stays balanced; every member computing
from the same readings, pins included, gets the same placement."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.core.members import NodeStanding, decide, member_name, pin_ignored
from fleetcron.core.shards import Member, capacity, moves, place

members_st = st.lists(
    st.builds(
        Member,
        name=st.sampled_from([member_name(n, 0) for n in ("aa", "bb", "cc", "dd", "ee")]),
        weight=st.sampled_from([1.0, 1.0, 2.0, 4.0, 0.5]),
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda m: m.name,
)
shards_st = st.integers(min_value=1, max_value=96)


def random_pins(
    rng: random.Random, shards: int, members: Sequence[Member], n: int
) -> dict[int, str]:
    return {rng.randrange(shards): rng.choice(members).name for _ in range(n)}


def unpinned_within_bounds(
    shards: int, members: Sequence[Member], placed: Mapping[int, str], pins: Mapping[int, str]
) -> None:
    """Complete, and every member that is not pinned past its capacity holds at most its
    capacity: the pins count against the pinned member's share."""
    assert sorted(placed) == list(range(shards))
    counts = Counter(placed.values())
    pinned = Counter(pins.values())
    for name, (_, cap) in capacity(shards, members).items():
        assert counts[name] <= max(cap, pinned[name]), (name, counts[name], cap)


@settings(max_examples=200, deadline=None)
@given(shards=shards_st, members=members_st, seed=st.integers(0, 2**16))
def test_a_pinned_shard_goes_to_its_member_and_the_rest_stays_within_the_shares(
    shards: int, members: list[Member], seed: int
) -> None:
    rng = random.Random(seed)
    eligible = [m for m in members if m.weight > 0]
    pins = random_pins(rng, shards, eligible, rng.randint(0, 3)) if eligible else {}

    placed = place(shards, members, {}, pins)

    if eligible:
        assert all(placed[s] == m for s, m in pins.items())
        unpinned_within_bounds(shards, members, placed, pins)
        assert place(shards, members, placed, pins) == placed  # settled at once


@settings(max_examples=200, deadline=None)
@given(shards=shards_st, members=members_st, seed=st.integers(0, 2**16))
def test_a_new_pin_moves_its_shard_and_at_most_one_other(
    shards: int, members: list[Member], seed: int
) -> None:
    rng = random.Random(seed)
    eligible = [m for m in members if m.weight > 0]
    if not eligible:
        return
    pins = random_pins(rng, shards, eligible, rng.randint(0, 2))
    settled = place(shards, members, place(shards, members, {}), pins)
    shard, to = rng.randrange(shards), rng.choice(eligible).name

    after = place(shards, members, settled, {**pins, shard: to})

    moved = moves(settled, after)
    assert after[shard] == to
    # Its shard and one that gives way; with unequal weights one more for rounding.
    assert len(moved) <= (2 if len({m.weight for m in eligible}) == 1 else 3), moved
    if settled[shard] == to:
        assert moved == []  # already there: nothing moves
    else:
        assert any(mv.shard == shard for mv in moved)


def test_negative_control_a_pin_placed_afresh_moves_many_shards() -> None:
    """The bound above can fail: computing the pinned placement without the current
    owners moves far more than the pinned shard."""
    members = [Member(member_name(n, 0)) for n in ("aa", "bb", "cc", "dd")]
    settled = place(64, members[:3], {})
    settled = place(64, members, settled)  # dd joined: sticky, so not the fresh placement
    shard = next(s for s, m in settled.items() if m != members[0].name)

    afresh = place(64, members, {}, {shard: members[0].name})

    assert len(moves(settled, afresh)) > 2


def test_a_pin_to_a_member_that_is_gone_or_drains_is_ignored() -> None:
    live = [Member(member_name("aa", 0)), Member(member_name("bb", 0))]
    settled = place(16, live, {})
    gone, drained = member_name("cc", 0), Member(member_name("dd", 0), 0.0)
    pins = {3: gone, 5: drained.name}

    assert place(16, live, settled, pins) == settled
    assert place(16, [*live, drained], settled, pins) == settled
    # Negative control: the same pins to a live member are honoured.
    assert place(16, live, settled, {3: live[0].name})[3] == live[0].name
    assert place(16, live, settled, {3: live[1].name})[3] == live[1].name


def test_pins_past_a_members_capacity_are_all_honoured_and_the_rest_is_shared() -> None:
    a, b, c = (Member(member_name(n, 0)) for n in ("aa", "bb", "cc"))
    pins = dict.fromkeys(range(8), a.name)  # 8 of 12 shards: its share is 4

    placed = place(12, [a, b, c], {}, pins)

    assert Counter(placed.values()) == {a.name: 8, b.name: 2, c.name: 2}


@settings(max_examples=100, deadline=None)
@given(shards=shards_st, members=members_st, seed=st.integers(0, 2**16))
def test_every_member_deciding_from_the_same_readings_gets_one_placement(
    shards: int, members: list[Member], seed: int
) -> None:
    rng = random.Random(seed)
    eligible = [m for m in members if m.weight > 0]
    pins = random_pins(rng, shards, [*eligible, Member("gone/0")], 3) if eligible else {}
    owners = {s: rng.choice([*members, None]) for s in range(shards)}
    named = {s: m.name if m else None for s, m in owners.items()}
    shuffled = list(members)
    rng.shuffle(shuffled)

    decisions = [decide(m.name, shards, members, named, pins) for m in members]
    decisions.append(decide(members[0].name, shards, shuffled, named, dict(reversed(pins.items()))))

    assert len({tuple(sorted(d.placed.items())) for d in decisions}) == 1
    wanted = Counter(s for d in decisions[:-1] for s in d.wanted)
    assert all(n == 1 for n in wanted.values())  # no shard wanted by two members


def test_why_a_pin_is_ignored_is_said_in_the_operators_words() -> None:
    assert pin_ignored(NodeStanding("approved")) is None
    assert pin_ignored(None) == "the node is not registered"
    assert pin_ignored(NodeStanding("retired")) == "the node is retired, not approved"
    assert pin_ignored(NodeStanding("approved", fenced=True)) == "the node is fenced"
    assert pin_ignored(NodeStanding("approved", drained=True)) == "the node is drained"
    assert "not a live member" in str(pin_ignored(NodeStanding("approved", live=False)))
