"""A running command asks whether its claim is still live: the per-run secret and the
answer, read from the database under the same ownership rules as the guard.

The scheduler hands each run of a cluster ``FLEETCRON_CLAIM_SECRET``, an HMAC of the
run's claim id under a key derived from the master key (:func:`claim_secret`), so any
node of the installation can check it without storing anything, and a secret opens one
claim only. :func:`claim_answer` reads the claim, the ownership row's generation and the
database clock (never under the lock: asking never writes nor waits for a run write).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from typing import Final, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.crypto import MasterKey, Secret
from fleetcron.store.schema import ClusterOwnership, ExecutionClaim

CLAIM_PURPOSE: Final = "claim-check/1"
"""The purpose the claim secrets' key is derived for (:meth:`MasterKey.derive`)."""

ClaimState = Literal["live", "expired", "superseded", "finished"]


def claim_key(master: MasterKey) -> Secret:
    """The key every claim secret is computed with (one per installation)."""
    return master.derive(CLAIM_PURPOSE)


def claim_secret(key: Secret, claim_id: int) -> str:
    """The secret of claim ``claim_id`` (hex), handed to its command only."""
    return hmac.new(key.reveal(), f"claim:{int(claim_id)}".encode(), sha256).hexdigest()


def secret_matches(key: Secret, claim_id: int, presented: str) -> bool:
    """Whether ``presented`` is claim ``claim_id``'s secret (compared in constant time)."""
    return hmac.compare_digest(claim_secret(key, claim_id), presented.strip().lower())


@dataclass(frozen=True)
class ClaimAnswer:
    """What the database says of one claim now."""

    state: ClaimState
    generation: int
    claim_id: int
    deadline_at: datetime
    seconds_left: float
    reason: str


_CURRENT_GENERATION: Final = (
    select(func.max(ClusterOwnership.generation)).scalar_subquery().label("current")
)


def claim_answer(session: Session, claim_id: int, generation: int) -> ClaimAnswer | None:
    """The state of claim ``claim_id`` of ``generation``; ``None`` when there is none.

    One statement (one round trip, no ORM object): the claim's state and deadline, the
    ownership's generation and the database clock, read together."""
    row = session.execute(
        select(
            ExecutionClaim.state,
            ExecutionClaim.deadline_at,
            _CURRENT_GENERATION,
            func.clock_timestamp().label("now"),
        ).where(ExecutionClaim.id == claim_id, ExecutionClaim.generation == generation)
    ).one_or_none()
    if row is None:
        return None
    stored, deadline_at, current, now = row
    assert isinstance(now, datetime) and isinstance(deadline_at, datetime)
    left = (deadline_at - now).total_seconds()
    state, reason = _decide(stored, left, generation, current)
    return ClaimAnswer(state, generation, claim_id, deadline_at, max(left, 0.0), reason)


def _decide(
    stored: str, left: float, generation: int, current: int | None
) -> tuple[ClaimState, str]:
    if stored in ("revoked", "cleared"):
        return "superseded", f"the claim was {stored} by a change of owner"
    if current is not None and current > generation:
        return "superseded", f"ownership moved on to generation {current}"
    if stored == "done":
        return "finished", "the run was recorded as finished"
    if stored == "expired" or left <= 0:
        return "expired", "the claim's deadline has passed"
    return "live", "the claim is live"
