"""A running command asks whether its claim is still live: the per-run secret and the
answer, read from the database under the same ownership rules as the guard.

The scheduler hands each run of a cluster ``FLEETCRON_CLAIM_SECRET``, an HMAC of the
run's claim id under a key derived from the master key (:func:`claim_secret`), so any
node of the installation can check it without storing anything, and a secret opens one
claim only. :func:`claim_answer` reads the claim, its shard's ownership row's generation
and the database clock (never under the lock: asking never writes nor waits for a run write).
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from typing import Final, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.crypto import MasterKey, Secret
from fleetcron.errors import InvalidInput
from fleetcron.store.schema import ClusterOwnership, ExecutionClaim

CLAIM_PURPOSE: Final = "claim-check/1"
"""The purpose the claim secrets' key is derived for (:meth:`MasterKey.derive`)."""

ClaimState = Literal["live", "expired", "superseded", "finished"]


TOKEN: Final = re.compile(r"(?:([0-9]{1,9}):)?([0-9]{1,18}):([0-9]{1,18})")
"""``<shard>:<generation>:<claim>``, or ``<generation>:<claim>`` as commands started by
a release before shards carry it (still read: such a command may ask during an upgrade)."""


@dataclass(frozen=True)
class FencingToken:
    """What ``FLEETCRON_FENCING_TOKEN`` says: the run's shard (None in the old form), the
    shard's generation, and the claim. Monotonic per shard: compare generations of one
    shard only."""

    shard: int | None
    generation: int
    claim_id: int

    def __str__(self) -> str:
        head = "" if self.shard is None else f"{self.shard}:"
        return f"{head}{self.generation}:{self.claim_id}"


def fencing_token(shard: int, generation: int, claim_id: int) -> str:
    """The token a run's command gets: ``<shard>:<generation>:<claim>``."""
    return str(FencingToken(shard, generation, claim_id))


def parse_token(token: str) -> FencingToken:
    """Read a fencing token in either form; ``InvalidInput`` naming the field otherwise."""
    match = TOKEN.fullmatch(token)
    if match is None:
        raise InvalidInput(
            f"not a fencing token: {token!r}",
            field="token",
            value=token,
            allowed="<shard>:<generation>:<claim id> (or <generation>:<claim id>), as in "
            "FLEETCRON_FENCING_TOKEN",
        )
    shard = int(match[1]) if match[1] is not None else None
    return FencingToken(shard, int(match[2]), int(match[3]))


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
    select(ClusterOwnership.generation)
    .where(ClusterOwnership.shard == ExecutionClaim.shard)
    .correlate(ExecutionClaim)
    .scalar_subquery()
    .label("current")
)


def claim_answer(
    session: Session, claim_id: int, generation: int, shard: int | None = None
) -> ClaimAnswer | None:
    """The state of claim ``claim_id`` of ``generation`` (and of ``shard``, when the token
    names it); ``None`` when there is none. The claim is compared with its own shard's
    generation.

    One statement (one round trip, no ORM object): the claim's state and deadline, its
    shard's generation and the database clock, read together."""
    conditions = [ExecutionClaim.id == claim_id, ExecutionClaim.generation == generation]
    if shard is not None:
        conditions.append(ExecutionClaim.shard == shard)
    row = session.execute(
        select(
            ExecutionClaim.state,
            ExecutionClaim.deadline_at,
            _CURRENT_GENERATION,
            func.clock_timestamp().label("now"),
        ).where(*conditions)
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
        return "superseded", f"ownership of its shard moved on to generation {current}"
    if stored == "done":
        return "finished", "the run was recorded as finished"
    if stored == "expired" or left <= 0:
        return "expired", "the claim's deadline has passed"
    return "live", "the claim is live"
