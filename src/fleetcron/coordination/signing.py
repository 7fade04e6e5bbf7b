"""Signed messages between nodes: every request and response carries an HMAC envelope.

Nodes call each other's endpoints (identity challenges, handoff requests, status queries).
Each message is wrapped in an envelope signed with the cluster's coordination secret::

    {"purpose": "handoff.prepare", "payload": {...}, "nonce": "...",
     "ts": "2025-01-31T12:00:00.000000Z", "key_id": "1a2b3c4d", "sig": "..."}

``sig`` is HMAC-SHA256, base64url without padding, over the canonical JSON (sorted keys, no
spaces, UTF-8) of every other field. ``key_id`` names the secret (first 8 hex characters of
its SHA-256) so the receiver can pick it while two secrets are valid during a rotation.

:func:`verify` refuses, with :class:`CoordinationError`, an envelope that is malformed, signed
with a secret this node does not accept, badly signed, meant for another purpose, stamped
outside the clock window, or already seen. Responses carry the request's nonce so that a
response cannot be passed off as the answer to another request.

Nothing here reads the clock: ``now`` is an argument.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import json
import re
import reprlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from secrets import token_urlsafe
from typing import Any, NoReturn, Protocol

from fleetcron.errors import CoordinationError, InvalidInput

__all__ = [
    "DEFAULT_WINDOW",
    "ENVELOPE_FIELDS",
    "MIN_SECRET_BYTES",
    "NONCE_RULE",
    "PURPOSE_RULE",
    "REQUEST_NONCE",
    "ROTATION_GRACE",
    "MemoryNonceStore",
    "NonceStore",
    "accepted_secrets",
    "key_id",
    "response_for",
    "sign",
    "verify",
    "verify_response",
]

DEFAULT_WINDOW = timedelta(seconds=60)
"""How far a message's timestamp may be from the receiver's clock, either way."""

ROTATION_GRACE = timedelta(hours=24)
"""How long the previous coordination secret stays accepted after a rotation."""

MIN_SECRET_BYTES = 16
"""The shortest coordination secret accepted for signing (128 bits)."""

ENVELOPE_FIELDS = frozenset({"purpose", "payload", "nonce", "ts", "key_id", "sig"})

REQUEST_NONCE = "request_nonce"
"""The payload field of a response that names the request it answers."""

PURPOSE_RULE = "lowercase letters, digits, '.', '_' and '-', starting with a letter, at most 64"
NONCE_RULE = "16 to 128 characters of url-safe base64 (letters, digits, '-', '_')"

_PURPOSE = re.compile(r"[a-z][a-z0-9._-]{0,63}")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_KEY_ID = re.compile(r"[0-9a-f]{8}")
_SIG = re.compile(r"[A-Za-z0-9_-]{43}")  # 32 bytes in unpadded base64url
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class NonceStore(Protocol):
    """Remembers the nonces of accepted messages so that none is accepted twice."""

    def remember(self, nonce: str, ts: datetime, now: datetime) -> bool:
        """Record ``nonce`` of a message stamped ``ts``; return False if it was already seen.

        A nonce must be kept at least until ``ts`` + the verify window has passed; after
        that the timestamp check refuses a replay on its own. May raise
        :class:`CoordinationError` when it cannot decide (fail closed).
        """
        ...


class MemoryNonceStore:
    """A :class:`NonceStore` in memory, for one process.

    Nonces are forgotten once their timestamp is more than ``2 * window`` before ``now``.
    With at most ``max_entries`` kept, a flood of valid messages is refused rather than
    allowed to evict nonces early, which would open a replay.
    """

    def __init__(self, window: timedelta = DEFAULT_WINDOW, *, max_entries: int = 100_000) -> None:
        if window <= timedelta(0):
            raise InvalidInput(
                "window: must be positive", field="window", value=window, allowed="> 0"
            )
        self.retention = 2 * window
        self.max_entries = max_entries
        self._seen: dict[str, datetime] = {}
        self._by_ts: list[tuple[datetime, str]] = []

    def __len__(self) -> int:
        return len(self._seen)

    def remember(self, nonce: str, ts: datetime, now: datetime) -> bool:
        horizon = now - self.retention
        while self._by_ts and self._by_ts[0][0] < horizon:
            _, old = heapq.heappop(self._by_ts)
            del self._seen[old]
        if nonce in self._seen:
            return False
        if len(self._seen) >= self.max_entries:
            raise CoordinationError(
                f"refused coordination message: more than {self.max_entries} messages within "
                f"{self.retention}; nonces cannot be kept to detect replays"
            )
        self._seen[nonce] = ts
        heapq.heappush(self._by_ts, (ts, nonce))
        return True


def key_id(secret: bytes) -> str:
    """The public name of a secret: the first 8 hex characters of its SHA-256."""
    return hashlib.sha256(secret).hexdigest()[:8]


def sign(
    secret: bytes,
    purpose: str,
    payload: Mapping[str, Any],
    *,
    now: datetime,
    nonce: str | None = None,
) -> dict[str, Any]:
    """Return a signed envelope carrying ``payload`` for ``purpose``, stamped ``now``.

    The envelope's payload is the JSON form of ``payload`` (tuples become lists), exactly
    what the receiver will see. Raises :class:`InvalidInput` for a short secret, a bad
    purpose or nonce, a naive ``now`` or a payload that is not JSON.
    """
    _check_secret(secret)
    _check_purpose(purpose)
    if nonce is None:
        nonce = token_urlsafe(18)
    else:
        _check_nonce(nonce)
    plain = _plain_payload(payload)
    body: dict[str, Any] = {
        "purpose": purpose,
        "payload": plain,
        "nonce": nonce,
        "ts": _aware(now, "now").astimezone(UTC).strftime(_TS_FORMAT),
        "key_id": key_id(secret),
    }
    body["sig"] = _signature(secret, _canonical(body))
    return body


def verify(
    envelope: Mapping[str, Any],
    *,
    secrets: Sequence[bytes],
    purpose: str,
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
    seen: NonceStore,
) -> dict[str, Any]:
    """Check a signed envelope and return its payload.

    Raises :class:`CoordinationError` when the envelope is malformed, its key id names none
    of ``secrets``, its signature is wrong, its purpose is not ``purpose``, its timestamp is
    more than ``window`` away from ``now`` either way, or ``seen`` already holds its nonce.
    The nonce is recorded only once everything else has passed, so unsigned garbage cannot
    fill the store. ``seen`` must keep nonces for at least ``window``.
    """
    _aware(now, "now")
    if window <= timedelta(0):
        raise InvalidInput("window: must be positive", field="window", value=window, allowed="> 0")
    if not secrets:
        _refuse("no coordination secret is configured on this node")
    ts = _check_shape(envelope)
    candidates = [secret for secret in secrets if key_id(secret) == envelope["key_id"]]
    if not candidates:
        _refuse(
            f"unknown key id {envelope['key_id']!r}: not signed with a coordination secret "
            "this node accepts (was the secret rotated, or not yet replicated here?)"
        )
    body = {name: envelope[name] for name in ENVELOPE_FIELDS if name != "sig"}
    try:
        message = _canonical(body)
    except (TypeError, ValueError, RecursionError):
        _refuse("malformed envelope: the payload is not a JSON object")
    expected = [_signature(secret, message) for secret in candidates]
    # compare_digest: the time taken must not tell an attacker how much of the sig was right.
    if not any(hmac.compare_digest(sig, envelope["sig"]) for sig in expected):
        _refuse("bad signature")
    if envelope["purpose"] != purpose:
        _refuse(f"wrong purpose: expected {purpose!r}, got {envelope['purpose']!r}")
    _check_window(ts, now, window)
    if not seen.remember(envelope["nonce"], ts, now):
        _refuse("nonce already seen: the message is a replay")
    payload: dict[str, Any] = json.loads(message)["payload"]
    return payload


def response_for(
    request_envelope: Mapping[str, Any],
    secret: bytes,
    purpose: str,
    payload: Mapping[str, Any],
    *,
    now: datetime,
    nonce: str | None = None,
) -> dict[str, Any]:
    """Sign a response to ``request_envelope``, bound to its nonce through ``request_nonce``.

    Raises :class:`InvalidInput` if the request has no valid nonce or the payload already
    uses the ``request_nonce`` field, and whatever :func:`sign` raises.
    """
    request_nonce = request_envelope.get("nonce") if isinstance(request_envelope, Mapping) else None
    if not isinstance(request_nonce, str) or not _NONCE.fullmatch(request_nonce):
        raise InvalidInput(
            "request_envelope: has no valid nonce to answer",
            field="request_envelope",
            value=request_nonce,
            allowed=NONCE_RULE,
        )
    if REQUEST_NONCE in payload:
        raise InvalidInput(
            f"payload: the field {REQUEST_NONCE!r} is reserved for the request's nonce",
            field="payload",
            value=payload[REQUEST_NONCE],
            allowed=f"a JSON object without {REQUEST_NONCE!r}",
        )
    return sign(secret, purpose, {**payload, REQUEST_NONCE: request_nonce}, now=now, nonce=nonce)


def verify_response(
    response: Mapping[str, Any],
    *,
    request_nonce: str,
    secrets: Sequence[bytes],
    purpose: str,
    now: datetime,
    window: timedelta = DEFAULT_WINDOW,
    seen: NonceStore,
) -> dict[str, Any]:
    """Check a response like :func:`verify`, and that it answers the request ``request_nonce``.

    Returns the payload without its ``request_nonce`` field. Raises
    :class:`CoordinationError` for everything :func:`verify` refuses and for a response that
    answers another request (or none).
    """
    payload = verify(response, secrets=secrets, purpose=purpose, now=now, window=window, seen=seen)
    bound = payload.pop(REQUEST_NONCE, None)
    if bound is None:
        _refuse("the response does not name the request it answers")
    if bound != request_nonce:
        _refuse("the response answers another request")
    return payload


def accepted_secrets(
    current: bytes,
    previous: bytes | None,
    rotated_at: datetime | None,
    now: datetime,
    grace: timedelta = ROTATION_GRACE,
) -> list[bytes]:
    """The coordination secrets to accept at ``now``, the current one first.

    The previous secret is accepted until ``rotated_at + grace``, then refused. Raises
    :class:`InvalidInput` for a short secret, or a previous secret without ``rotated_at``
    (its grace period could not end).
    """
    _check_secret(current)
    _aware(now, "now")
    if previous is None or previous == current:
        return [current]
    if rotated_at is None:
        raise InvalidInput(
            "rotated_at: a previous coordination secret needs the time of the rotation",
            field="rotated_at",
            value=None,
            allowed="the time the current secret replaced the previous one",
        )
    if now < _aware(rotated_at, "rotated_at") + grace:
        return [current, previous]
    return [current]


def _check_purpose(purpose: str) -> None:
    if not isinstance(purpose, str) or not _PURPOSE.fullmatch(purpose):
        raise InvalidInput(
            f"purpose: {purpose!r} is not a valid purpose; allowed: {PURPOSE_RULE}",
            field="purpose",
            value=purpose,
            allowed=PURPOSE_RULE,
        )


def _check_nonce(nonce: str) -> None:
    if not _NONCE.fullmatch(nonce):
        raise InvalidInput(
            f"nonce: {nonce!r} is not a valid nonce; allowed: {NONCE_RULE}",
            field="nonce",
            value=nonce,
            allowed=NONCE_RULE,
        )


def _plain_payload(payload: Mapping[str, Any]) -> Any:
    """``payload`` in its JSON form (tuples become lists), as the receiver will see it."""
    if not isinstance(payload, Mapping):
        raise InvalidInput(
            "payload: must be a mapping", field="payload", value=payload, allowed="a JSON object"
        )
    try:
        return json.loads(_canonical(dict(payload)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"payload: cannot be signed as JSON: {exc}",
            field="payload",
            value=payload,
            allowed="a JSON object with text keys, no NaN or infinity",
        ) from exc


def _check_window(ts: datetime, now: datetime, window: timedelta) -> None:
    """Refuse a timestamp more than ``window`` away from ``now`` either way."""
    skew = ts - now
    if skew > window:
        _refuse(
            f"timestamp is {_seconds(skew)} s in the future, outside the ±{_seconds(window)} s "
            "window; check that both nodes keep their clocks synchronized (NTP)"
        )
    if -skew > window:
        _refuse(
            f"timestamp is {_seconds(-skew)} s old, outside the ±{_seconds(window)} s "
            "window; check that both nodes keep their clocks synchronized (NTP)"
        )


def _check_shape(envelope: object) -> datetime:
    """Refuse an envelope whose fields are missing, extra or of the wrong form; return ts."""
    if not isinstance(envelope, Mapping):
        _refuse(f"malformed envelope: expected a JSON object, got {type(envelope).__name__}")
    missing = ENVELOPE_FIELDS - set(envelope)
    if missing:
        _refuse(f"malformed envelope: missing field(s) {', '.join(sorted(missing))}")
    extra = set(envelope) - ENVELOPE_FIELDS
    if extra:
        names = ", ".join(sorted(reprlib.repr(name) for name in extra))
        _refuse(f"malformed envelope: unexpected field(s) {names}")
    rules: tuple[tuple[str, re.Pattern[str]], ...] = (
        ("purpose", _PURPOSE),
        ("nonce", _NONCE),
        ("ts", _TS),
        ("key_id", _KEY_ID),
        ("sig", _SIG),
    )
    for name, pattern in rules:
        value = envelope[name]
        if not isinstance(value, str) or not pattern.fullmatch(value):
            _refuse(f"malformed envelope: field {name} is not in the expected form")
    if not isinstance(envelope["payload"], dict):
        _refuse("malformed envelope: field payload is not a JSON object")
    try:
        return datetime.fromisoformat(envelope["ts"])
    except ValueError:
        _refuse("malformed envelope: field ts is not a valid time")


def _canonical(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _signature(secret: bytes, message: bytes) -> str:
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _check_secret(secret: bytes) -> None:
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        raise InvalidInput(
            f"coordination secret: must be at least {MIN_SECRET_BYTES} bytes",
            field="coordination secret",
            value="**********",
            allowed=f"at least {MIN_SECRET_BYTES} random bytes",
        )


def _aware(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(
            f"{field}: must be timezone-aware",
            field=field,
            value=value,
            allowed="a timezone-aware datetime",
        )
    return value


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():g}"


def _refuse(reason: str) -> NoReturn:
    raise CoordinationError(f"refused coordination message: {reason}")
