"""A member's decision (core/members.py): the live members' decisions, each computed on
its own from the same readings, split the shards between them (no shard wanted twice,
none left out), each within one shard of its share; on a join only the newcomer takes,
on a leave only the leaver's shards move; a member whose lease lapsed gives up all."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.core.members import (
    Decision,
    Worker,
    decide,
    member_name,
    parse_member,
    worker_shards,
)
from fleetcron.core.shards import Member, Move, capacity, place

Decider = Callable[[str, int, Sequence[Member], Mapping[int, "str | None"]], Decision]

members_st = st.lists(
    st.builds(
        Member,
        name=st.sampled_from([member_name(n, w) for n in ("aa", "bb", "cc") for w in range(3)]),
        weight=st.sampled_from([1.0, 1.0, 2.0, 0.5, 0.0]),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda m: m.name,
)
shards_st = st.integers(min_value=1, max_value=80)


def everyone(
    decider: Decider, shards: int, live: Sequence[Member], owners: Mapping[int, str | None]
) -> dict[str, Decision]:
    """Each live member's decision, computed on its own."""
    return {m.name: decider(m.name, shards, live, owners) for m in live}


def forgetful(
    me: str, shards: int, live: Sequence[Member], owners: Mapping[int, str | None]
) -> Decision:
    """The negative control: the same decision, blind to who holds what now."""
    return decide(me, shards, live, {s: None for s in owners})


@settings(max_examples=150, deadline=None)
@given(shards=shards_st, live=members_st, seed=st.integers(0, 2**16))
def test_the_live_members_decisions_split_the_shards_within_their_shares(
    shards: int, live: list[Member], seed: int
) -> None:
    rng = random.Random(seed)
    names = [m.name for m in live] + ["gone/0", None]
    owners = {s: rng.choice(names) for s in range(shards)}
    decisions = everyone(decide, shards, live, owners)

    wanted = Counter(s for d in decisions.values() for s in d.wanted)
    bounds = capacity(shards, live)
    if not bounds:  # no member with a weight: nobody takes anything (the work stops)
        assert not wanted
        return
    assert sorted(wanted) == list(range(shards)) and set(wanted.values()) == {1}
    for name, (floor, cap) in bounds.items():
        assert floor <= len(decisions[name].wanted) <= cap
    # What one member takes from another live one, that one gives to it.
    gives = {(mv.shard, mv.source, mv.destination) for d in decisions.values() for mv in d.give}
    for d in decisions.values():
        for mv in d.take:
            if mv.source in decisions:
                assert (mv.shard, mv.source, d.member) in gives


def settled(shards: int, members: Sequence[Member]) -> dict[int, str | None]:
    return dict(place(shards, members, {}))


def moved_by_others(
    decider: Decider, shards: int, members: Sequence[Member], leaver: Member
) -> list[Move]:
    """A settled cluster, then ``leaver``'s lease lapses: the moves the staying members
    decide that are not about the leaver's shards (the rule: none)."""
    owners = settled(shards, members)
    rest = [m for m in members if m != leaver]
    decisions = everyone(decider, shards, rest, owners).values()
    return [mv for d in decisions for mv in (*d.take, *d.give) if mv.source != leaver.name]


@settings(max_examples=60, deadline=None)
@given(shards=shards_st, size=st.integers(min_value=2, max_value=6))
def test_when_a_member_leaves_only_its_shards_move(shards: int, size: int) -> None:
    members = [Member(member_name("node", i)) for i in range(size)]
    shards = max(shards, size * (size - 1))
    for leaver in members:
        assert moved_by_others(decide, shards, members, leaver) == []
        # And every shard the leaver held is taken by a staying member.
        rest = [m for m in members if m != leaver]
        owners = settled(shards, members)
        taken = {mv.shard for d in everyone(decide, shards, rest, owners).values() for mv in d.take}
        assert taken == {s for s, o in owners.items() if o == leaver.name}


