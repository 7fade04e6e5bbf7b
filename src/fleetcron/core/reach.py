"""Whether a new connection to a target would work: the host probe's states and when it is due.

Pure: no I/O, no clock. The pooled SSH connection of a target can outlive its ``sshd``
(stop the daemon and the established connection keeps working), so health that rides it
stays green until every job of the host fails at once. The host probe opens a *fresh*
connection (TCP connect, SSH handshake with the pinned host key, public-key login; nothing
is run) and records what it found as a :class:`Reach`.

- :func:`probe_offset` and :func:`due`: each SSH target is probed once per interval, at a
  stable offset inside it (a hash of its id), so 5,000 targets every 5 minutes make about
  17 connections a second, never 5,000 at once, and a target keeps its place across
  restarts.
- :func:`reach_of`: the state an error of the connection stands for (the exception and the
  causes it chains).
- :func:`is_down`: which states open a "host unreachable" incident.

Local targets are never probed: the scheduler's own host is reachable as long as the
scheduler runs.
"""

from __future__ import annotations

import errno
import hashlib
import math
import socket
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Final

from fleetcron.errors import AuthError, HostKeyMismatch


class Reach(StrEnum):
    """What the newest probe of a target found."""

    REACHABLE = "reachable"
    """Connected, the host key was the pinned one, the key was accepted."""
    REFUSED = "refused"
    """The host answered but nothing listens on the port (sshd stopped)."""
    TIMEOUT = "timeout"
    """No answer within the probe's timeout (host down, network cut, packets dropped)."""
    AUTH_FAILED = "auth_failed"
    """sshd answered with the pinned host key but refused the client key."""
    HOST_KEY_CHANGED = "host_key_changed"
    """The server presented another host key than the pinned one (nothing was sent)."""
    ERROR = "error"
    """Any other failure: the name does not resolve, the handshake broke off."""


#: The states of a target a new connection cannot reach, as stored.
DOWN: Final[tuple[str, ...]] = tuple(r.value for r in Reach if r is not Reach.REACHABLE)

#: Default seconds between two probes of one target.
DEFAULT_INTERVAL_S: Final = 300.0
#: Longest error text kept per target (characters).
ERROR_MAX: Final = 300

_EPOCH: Final = datetime(2000, 1, 1, tzinfo=UTC)

_WORDS: Final[dict[Reach, str]] = {
    Reach.REACHABLE: "reachable",
    Reach.REFUSED: "connection refused",
    Reach.TIMEOUT: "timed out",
    Reach.AUTH_FAILED: "authentication failed",
    Reach.HOST_KEY_CHANGED: "host key changed",
    Reach.ERROR: "cannot connect",
}


def words(state: Reach) -> str:
    """The state as an operator reads it ("connection refused")."""
    return _WORDS[state]


def is_down(state: Reach | None) -> bool:
    """Whether a new connection to the target fails (None: never probed, not down)."""
    return state is not None and state is not Reach.REACHABLE


def probe_offset(target_id: int, interval_s: float) -> float:
    """Seconds into each interval at which this target is probed: stable, in
    ``[0, interval_s)``, spread evenly over the targets."""
    if interval_s <= 0:
        return 0.0
    digest = hashlib.blake2b(f"probe:{target_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * interval_s


def last_slot(target_id: int, interval_s: float, now: datetime) -> datetime:
    """The newest moment at or before ``now`` at which this target is due: its offset into
    the interval, on a grid of intervals counted from a fixed epoch."""
    offset = probe_offset(target_id, interval_s)
    elapsed = (now - _EPOCH).total_seconds() - offset
    return _EPOCH + timedelta(seconds=math.floor(elapsed / interval_s) * interval_s + offset)


def due(target_id: int, last_probe_at: datetime | None, interval_s: float, now: datetime) -> bool:
    """Whether the target is to be probed now: never probed, or not since its newest slot.
    A probe missed while the scheduler was down is made once, not once per interval."""
    if interval_s <= 0:
        return False
    if last_probe_at is None:
        return True
    return last_probe_at < last_slot(target_id, interval_s, now)


def reach_of(error: BaseException | None) -> Reach:
    """The state an error of a fresh connection stands for, looking through the chain of
    causes (fleetcron's connect errors wrap the socket's or asyncssh's); None: reachable."""
    if error is None:
        return Reach.REACHABLE
    for exc in _chain(error):
        found = _direct(exc)
        if found is not None:
            return found
    return Reach.ERROR


def _direct(exc: BaseException) -> Reach | None:
    if isinstance(exc, HostKeyMismatch):
        return Reach.HOST_KEY_CHANGED
    if isinstance(exc, AuthError):
        return Reach.AUTH_FAILED
    if isinstance(exc, ConnectionRefusedError):
        return Reach.REFUSED
    if isinstance(exc, TimeoutError | socket.timeout):
        return Reach.TIMEOUT
    if isinstance(exc, socket.gaierror):
        return Reach.ERROR
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return Reach.REFUSED
    if isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT:
        return Reach.TIMEOUT
    return None


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def error_text(error: BaseException | None) -> str | None:
    """The error as stored beside the state: one line, at most :data:`ERROR_MAX`
    characters (None when there was none)."""
    if error is None:
        return None
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= ERROR_MAX else text[: ERROR_MAX - 1] + "…"


__all__ = [
    "DEFAULT_INTERVAL_S",
    "DOWN",
    "ERROR_MAX",
    "Reach",
    "due",
    "error_text",
    "is_down",
    "last_slot",
    "probe_offset",
    "reach_of",
    "words",
]
