"""Every route that checks a password shares the log-in's limiter and hashing slots: the
own-password change (API and account page) is no unthrottled password oracle."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import App
from fleetcron.services.accounts import users
from fleetcron.store.schema import AuditEvent
from fleetcron.web.ratelimit import LoginLimiter
from integration.web.conftest import (
    API,
    bearer,
    csrf_token_of,
    error_of,
    log_in,
    new_client,
    sqlite_only,
    token_for,
)
from integration.web.live import live, with_settings
from integration.web.test_security_hardening import CountingHasher

RIGHT = {"current_password": "operator-password", "new_password": "another-pass-9"}


def _guess(client: httpx.Client | TestClient, token: str, n: int) -> httpx.Response:
    body = {"current_password": f"guess-{n}", "new_password": "another-pass-9"}
    return client.post(f"{API}/account/password", json=body, headers=bearer(token))


def _refusals(app: App) -> list[AuditEvent]:
    with app.db.read() as session:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "user.passwd").order_by(AuditEvent.id)
        )
        return [row for row in rows if "refused" in (row.detail or {})]


def test_wrong_current_passwords_through_the_api_are_throttled_per_account(
    app: App, client: TestClient
) -> None:
    token = token_for(app, "operator")
    guesses = [_guess(client, token, n) for n in range(8)]
    right = client.post(f"{API}/account/password", json=RIGHT, headers=bearer(token))

    assert [g.status_code for g in guesses] == [422] * 5 + [429] * 3
    assert error_of(guesses[-1])["code"] == "too_many_attempts"
    assert int(guesses[-1].headers["retry-after"]) > 0
    # the account waits: even the right password is not checked before the delay is over
    assert right.status_code == 429
    refused = _refusals(app)
    assert [(r.actor, r.detail["refused"]) for r in refused] == [("olivia", 1)]


def test_the_own_change_and_the_login_form_share_the_accounts_failures(
    app: App, client: TestClient
) -> None:
    token = token_for(app, "operator")
    statuses = [_guess(client, token, n).status_code for n in range(5)]
    login = client.post("/login", data={"username": "olivia", "password": "operator-password"})

    assert statuses == [422] * 5
    assert login.status_code == 429  # the log-in is delayed by the own-change failures


def test_wrong_current_passwords_on_the_account_page_are_throttled(app: App) -> None:
    """From an address the owner logged in from, the account is not delayed; the
    address's budget (20 failures in the window) still applies."""
    with new_client(app) as browser:
        log_in(browser, "viewer")
        csrf = csrf_token_of(browser)
        form = {
            "csrf_token": csrf,
            "new_password": "brand-new-pass",
            "confirm_password": "brand-new-pass",
        }
        statuses = [
            browser.post(
                "/account/password", data={**form, "current_password": f"no-{n}"}
            ).status_code
            for n in range(22)
        ]
        last = browser.post("/account/password", data={**form, "current_password": "x"})

    assert statuses == [422] * 20 + [429] * 2
    assert last.status_code == 429 and "Too many failed attempts" in last.text


def _sixteen_guesses(client: httpx.Client, token: str) -> list[int]:
    with ThreadPoolExecutor(16) as pool:
        return [r.status_code for r in pool.map(lambda n: _guess(client, token, n), range(16))]


@sqlite_only
def test_concurrent_wrong_current_passwords_get_five_checks_two_at_a_time(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = token_for(app, "operator")
    hasher = CountingHasher()
    monkeypatch.setattr(users, "_hasher", hasher)
    with live(with_settings(app, login_hash_concurrency=2)) as (_, client):
        statuses = _sixteen_guesses(client, token)

    assert sorted(statuses) == [422] * 5 + [429] * 11
    assert hasher.checks == 5
    assert hasher.most <= 2


@sqlite_only
def test_the_harness_sees_unbounded_checks_when_the_limiter_lets_everything_through(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with no per-account limit and 16 slots, the same 16 guesses are 16
    checks, many at once (what the route did before it shared the log-in's limiter)."""
    token = token_for(app, "operator")
    hasher = CountingHasher()
    monkeypatch.setattr(users, "_hasher", hasher)
    with live(app) as (web, client):
        web.state.login_limiter = LoginLimiter(per_account=100, per_address=100, hash_slots=16)
        statuses = _sixteen_guesses(client, token)

    assert statuses == [422] * 16
    assert hasher.checks == 16
    assert hasher.most > 2
