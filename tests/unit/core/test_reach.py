"""The host probe's pure rules: the state an error stands for, and when a target is due."""

from __future__ import annotations

import errno
import socket
from datetime import UTC, datetime, timedelta

import pytest

from fleetcron.core.reach import (
    ERROR_MAX,
    Reach,
    due,
    error_text,
    is_down,
    last_slot,
    probe_offset,
    reach_of,
)
from fleetcron.errors import AuthError, ConnectError, HostKeyMismatch

NOW = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


def wrapped(cause: BaseException, outer: BaseException) -> BaseException:
    """``outer`` raised ``from cause``, as open_pinned wraps the socket's errors."""
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (None, Reach.REACHABLE),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), Reach.REFUSED),
        (
            wrapped(ConnectionRefusedError(), ConnectError("connection refused: h:22")),
            Reach.REFUSED,
        ),
        (OSError(errno.ECONNREFUSED, "Multiple exceptions: [Errno 111] ..."), Reach.REFUSED),
        (TimeoutError(), Reach.TIMEOUT),
        (wrapped(TimeoutError(), ConnectError("connection to h:22 timed out")), Reach.TIMEOUT),
        (OSError(errno.ETIMEDOUT, "timed out"), Reach.TIMEOUT),
        (HostKeyMismatch("host key mismatch: expected A, got B"), Reach.HOST_KEY_CHANGED),
        (AuthError("authentication failed for user u"), Reach.AUTH_FAILED),
        (
            wrapped(socket.gaierror(-2, "Name or service not known"), ConnectError("resolve")),
            Reach.ERROR,
        ),
        (ConnectError("ssh handshake with h:22 failed: Connection lost"), Reach.ERROR),
        (RuntimeError("anything else"), Reach.ERROR),
    ],
)
def test_each_error_of_a_fresh_connection_is_classified(
    error: BaseException | None, expected: Reach
) -> None:
    assert reach_of(error) is expected


def test_the_classification_looks_through_the_chain_and_a_bare_error_does_not_match() -> None:
    """Negative control: the same ConnectError without its cause is no longer "refused",
    so the chain is what the classification reads."""
    assert reach_of(ConnectError("connection refused: h:22")) is Reach.ERROR


def test_only_a_failed_probe_is_down() -> None:
    assert not is_down(None)
    assert not is_down(Reach.REACHABLE)
    assert all(is_down(state) for state in Reach if state is not Reach.REACHABLE)


def test_the_error_text_is_one_line_and_bounded() -> None:
    assert error_text(None) is None
    assert error_text(ConnectError("a\nb   c")) == "a b c"
    long = error_text(ConnectError("x" * 1000))
    assert long is not None and len(long) == ERROR_MAX
    assert error_text(TimeoutError()) == "TimeoutError"


def test_the_offset_is_stable_within_the_interval_and_spread() -> None:
    offsets = [probe_offset(tid, 300.0) for tid in range(1, 5001)]
    assert offsets == [probe_offset(tid, 300.0) for tid in range(1, 5001)]
    assert all(0 <= o < 300 for o in offsets)
    # Spread: every 30 s tenth of the interval holds between 8 % and 12 % of the targets.
    tenths = [sum(1 for o in offsets if k * 30 <= o < (k + 1) * 30) for k in range(10)]
    assert all(400 <= n <= 600 for n in tenths), tenths


def test_a_target_is_due_once_per_interval_at_its_slot() -> None:
    interval = 300.0
    slot = last_slot(7, interval, NOW)
    assert slot <= NOW < slot + timedelta(seconds=interval)
    assert due(7, None, interval, NOW)
    assert not due(7, slot, interval, NOW)
    assert due(7, slot - timedelta(seconds=1), interval, NOW)
    # Probed at its slot: not due again until the next one, then due.
    next_slot = slot + timedelta(seconds=interval)
    assert not due(7, slot, interval, next_slot - timedelta(microseconds=1))
    assert due(7, slot, interval, next_slot)


def test_probes_missed_while_down_are_made_once() -> None:
    interval = 60.0
    hours_later = NOW + timedelta(hours=3)
    assert due(3, NOW, interval, hours_later)
    assert not due(3, hours_later, interval, hours_later)


def test_an_interval_of_zero_turns_the_probe_off() -> None:
    assert not due(1, None, 0, NOW)
    assert probe_offset(1, 0) == 0.0
