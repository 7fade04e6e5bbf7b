"""Active cleanup after a change of owner: which targets are cleaned, which claims end early.

The rule: an older generation's claim stops holding its shard back only when its
target is an SSH target whose highest-generation mark now stands at the new generation
(or above) and whose scan and kill succeeded. Everything else waits for the deadline.
"""

from __future__ import annotations

from fleetcron.core.planning import (
    CleanupClaim,
    TargetCleanup,
    claims_cleared_by,
    shards_held_for_cleanup,
    targets_to_clean,
)

GEN = 3
CLAIMS = [
    CleanupClaim(claim_id=1, target_id=10, target_kind="ssh", generation=2, assignment_id=100),
    CleanupClaim(claim_id=2, target_id=10, target_kind="ssh", generation=1, assignment_id=101),
    CleanupClaim(claim_id=3, target_id=11, target_kind="ssh", generation=2, assignment_id=110),
    CleanupClaim(claim_id=4, target_id=12, target_kind="local", generation=2, assignment_id=120),
    # A claim of the new generation itself (or a newer one) is never an "old" claim.
    CleanupClaim(claim_id=5, target_id=13, target_kind="ssh", generation=3, assignment_id=130),
]


def test_only_ssh_targets_with_an_older_generations_claim_are_cleaned() -> None:
    # 12 is local: the old owner's local commands ran on its own machine, out of reach.
    # 13 holds only a claim of the current generation.
    assert targets_to_clean(CLAIMS, GEN) == [10, 11]


def test_nothing_to_clean_without_older_claims() -> None:
    assert targets_to_clean(CLAIMS, 1) == []
    assert targets_to_clean([], GEN) == []


def test_claims_on_cleaned_targets_are_cleared_and_the_others_keep_waiting() -> None:
    outcomes = [
        TargetCleanup(10, mark=3, killed=2),
        TargetCleanup(11, mark=None, error="11: connection refused"),
    ]
    assert claims_cleared_by(CLAIMS, GEN, outcomes) == [1, 2]


def test_a_target_not_reported_at_all_keeps_waiting() -> None:
    assert claims_cleared_by(CLAIMS, GEN, [TargetCleanup(11, mark=3)]) == [3]
    assert claims_cleared_by(CLAIMS, GEN, []) == []


def test_a_mark_below_the_new_generation_clears_nothing() -> None:
    """The mark is what stops a late command of the old owner: without it at the new
    generation, a kill alone proves nothing about commands that start after the scan."""
    assert claims_cleared_by(CLAIMS, GEN, [TargetCleanup(10, mark=2, killed=5)]) == []


def test_a_mark_above_the_new_generation_also_covers_the_older_claims() -> None:
    # A newer owner cleaned the target meanwhile: everything below its mark is gone too
    # (the write itself is then refused by the ownership check, not by this rule).
    assert claims_cleared_by(CLAIMS, GEN, [TargetCleanup(11, mark=4)]) == [3]


def test_a_reported_error_wins_over_a_mark() -> None:
    outcome = TargetCleanup(10, mark=3, killed=1, error="the scan failed")
    assert claims_cleared_by(CLAIMS, GEN, [outcome]) == []


def test_local_claims_are_never_cleared_even_when_their_target_id_reports_clean() -> None:
    assert claims_cleared_by(CLAIMS, GEN, [TargetCleanup(12, mark=3)]) == []


def test_claims_of_the_current_generation_are_never_cleared() -> None:
    assert claims_cleared_by(CLAIMS, GEN, [TargetCleanup(13, mark=3)]) == []


def test_shards_wait_undecided_only_while_one_of_their_targets_cleanup_is_pending() -> None:
    """Deciding during the cleanup would record the shard's slots skipped a moment before
    its wait ends; a shard whose only old claim is local (never cleaned) is decided as
    usual: it waits."""
    claims = [
        CleanupClaim(claim_id=1, target_id=10, target_kind="ssh", generation=2, shard=4),
        CleanupClaim(claim_id=2, target_id=11, target_kind="ssh", generation=2, shard=5),
        CleanupClaim(claim_id=3, target_id=12, target_kind="local", generation=2, shard=6),
        CleanupClaim(claim_id=4, target_id=13, target_kind="ssh", generation=3, shard=7),
    ]
    assert shards_held_for_cleanup(claims, GEN, {10, 11, 12, 13}) == {4, 5}
    assert shards_held_for_cleanup(claims, GEN, {11}) == {5}
    assert shards_held_for_cleanup(claims, GEN, set()) == frozenset()


def test_with_shards_a_claim_is_measured_against_its_own_shards_generation() -> None:
    # Shard 0 moved to generation 5, shard 1 is still at 2; target 20 is shard 0's, 21 shard 1's.
    claims = [
        CleanupClaim(claim_id=1, target_id=20, target_kind="ssh", generation=4, shard=0),
        CleanupClaim(claim_id=2, target_id=21, target_kind="ssh", generation=1, shard=1),
        # Generation 2 is shard 1's current one: not older, never cleared.
        CleanupClaim(claim_id=3, target_id=21, target_kind="ssh", generation=2, shard=1),
    ]
    outcomes = [TargetCleanup(20, mark=5), TargetCleanup(21, mark=2)]

    assert claims_cleared_by(claims, 5, outcomes, generations={0: 5, 1: 2}) == [1, 2]
    # Target 20's mark at 4 is below its shard's 5: not clean for it.
    assert claims_cleared_by(claims, 5, [TargetCleanup(20, mark=4)], generations={0: 5}) == []


def test_negative_control_one_generation_for_all_shards_never_clears_the_lagging_shard() -> None:
    claims = [CleanupClaim(claim_id=2, target_id=21, target_kind="ssh", generation=1, shard=1)]
    # Measured against the highest generation (5), shard 1's target cleaned at its 2 is
    # not seen as clean: its claim waits for the deadline although its target is clean.
    assert claims_cleared_by(claims, 5, [TargetCleanup(21, mark=2)]) == []
    assert claims_cleared_by(claims, 5, [TargetCleanup(21, mark=2)], generations={1: 2}) == [2]
