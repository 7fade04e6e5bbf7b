"""A running command asks whether its claim is still live (``GET /api/v1/claims/{token}``).

Authenticated by the run's own secret (``FLEETCRON_CLAIM_SECRET``,
:func:`fleetcron.coordination.claim_check.claim_secret`), which opens this one claim and
nothing else; no user, no role. The answer is read from the database under the ownership
rules of the guard: ``live`` only while the claim is live, its deadline (database clock)
is ahead and the ownership has not moved past its generation. Reading writes nothing and
audits nothing: it changes no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetcron.app import App
from fleetcron.coordination.claim_check import (
    ClaimState,
    claim_answer,
    claim_key,
    parse_token,
    secret_matches,
)
from fleetcron.crypto import Secret
from fleetcron.errors import AuthenticationFailed, NotFound


@dataclass(frozen=True)
class ClaimView:
    """What a command is told of its claim."""

    state: ClaimState
    live: bool
    token: str
    deadline_at: datetime
    seconds_left: float
    reason: str


def secrets_key(app: App) -> Secret:
    """The key the scheduler computes its runs' ``FLEETCRON_CLAIM_SECRET`` with."""
    return claim_key(app.master_key)


def claim_status(app: App, token: str, presented: str | None) -> ClaimView:
    """The state of the claim named by fencing token ``token`` (``shard:generation:claim``
    or the older ``generation:claim``).

    Raises ``InvalidInput`` (a malformed token), ``AuthenticationFailed`` (no secret, or
    not this claim's) before the database is read, ``NotFound`` (no such claim)."""
    parsed = parse_token(token)
    claim_id = parsed.claim_id
    if not presented or not secret_matches(secrets_key(app), claim_id, presented):
        raise AuthenticationFailed("send the run's FLEETCRON_CLAIM_SECRET")
    with app.db.read() as session:
        answer = claim_answer(session, claim_id, parsed.generation, parsed.shard)
    if answer is None:
        raise NotFound("claim", token, field="token")
    return ClaimView(
        state=answer.state,
        live=answer.state == "live",
        token=token,
        deadline_at=answer.deadline_at,
        seconds_left=round(answer.seconds_left, 3),
        reason=answer.reason,
    )
