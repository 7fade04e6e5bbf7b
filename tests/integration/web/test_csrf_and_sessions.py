"""Browser sessions: the log-in form, the cookie, CSRF on every cookie-authenticated change,
log-out, expiry, failed and throttled log-ins, and the security headers.

The fixture clock stands at 2026-03-02 09:00:30 UTC; sessions last 12 hours.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, WebSession
from fleetcron.web.deps import SESSION_COOKIE
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

Headers = dict[str, str]


@pytest.fixture
def backup(app: App, operator: Actor) -> str:
    """A bulk job on one local target."""
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, operator, "backup", JobSpec("0 3 * * *", "backup --all"), bulk=True)
    return "backup"


def login_events(app: App) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent).where(AuditEvent.action == "login").order_by(AuditEvent.id)
            )
        )


def post_login(client: TestClient, username: str, password: str, **form: str) -> httpx.Response:
    response: httpx.Response = client.post(
        "/login", data={"username": username, "password": password, **form}
    )
    return response


def test_logging_in_answers_303_with_an_httponly_samesite_lax_cookie(
    client: TestClient,
) -> None:
    response = post_login(client, "olivia", "operator-password")

    assert response.status_code == 303
    assert response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert "httponly" in attributes
    assert "samesite=lax" in attributes


@sqlite_only
def test_logging_in_goes_on_to_the_local_page_asked_for(client: TestClient) -> None:
    response = post_login(client, "olivia", "operator-password", next="/runs?status=failed")

    assert response.headers["location"] == "/runs?status=failed"


@sqlite_only
@pytest.mark.parametrize("elsewhere", ["https://evil.example/", "//evil.example/", "evil"])
def test_logging_in_never_goes_on_to_another_site(client: TestClient, elsewhere: str) -> None:
    response = post_login(client, "olivia", "operator-password", next=elsewhere)

    assert response.headers["location"] == "/"


@sqlite_only
def test_the_session_cookie_authenticates_api_reads(browser: TestClient) -> None:
    response = browser.get(f"{API}/jobs")

    assert response.status_code == 200
    assert response.json() == []


def test_a_cookie_authenticated_post_without_a_csrf_token_is_refused_and_adds_nothing(
    browser: TestClient,
) -> None:
    response = browser.post(f"{API}/targets", json={"name": "box", "kind": "local"})

    assert response.status_code == 403
    error = error_of(response)
    assert error["code"] == "forbidden"
    assert "CSRF" in str(error["message"])
    assert browser.get(f"{API}/targets").json() == []


@sqlite_only
def test_a_cookie_authenticated_patch_without_a_csrf_token_is_refused_and_changes_nothing(
    browser: TestClient, backup: str
) -> None:
    response = browser.patch(f"{API}/jobs/backup", json={"command": "rm -rf /"})

    assert response.status_code == 403
    assert browser.get(f"{API}/jobs/backup").json()["command"] == "backup --all"


@sqlite_only
def test_a_cookie_authenticated_delete_without_a_csrf_token_is_refused_and_keeps_the_job(
    browser: TestClient, backup: str
) -> None:
    response = browser.delete(f"{API}/jobs/backup")

    assert response.status_code == 403
    assert browser.get(f"{API}/jobs/backup").status_code == 200


@sqlite_only
def test_a_wrong_csrf_token_is_refused(browser: TestClient, backup: str) -> None:
    response = browser.delete(f"{API}/jobs/backup", headers={"X-CSRF-Token": "guess"})

    assert response.status_code == 403
    assert browser.get(f"{API}/jobs/backup").status_code == 200


def test_the_csrf_token_of_another_session_of_the_same_user_is_refused(
    app: App, browser: TestClient, backup: str
) -> None:
    with new_client(app) as other:
        log_in(other, "operator")
        other_token = csrf_token_of(other)

    response = browser.delete(f"{API}/jobs/backup", headers={"X-CSRF-Token": other_token})

    assert response.status_code == 403


@sqlite_only
@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/targets/box/labels", {"labels": {"env": "prod"}}, 200),
        ("PATCH", "/jobs/backup", {"notes": "nightly"}, 200),
        ("DELETE", "/jobs/backup", None, 204),
    ],
)
def test_with_the_pages_csrf_token_a_cookie_authenticated_change_succeeds(
    browser: TestClient, backup: str, method: str, path: str, body: object, status: int
) -> None:
    token = csrf_token_of(browser)

    response = browser.request(method, f"{API}{path}", json=body, headers={"X-CSRF-Token": token})

    assert response.status_code == status, response.text


def test_the_pages_csrf_token_is_the_one_stored_with_the_session(
    app: App, browser: TestClient
) -> None:
    with app.db.read() as session:
        stored = session.scalars(select(WebSession.csrf_token)).all()

    assert stored == [csrf_token_of(browser)]


def test_a_form_post_carrying_the_csrf_token_field_is_accepted(
    browser: TestClient, backup: str
) -> None:
    response = browser.post(
        f"{API}/targets/box/unpair", data={"csrf_token": csrf_token_of(browser)}
    )

    assert response.status_code == 200, response.text
    assert response.json()["paired"] is False


@sqlite_only
def test_a_form_post_without_the_csrf_token_field_is_refused(
    browser: TestClient, backup: str
) -> None:
    response = browser.post(f"{API}/targets/box/unpair", data={"reason": "cleanup"})

    assert response.status_code == 403
    assert browser.get(f"{API}/targets/box").json()["paired"] is True


@sqlite_only
def test_logging_out_without_the_csrf_token_is_refused_and_keeps_the_session(
    browser: TestClient,
) -> None:
    response = browser.post("/logout", data={})

    assert response.status_code == 403
    assert browser.get(f"{API}/jobs").status_code == 200


def test_logging_out_ends_the_session_on_the_server(app: App, browser: TestClient) -> None:
    cookie = browser.cookies[SESSION_COOKIE]

    response = browser.post("/logout", data={"csrf_token": csrf_token_of(browser)})

    assert response.status_code == 303
    assert response.headers["location"] == "/login"
    # The browser forgets the cookie; a copy kept by an attacker must not work either.
    with new_client(app) as replay:
        replay.cookies.set(SESSION_COOKIE, cookie)
        assert replay.get(f"{API}/jobs").status_code == 401
        assert replay.get("/").status_code == 303


@sqlite_only
def test_logging_out_tells_the_browser_to_drop_the_cookie(browser: TestClient) -> None:
    response = browser.post("/logout", data={"csrf_token": csrf_token_of(browser)})

    cookie = response.headers["set-cookie"].lower()
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "max-age=0" in cookie


def test_a_session_is_still_valid_just_before_twelve_hours(
    browser: TestClient, clock: FakeClock
) -> None:
    clock.advance(hours=11, minutes=59)

    assert browser.get(f"{API}/jobs").status_code == 200


def test_an_expired_session_is_refused_by_the_api(browser: TestClient, clock: FakeClock) -> None:
    clock.advance(hours=13)

    response = browser.get(f"{API}/jobs")

    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthenticated"


@sqlite_only
def test_an_expired_session_sends_pages_to_the_login_form(
    browser: TestClient, clock: FakeClock
) -> None:
    clock.advance(hours=13)

    response = browser.get("/runs")

    assert response.status_code == 303
    assert response.headers["location"].startswith("/login?next=/runs")


@sqlite_only
def test_an_unknown_session_cookie_is_refused(app: App) -> None:
    with new_client(app) as client:
        client.cookies.set(SESSION_COOKIE, "forged")
        response = client.get(f"{API}/jobs")

    assert response.status_code == 401


@sqlite_only
def test_a_wrong_password_shows_the_login_form_again_with_401_and_no_cookie(
    client: TestClient,
) -> None:
    response = post_login(client, "olivia", "wrong-password")

    assert response.status_code == 401
    assert "Unknown user or wrong password." in response.text
    assert "set-cookie" not in response.headers


def test_a_wrong_password_is_audited_as_a_failed_login(app: App, client: TestClient) -> None:
    post_login(client, "olivia", "wrong-password")

    [event] = login_events(app)
    assert (event.success, event.detail["user"]) == (False, "olivia")


@sqlite_only
def test_an_unknown_user_gets_the_same_answer_as_a_wrong_password(client: TestClient) -> None:
    unknown = post_login(client, "mallory", "whatever-password")
    wrong = post_login(client, "olivia", "wrong-password")

    assert unknown.status_code == wrong.status_code == 401
    assert "Unknown user or wrong password." in unknown.text


def test_a_successful_login_is_audited(app: App, client: TestClient) -> None:
    post_login(client, "olivia", "operator-password")

    [event] = login_events(app)
    assert (event.actor, event.success) == ("olivia", True)


def fail_five_times(client: TestClient, username: str = "olivia") -> None:
    for _ in range(5):
        assert post_login(client, username, "wrong-password").status_code == 401


@sqlite_only
def test_after_five_failures_even_the_right_password_is_refused_with_429(
    client: TestClient,
) -> None:
    fail_five_times(client)

    response = post_login(client, "olivia", "operator-password")

    assert response.status_code == 429
    assert "Too many failed attempts" in response.text
    assert "set-cookie" not in response.headers


def test_a_throttled_login_is_audited_as_failed(app: App, client: TestClient) -> None:
    fail_five_times(client)

    post_login(client, "olivia", "operator-password")

    events = login_events(app)
    assert len(events) == 5
    assert not any(event.success for event in events)
    with app.db.read() as session:
        [refused] = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "login.refused")
        ).all()
        assert (refused.success, refused.detail["refused"]) == (False, 1)


@sqlite_only
def test_the_throttle_is_per_account(client: TestClient) -> None:
    fail_five_times(client, "olivia")

    response = post_login(client, "victor", "viewer-password")

    assert response.status_code == 303


@sqlite_only
def test_the_throttle_lifts_once_the_failures_are_five_minutes_old(
    client: TestClient, clock: FakeClock
) -> None:
    fail_five_times(client)
    clock.advance(minutes=5, seconds=1)

    response = post_login(client, "olivia", "operator-password")

    assert response.status_code == 303


@sqlite_only
def test_a_bearer_token_needs_no_csrf_token(client: TestClient, app: App) -> None:
    response = client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local"},
        headers=bearer(token_for(app, "admin")),
    )

    assert response.status_code == 201


@sqlite_only
def test_the_session_acts_with_the_role_of_its_user(app: App) -> None:
    with new_client(app) as viewer:
        log_in(viewer, "viewer")
        token = csrf_token_of(viewer)
        response = viewer.post(
            f"{API}/targets", json={"name": "box", "kind": "local"}, headers={"X-CSRF-Token": token}
        )

    assert response.status_code == 403
    assert "victor (viewer)" in str(error_of(response)["message"])


SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}


Fetch = Callable[[TestClient, App], httpx.Response]


def anonymous_login_page(client: TestClient, app: App) -> httpx.Response:
    response: httpx.Response = client.get("/login")
    return response


def dashboard(client: TestClient, app: App) -> httpx.Response:
    log_in(client, "viewer")
    response: httpx.Response = client.get("/")
    return response


def api_list(client: TestClient, app: App) -> httpx.Response:
    response: httpx.Response = client.get(f"{API}/jobs", headers=bearer(token_for(app, "viewer")))
    return response


def api_refusal(client: TestClient, app: App) -> httpx.Response:
    response: httpx.Response = client.get(f"{API}/jobs")
    return response


def page_not_found(client: TestClient, app: App) -> httpx.Response:
    log_in(client, "viewer")
    response: httpx.Response = client.get("/no-such-page")
    return response


@sqlite_only
@pytest.mark.parametrize(
    "fetch", [anonymous_login_page, dashboard, api_list, api_refusal, page_not_found]
)
def test_every_answer_carries_the_security_headers(
    client: TestClient, app: App, fetch: Fetch
) -> None:
    response = fetch(client, app)

    assert response.status_code in (200, 401, 404)
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, name
    policy = response.headers["content-security-policy"]
    assert "'unsafe-inline'" not in policy
    assert "'unsafe-eval'" not in policy
    assert "frame-ancestors 'none'" in policy
    assert "default-src 'self'" in policy


@sqlite_only
def test_api_answers_are_not_cached(client: TestClient, app: App) -> None:
    response = client.get(f"{API}/jobs", headers=bearer(token_for(app, "viewer")))

    assert response.headers["cache-control"] == "no-store"
