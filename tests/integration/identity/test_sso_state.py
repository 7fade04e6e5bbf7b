"""An OIDC log-in under way is taken once: the row is deleted as it is read (``DELETE ...
RETURNING``), on SQLite and PostgreSQL alike, and refused once expired or in another
browser."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest

from fixtures.app import FakeClock
from fleetcron.app import App
from fleetcron.errors import SsoRefused
from fleetcron.services.identity.oidc import LOGIN_TTL, Callback, take_login
from fleetcron.store.schema import SsoLogin

STATE = "state-value-from-the-provider"


def started(app: App) -> None:
    with app.db.session() as session:
        session.add(
            SsoLogin(
                state_hash=hashlib.sha256(STATE.encode()).hexdigest(),
                nonce="n",
                code_verifier="v" * 64,
                next_path="/jobs",
                created_at=app.now(),
                expires_at=app.now() + LOGIN_TTL,
            )
        )


def back(browser_state: str | None = STATE) -> Callback:
    return Callback(state=STATE, code="c", error=None, browser_state=browser_state)


def reason(app: App, callback: Callback) -> str:
    with pytest.raises(SsoRefused) as refused:
        take_login(app, callback)
    return refused.value.reason


def test_a_state_is_taken_once(app: App) -> None:
    started(app)

    assert take_login(app, back()).next_path == "/jobs"
    assert reason(app, back()) == "state_unknown"


def test_an_expired_state_is_refused(app: App, clock: FakeClock) -> None:
    started(app)
    clock.advance(seconds=LOGIN_TTL.total_seconds() + 1)

    assert reason(app, back()) == "state_expired"


def test_a_state_the_browser_does_not_hold_is_refused_and_spent(app: App) -> None:
    started(app)

    assert reason(app, back(browser_state=None)) == "state_mismatch"
    assert reason(app, back()) == "state_unknown"


def test_a_state_just_in_time_is_taken(app: App, clock: FakeClock) -> None:
    """The negative control of the expiry: a second before it, the log-in is taken."""
    started(app)
    clock.advance(seconds=(LOGIN_TTL - timedelta(seconds=1)).total_seconds())

    assert take_login(app, back()).nonce == "n"
