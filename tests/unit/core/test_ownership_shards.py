"""The ownership rule per shard: each shard is decided on its own row, and a claim is
checked against its own shard's generation only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleetcron.coordination.claim_check import FencingToken, fencing_token, parse_token
from fleetcron.core.ownership import (
    AllShards,
    NodeRecord,
    Scope,
    ShardRow,
    Verdict,
    evaluate_shards,
)
from fleetcron.errors import InvalidInput

NODES = {
    "a": NodeRecord("a", "fp-a", "approved", False),
    "b": NodeRecord("b", "fp-b", "approved", False),
}


def rows(generations: list[int], owner: str = "a") -> list[ShardRow]:
    return [ShardRow(s, owner, g) for s, g in enumerate(generations)]


def claim_may_write(verdict: Verdict, shard: int, generation: int) -> bool:
    """The guard's completion rule, as its SQL writes it: the claim's generation is its
    own shard's (``CoordinatedGuard.live``)."""
    return shard in verdict.generations and verdict.generation_of(shard) == generation


@given(st.lists(st.integers(1, 50), min_size=2, max_size=16), st.data())
def test_moving_one_shard_refuses_only_that_shards_claims(
    generations: list[int], data: st.DataObject
) -> None:
    moved = data.draw(st.integers(0, len(generations) - 1))
    before = evaluate_shards(rows(generations), NODES, "a", "fp-a", shards=len(generations))
    after_generations = [g + 1 if s == moved else g for s, g in enumerate(generations)]
    after = evaluate_shards(rows(after_generations), NODES, "a", "fp-a", shards=len(generations))

    assert before.may_claim and after.may_claim
    for shard, generation in enumerate(generations):
        assert claim_may_write(before, shard, generation)
        assert claim_may_write(after, shard, generation) == (shard != moved)


@given(st.lists(st.integers(1, 50), min_size=2, max_size=16), st.data())
def test_negative_control_one_generation_for_all_shards_lets_a_moved_shards_claim_write(
    generations: list[int], data: st.DataObject
) -> None:
    """A rule blind to shards (one generation, shard 0's, for every claim) lets the claim of
    a moved shard write whenever its old generation equals shard 0's: the check above
    would catch it."""
    moved = data.draw(st.integers(1, len(generations) - 1))
    generations[moved] = generations[0]
    after_generations = [g + 1 if s == moved else g for s, g in enumerate(generations)]
    after = evaluate_shards(rows(after_generations), NODES, "a", "fp-a", shards=len(generations))
    blind_may_write = after.generation_of(0) == generations[moved]

    assert blind_may_write
    assert not claim_may_write(after, moved, generations[moved])


def test_a_missing_or_extra_shard_row_fails_closed_for_every_shard() -> None:
    missing = evaluate_shards(rows([1, 1, 1]), NODES, "a", "fp-a", shards=4)
    extra = evaluate_shards(rows([1, 1, 1, 1, 1]), NODES, "a", "fp-a", shards=4)

    assert missing.kind == extra.kind == "invalid"
    assert "3 ownership rows" in missing.reason and "5 ownership rows" in extra.reason


def test_an_invalid_shard_fails_closed_for_all_and_is_named() -> None:
    shards = rows([1, 1, 1])
    shards[2] = ShardRow(2, None, 1)

    verdict = evaluate_shards(shards, NODES, "a", "fp-a", shards=3)

    assert verdict.kind == "invalid" and verdict.reason.startswith("shard 2: no owner")


def test_owning_only_some_shards_claims_nothing_new() -> None:
    shards = [ShardRow(0, "a", 2), ShardRow(1, "b", 3)]

    mine = evaluate_shards(shards, NODES, "a", "fp-a", shards=2)
    theirs = evaluate_shards(
        [ShardRow(0, "b", 2), ShardRow(1, "b", 3)], NODES, "a", "fp-a", shards=2
    )

    assert mine.kind == "owner" and not mine.may_claim and dict(mine.generations) == {0: 2}
    assert theirs.kind == "standby"


def test_a_shard_whose_lease_expired_is_not_owned() -> None:
    now = datetime(2026, 3, 2, 9, tzinfo=UTC)
    fresh, gone = now + timedelta(seconds=10), now - timedelta(seconds=1)
    shards = [
        ShardRow(0, "a", 1, lease_expires_at=fresh),
        ShardRow(1, "a", 1, lease_expires_at=gone),
    ]

    verdict = evaluate_shards(shards, NODES, "a", "fp-a", shards=2, db_now=now)

    assert verdict.kind == "owner" and not verdict.may_claim
    assert dict(verdict.generations) == {0: 1}


# -- the shards of the runs a transaction writes, their rows only locked and decided ------

EVERY_MINE = AllShards(rows=64, numbered=64, mine=64)


def of_shards(
    read: list[ShardRow], only: set[int], every: AllShards | None = EVERY_MINE
) -> Verdict:
    return evaluate_shards(read, NODES, "a", "fp-a", shards=64, scope=Scope(only, every))