def test_negative_control_a_decision_blind_to_the_owners_moves_the_stayers_shards() -> None:
    members = [Member(member_name("node", i)) for i in range(5)]
    assert moved_by_others(forgetful, 64, members, members[0])


@pytest.mark.parametrize("existing", [1, 2, 3, 5])
def test_when_a_member_joins_only_it_takes_and_only_its_share(existing: int) -> None:
    members = [Member(member_name("node", i)) for i in range(existing)]
    owners = settled(64, members)
    newcomer = Member(member_name("other", 0))
    decisions = everyone(decide, 64, [*members, newcomer], owners)

    assert all(not decisions[m.name].take for m in members)
    given_up = [mv for m in members for mv in decisions[m.name].give]
    assert {mv.destination for mv in given_up} <= {newcomer.name}
    floor, cap = capacity(64, [*members, newcomer])[newcomer.name]
    taken = decisions[newcomer.name].take
    assert floor <= len(taken) <= cap and {mv.shard for mv in taken} == {
        mv.shard for mv in given_up
    }


def test_a_member_whose_lease_lapsed_or_that_drains_gives_up_every_shard() -> None:
    a, b = Member(member_name("aa", 0)), Member(member_name("bb", 0))
    owners = settled(8, [a, b])
    mine = sorted(s for s, o in owners.items() if o == a.name)

    for live in ([b], [Member(a.name, 0.0), b]):
        decision = decide(a.name, 8, live, owners)
        assert decision.wanted == frozenset() and decision.keep == ()
        assert [(mv.shard, mv.destination) for mv in decision.give] == [(s, b.name) for s in mine]
    # Nobody left to take them: given up to no one (the work of those shards stops).
    assert all(mv.destination is None for mv in decide(a.name, 8, [], owners).give)


def test_a_shard_of_a_member_that_is_gone_is_taken_from_it() -> None:
    a = Member(member_name("aa", 0))
    decision = decide(a.name, 4, [a], {0: "gone/1", 1: None, 2: a.name, 3: "gone/1"})
    assert decision.keep == (2,)
    assert [(mv.shard, mv.source) for mv in decision.take] == [
        (0, "gone/1"),
        (1, None),
        (3, "gone/1"),
    ]


def test_member_names_carry_the_node_and_the_worker() -> None:
    assert member_name("3fa9", 2) == "3fa9/2"
    assert parse_member("3fa9/2") == ("3fa9", 2)
    for bad in ("3fa9", "/2", "3fa9/x", "3fa9/"):
        with pytest.raises(ValueError, match="not a member name"):
            parse_member(bad)
    with pytest.raises(ValueError, match="worker must be 0 or more"):
        member_name("3fa9", -1)


@settings(max_examples=60, deadline=None)
@given(
    node=st.sampled_from(["aa", "bb", "0f3c"]),
    workers=st.integers(1, 8),
    extra=st.integers(0, 60),
)
def test_a_nodes_workers_split_every_shard_once_each_within_one_of_its_share(
    node: str, workers: int, extra: int
) -> None:
    shards = workers + extra
    split = worker_shards(node, workers, shards)
    assert len(split) == workers
    counted = Counter(s for part in split for s in part)
    assert sorted(counted) == list(range(shards))
    assert set(counted.values()) == {1}
    share = shards / workers
    assert all(math.floor(share) <= len(part) <= math.ceil(share) for part in split)
    assert worker_shards(node, workers, shards) == split  # the same on every start


def test_more_workers_than_shards_and_a_worker_outside_its_group_are_refused() -> None:
    with pytest.raises(ValueError, match="at least as many shards"):
        worker_shards("aa", 5, 4)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        worker_shards("aa", 0, 4)
    for index, count in ((2, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="need 0 <= index < count"):
            Worker(index, count)
    assert Worker(1, 2).name("alpha") == "alpha/1" and not Worker(1, 2).first
