"""Signed calls between the two nodes of a replicated pair, beside the identity challenge.

A call POSTs a payload signed for its purpose with the coordination secret
(:mod:`fleetcron.coordination.signing`) to a path below the other node's endpoint; the
answer must be signed for the matching response purpose and bound to the request's nonce,
so an answer recorded earlier or meant for another call is refused. Redirects are not
followed. Every failure is a :class:`~fleetcron.errors.CoordinationError` naming the
endpoint; the caller decides whether it may retry (the transfer calls are idempotent).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleetcron.coordination.identity import normalize_endpoint
from fleetcron.coordination.peer import post_envelope
from fleetcron.coordination.signing import NonceStore, sign, verify_response
from fleetcron.errors import CoordinationError

__all__ = [
    "OWNERSHIP_PATH",
    "OWNERSHIP_PURPOSE",
    "OWNERSHIP_RESPONSE",
    "TRANSFER_PATH",
    "TRANSFER_PURPOSE",
    "TRANSFER_RESPONSE",
    "TRANSFER_STATUS_PATH",
    "TRANSFER_STATUS_PURPOSE",
    "TRANSFER_STATUS_RESPONSE",
    "signed_call",
]

TRANSFER_PATH = "/api/v1/cluster/pair/transfer"
TRANSFER_PURPOSE = "cluster.pair.transfer"
TRANSFER_RESPONSE = "cluster.pair.transfer.response"
TRANSFER_STATUS_PATH = "/api/v1/cluster/pair/transfer-status"
TRANSFER_STATUS_PURPOSE = "cluster.pair.transfer-status"
TRANSFER_STATUS_RESPONSE = "cluster.pair.transfer-status.response"
OWNERSHIP_PATH = "/api/v1/cluster/pair/ownership"
OWNERSHIP_PURPOSE = "cluster.pair.ownership"
OWNERSHIP_RESPONSE = "cluster.pair.ownership.response"


def signed_call(
    endpoint: str,
    path: str,
    purpose: str,
    response_purpose: str,
    payload: Mapping[str, Any],
    *,
    secret: bytes,
    accepted: list[bytes],
    seen: NonceStore,
    now: datetime,
    timeout_s: float = 10,
) -> dict[str, Any]:
    """POST ``payload`` signed for ``purpose`` to ``endpoint + path``; return the verified
    payload of the answer (signed for ``response_purpose``, bound to this request)."""
    base = normalize_endpoint(endpoint)
    envelope = sign(secret, purpose, payload, now=now)
    response = post_envelope(base, path, envelope, timeout_s)
    try:
        return verify_response(
            response,
            request_nonce=envelope["nonce"],
            secrets=accepted,
            purpose=response_purpose,
            now=now,
            seen=seen,
        )
    except CoordinationError as exc:
        raise CoordinationError(
            f"node endpoint {base} gave no valid signed answer: {exc.message}"
        ) from exc
