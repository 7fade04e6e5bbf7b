"""Calling another node: the signed identity challenge, over plain HTTP(S) from the stdlib.

The challenger signs ``{"endpoint": <the URL it called>}`` for
:data:`CHALLENGE_PURPOSE` and POSTs it to ``<endpoint>/api/v1/cluster/identity``. The node
answers with its :class:`~fleetcron.coordination.identity.NodeIdentity`, signed for
:data:`RESPONSE_PURPOSE` and bound to the challenge's nonce, so an answer recorded earlier
or meant for another challenge is refused. A node that does not hold the cluster's secret
can neither pass the challenge nor forge the answer.

Redirects are not followed: the identity must come from the endpoint that was asked.
Every failure is a :class:`~fleetcron.errors.CoordinationError` naming the endpoint.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import datetime
from email.message import Message
from typing import IO, Any, NoReturn

from fleetcron.coordination.identity import NodeIdentity, normalize_endpoint
from fleetcron.coordination.signing import NonceStore, sign, verify_response
from fleetcron.errors import CoordinationError

__all__ = [
    "CHALLENGE_PATH",
    "CHALLENGE_PURPOSE",
    "MAX_ANSWER_BYTES",
    "RESPONSE_PURPOSE",
    "challenge",
    "post_envelope",
]

CHALLENGE_PATH = "/api/v1/cluster/identity"
"""Where a node answers identity challenges, below its endpoint."""

CHALLENGE_PURPOSE = "cluster.identity.challenge"
RESPONSE_PURPOSE = "cluster.identity.response"

MAX_ANSWER_BYTES = 64 * 1024
"""A signed identity is well under 1 KiB; a longer answer is not one."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None  # urllib then raises HTTPError with the 3xx status


_opener = urllib.request.build_opener(_NoRedirects)


def challenge(
    endpoint: str,
    *,
    secret: bytes,
    accepted: list[bytes],
    seen: NonceStore,
    now: datetime,
    timeout_s: float = 10,
) -> NodeIdentity:
    """Ask the node at ``endpoint`` who it is; return its verified identity.

    ``secret`` signs the challenge, ``accepted`` are the secrets its answer may be signed
    with, ``seen`` remembers the answer's nonce and ``now`` is the time the challenge is
    sent. ``timeout_s`` bounds the connection and each read.

    Raises :class:`~fleetcron.errors.InvalidInput` for a malformed endpoint and
    :class:`~fleetcron.errors.CoordinationError` when the node is unreachable, refuses the
    challenge, or gives an answer that is not a valid signed identity for this challenge.
    """
    base = normalize_endpoint(endpoint)
    envelope = sign(secret, CHALLENGE_PURPOSE, {"endpoint": base}, now=now)
    response = post_envelope(base, CHALLENGE_PATH, envelope, timeout_s)
    try:
        payload = verify_response(
            response,
            request_nonce=envelope["nonce"],
            secrets=accepted,
            purpose=RESPONSE_PURPOSE,
            now=now,
            seen=seen,
        )
        return NodeIdentity.from_dict(payload)
    except CoordinationError as exc:
        raise CoordinationError(
            f"node endpoint {base} gave no valid signed identity: {exc.message}"
        ) from exc


def post_envelope(base: str, path: str, envelope: Mapping[str, Any], timeout_s: float) -> Any:
    """POST a signed ``envelope`` to ``base + path`` and return the parsed JSON answer.

    The one transport of calls between nodes (the identity challenge here, the pair's calls
    in :mod:`fleetcron.coordination.peer_calls`): no redirects, a bounded answer, and every
    failure a :class:`~fleetcron.errors.CoordinationError` naming the endpoint."""
    request = urllib.request.Request(
        base + path,
        data=json.dumps(envelope).encode("utf-8"),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with _opener.open(request, timeout=timeout_s) as answer:
            body = answer.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        _refused(base, exc)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        # URLError wraps refused connections and DNS failures; a timeout while reading
        # arrives as a bare TimeoutError, a peer that does not speak HTTP as HTTPException.
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.timeout | TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
        raise CoordinationError(f"node endpoint {base} is unreachable: {reason}") from exc
    if len(body) > MAX_ANSWER_BYTES:
        raise CoordinationError(
            f"node endpoint {base} answered with more than {MAX_ANSWER_BYTES} bytes; "
            "that is not a fleetcron node"
        )
    try:
        response = json.loads(body)
    except ValueError as exc:
        raise CoordinationError(
            f"node endpoint {base} did not answer with JSON; is it a fleetcron node?"
        ) from exc
    return response


def _refused(base: str, exc: urllib.error.HTTPError) -> NoReturn:
    message = _error_message(exc)
    if exc.code == 401:
        text = f"node endpoint {base} refused the signed challenge: {message}"
    elif exc.code == 404:
        text = (
            f"node endpoint {base} has no cluster identity (HTTP 404): "
            "is it a fleetcron node started in cluster mode (FLEETCRON_CLUSTER=1)?"
        )
    elif 300 <= exc.code < 400:
        text = (
            f"node endpoint {base} redirects to {exc.headers.get('Location', '?')}; "
            "give the endpoint the node answers on directly"
        )
    else:
        text = f"node endpoint {base} answered HTTP {exc.code}: {message}"
    raise CoordinationError(text) from exc


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The message of fleetcron's JSON error body, else the HTTP reason."""
    try:
        body: Any = json.loads(exc.read(MAX_ANSWER_BYTES))
        message = body["error"]["message"]
        if isinstance(message, str) and message:
            return message[:500]
    except (ValueError, TypeError, KeyError, OSError):
        pass
    finally:
        exc.close()
    return str(exc.reason)