def test_the_shards_read_decide_and_only_their_generations_are_given() -> None:
    verdict = of_shards([ShardRow(3, "a", 2), ShardRow(40, "a", 5)], {40, 3})

    assert verdict.may_claim and dict(verdict.generations) == {3: 2, 40: 5}
    # A claim of a shard not read matches no generation: it cannot be checked as live.
    assert not claim_may_write(verdict, 7, 5)


def test_a_missing_row_of_a_shard_written_fails_closed() -> None:
    verdict = of_shards([ShardRow(3, "a", 2)], {3, 40})

    assert verdict.kind == "invalid" and "[3]" in verdict.reason


def test_negative_control_the_same_row_read_for_its_own_shard_only_owns() -> None:
    """The check above can fail: the same row, read for its own shard only, owns."""
    assert of_shards([ShardRow(3, "a", 2)], {3}).may_claim


def test_a_missing_or_extra_row_among_the_others_counted_fails_closed() -> None:
    read = [ShardRow(3, "a", 2)]
    missing = of_shards(read, {3}, AllShards(rows=63, numbered=63, mine=63))
    extra = of_shards(read, {3}, AllShards(rows=65, numbered=64, mine=65))
    unread = of_shards([], {3}, None)  # no row of the shards written: nothing counted

    assert missing.kind == extra.kind == "invalid"
    assert "63 ownership rows" in missing.reason and "65 ownership rows" in extra.reason
    assert unread.kind == "invalid"


def test_another_owner_of_an_unread_shard_leaves_claiming_to_nobody() -> None:
    verdict = of_shards([ShardRow(3, "a", 2)], {3}, AllShards(rows=64, numbered=64, mine=63))

    assert verdict.kind == "owner" and not verdict.may_claim
    assert "owns 63 of the 64 shards" in verdict.reason


def test_another_owner_of_a_shard_read_is_standby_for_it() -> None:
    verdict = of_shards([ShardRow(3, "b", 2)], {3}, AllShards(rows=64, numbered=64, mine=0))

    assert verdict.kind == "standby" and not verdict.generations


@given(st.integers(0, 4095), st.integers(0, 10**12), st.integers(0, 10**15))
def test_the_fencing_token_round_trips(shard: int, generation: int, claim: int) -> None:
    assert parse_token(fencing_token(shard, generation, claim)) == FencingToken(
        shard, generation, claim
    )


def test_the_token_of_a_command_started_before_shards_is_still_read() -> None:
    assert parse_token("3:17") == FencingToken(None, 3, 17)


def test_a_malformed_token_names_the_field_and_the_forms() -> None:
    for bad in ("", "3", "a:b", "1:2:3:4", "-1:2"):
        try:
            parse_token(bad)
        except InvalidInput as exc:
            assert exc.field == "token" and "<shard>:<generation>:<claim id>" in str(exc.allowed)
        else:
            raise AssertionError(f"{bad!r} was read as a token")


# -- the members placement: the nodes share the shards ------------------------------------

SHARED_COUNTS = AllShards(rows=64, numbered=64, mine=20)


@given(
    st.dictionaries(st.integers(0, 63), st.sampled_from(["a", "b"]), min_size=1, max_size=12),
    st.booleans(),
)
def test_shared_a_node_claims_only_when_every_shard_locked_is_its_own(
    owners: dict[int, str], shared: bool
) -> None:
    """With the members placement a node owning some shards claims for a transaction
    whose locked shards are all its own, never for one that touches another node's
    shard; it still finishes its own shards' runs there (their generations are given).
    Without ``shared`` (one owner for all), owning 20 of 64 shards claims nothing."""
    read = [ShardRow(s, o, 7) for s, o in sorted(owners.items())]
    verdict = evaluate_shards(
        read, NODES, "a", "fp-a", shards=64, scope=Scope(set(owners), SHARED_COUNTS, shared)
    )
    mine = {s for s, o in owners.items() if o == "a"}

    assert verdict.may_claim == (shared and mine == set(owners))
    if mine:
        assert verdict.kind == "owner" and set(verdict.generations) == mine
    else:
        assert verdict.kind == "standby" and not verdict.generations
    for shard, owner in owners.items():
        assert claim_may_write(verdict, shard, 7) == (owner == "a")


def test_shared_a_draining_shard_among_those_locked_claims_nothing() -> None:
    read = [ShardRow(1, "a", 3), ShardRow(2, "a", 4, draining=True)]

    both = evaluate_shards(
        read, NODES, "a", "fp-a", shards=64, scope=Scope({1, 2}, SHARED_COUNTS, True)
    )
    alone = evaluate_shards(
        read[:1], NODES, "a", "fp-a", shards=64, scope=Scope({1}, SHARED_COUNTS, True)
    )

    assert both.kind == "owner" and not both.may_claim and claim_may_write(both, 2, 4)
    assert alone.may_claim
