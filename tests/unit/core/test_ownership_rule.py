"""The pure ownership rule (``core/ownership.evaluate``): only the approved, unfenced owner
named by the one ownership row at a positive generation may claim; everything uncertain
fails closed with a reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetcron.core.ownership import NodeRecord, Verdict, evaluate

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ME, OTHER = "alpha", "beta"


def nodes(**overrides: NodeRecord) -> dict[str, NodeRecord]:
    found = {
        ME: NodeRecord(ME, "fp-alpha", "approved", False),
        OTHER: NodeRecord(OTHER, "fp-beta", "approved", False),
    }
    found.update(overrides)
    return found


def row(owner: str | None = ME, generation: Any = 3, draining: bool = False) -> dict[str, Any]:
    return {"owner_node_id": owner, "generation": generation, "draining": draining}


def verdict(
    rows: list[dict[str, Any]] | None = None,
    registry: dict[str, NodeRecord] | None = None,
    fingerprint: str = "fp-alpha",
    **lease: datetime | None,
) -> Verdict:
    return evaluate(
        [row()] if rows is None else rows,
        nodes() if registry is None else registry,
        ME,
        fingerprint,
        **lease,
    )


def test_the_approved_owner_may_claim_under_its_generation() -> None:
    v = verdict()
    assert (v.kind, v.generation, v.owner, v.may_claim) == ("owner", 3, ME, True)
    assert v.reason == "this node owns the jobs"


def test_a_draining_owner_is_the_owner_but_claims_nothing_new() -> None:
    v = verdict([row(draining=True)])
    assert (v.kind, v.draining, v.may_claim) == ("owner", True, False)
    assert v.reason == "draining for a handoff: no new claims"


def test_another_owner_makes_this_node_a_standby() -> None:
    v = verdict([row(owner=OTHER, generation=4)])
    assert (v.kind, v.owner, v.generation, v.may_claim) == ("standby", OTHER, 4, False)
    assert v.reason == "beta owns the jobs (generation 4)"


@pytest.mark.parametrize(
    ("registry", "fingerprint", "reason"),
    [
        ({OTHER: NodeRecord(OTHER, "fp-beta", "approved", False)}, "fp-alpha", "not registered"),
        (nodes(alpha=NodeRecord(ME, "fp-alpha", "retired", False)), "fp-alpha", "is retired"),
        (nodes(alpha=NodeRecord(ME, "fp-alpha", "candidate", False)), "fp-alpha", "candidate"),
        (nodes(), "fp-clone", "does not match its approved fingerprint"),
        (nodes(alpha=NodeRecord(ME, "fp-alpha", "approved", True)), "fp-alpha", "was fenced"),
    ],
)
def test_a_node_that_may_not_act_is_refused(
    registry: dict[str, NodeRecord], fingerprint: str, reason: str
) -> None:
    v = verdict(registry=registry, fingerprint=fingerprint)
    assert v.kind == "refused" and not v.may_claim
    assert reason in v.reason


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([], "has 0 ownership rows, expected 1"),
        ([row(), row()], "has 2 ownership rows, expected 1"),
        ([row(generation=-1)], "generation -1 is not a whole number"),
        ([row(generation=True)], "generation True is not a whole number"),
        ([row(generation="3")], "generation '3' is not a whole number"),
        ([row(owner=None, generation=0)], "no owner has been chosen"),
        ([row(generation=0)], "generation 0, which no transfer writes"),
        ([row(owner="ghost")], "the owner ghost is not a known node"),
    ],
)
def test_a_broken_coordination_state_fails_closed(rows: list[dict[str, Any]], reason: str) -> None:
    v = verdict(rows)
    assert v.kind == "invalid" and not v.may_claim
    assert reason in v.reason


def test_an_owner_that_is_not_approved_is_invalid() -> None:
    v = verdict([row(owner=OTHER)], nodes(beta=NodeRecord(OTHER, "fp-beta", "candidate", False)))
    assert (v.kind, v.reason) == ("invalid", "the owner beta is candidate, not approved")


def test_an_owner_whose_lease_expired_is_refused_until_renewed() -> None:
    expired = verdict(lease_expires_at=NOW, db_now=NOW)
    assert expired.kind == "refused" and "lease expired" in expired.reason
    # Negative control: a lease still to run keeps the owner.
    later = verdict(lease_expires_at=NOW + timedelta(seconds=1), db_now=NOW)
    assert later.kind == "owner" and later.may_claim
