"""Active cleanup after a change of owner: which targets are cleaned, which claims end early.

The rule: an older generation's claim stops holding its assignment back only when its
target is an SSH target whose highest-generation mark now stands at the new generation
(or above) and whose scan and kill succeeded. Everything else waits for the deadline.
"""

from __future__ import annotations

from fleetcron.core.planning import (
    CleanupClaim,
    TargetCleanup,
    assignments_held_for_cleanup,
    claims_cleared_by,
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


def test_assignments_wait_undecided_only_while_their_targets_cleanup_is_pending() -> None:
    """Deciding during the cleanup would record the slot skipped a moment before its wait
    ends; the local assignment (never cleaned) is decided as usual: it waits."""
    assert assignments_held_for_cleanup(CLAIMS, GEN, {10, 11, 12, 13}) == {100, 101, 110}
    assert assignments_held_for_cleanup(CLAIMS, GEN, {11}) == {110}
    assert assignments_held_for_cleanup(CLAIMS, GEN, set()) == frozenset()
