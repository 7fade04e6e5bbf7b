"""Single sign-on through a real OpenID Connect provider (``oidc-provider`` under Node.js,
``fixtures.oidc_provider``), driven over HTTP: fleetcron through the in-process test
client, the provider through httpx, the browser's part (cookies, redirects) played by the
two clients. Each refusal is a page with a message (never a 500), a log line with a stable
action (``sso.<reason>``) and a failed ``login`` in the audit log, and logs nobody in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from fixtures.app import make_settings
from fixtures.oidc_provider import (
    OidcProvider,
    free_port,
    sign_in_at_provider,
    start_provider,
    stop_provider,
    user,
)
from fleetcron.app import Actor, App
from fleetcron.services.audit import AuditFilter, list_event_views
from fleetcron.services.identity import oidc
from fleetcron.services.identity.oidc import forget_provider
from fleetcron.store.schema import SsoLogin, User, WebSession
from integration.web.conftest import ACCOUNTS, new_client, sqlite_only
from integration.web.conftest import log_in as password_log_in

pytestmark = sqlite_only
ACTOR_ADMIN = Actor("admin", "admin")

FLEET = "http://testserver"
CALLBACK = FLEET + "/login/oidc/callback"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    started = start_provider([CALLBACK], [FLEET + "/login"], tmp_path_factory.mktemp("oidc"))
    yield started
    stop_provider(started)
    forget_provider(started.issuer)


def open_app(database_url: str, directory: Path, provider: OidcProvider, **extra: object) -> App:
    # The real clock: the provider's tokens carry real times.
    settings = make_settings(directory / "data", database_url, **provider.settings(CALLBACK))
    if extra:
        settings = settings.model_copy(update=extra)
    return App.open(settings)


@pytest.fixture
def app(database_url: str, tmp_path: Path, provider: OidcProvider) -> Iterator[App]:
    the_app = open_app(database_url, tmp_path, provider)
    yield the_app
    the_app.close()


@pytest.fixture
def idp() -> Iterator[httpx.Client]:
    """The browser's side at the provider (its cookies: the provider's session)."""
    with httpx.Client(follow_redirects=False, timeout=10) as client:
        yield client


def sso(fleet: TestClient, idp: httpx.Client, login: str, next: str = "/") -> httpx.Response:
    """Log ``login`` in through the provider; fleetcron's answer to the callback."""
    started = fleet.get("/login/oidc", params={"next": next})
    assert started.status_code == 303, started.text
    back = sign_in_at_provider(idp, started.headers["location"], user(login), back_to=FLEET)
    answer: httpx.Response = fleet.get(back)
    return answer


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "action", "")) for r in caplog.records if r.levelno >= logging.WARNING]


def failed_logins(app: App) -> list[dict[str, object]]:
    events, _ = list_event_views(app, ACTOR_ADMIN, AuditFilter(action="login"))
    return [e.detail for e in events if not e.success]


def test_an_operator_logs_in_through_the_provider_and_gets_an_account(
    app: App, client: TestClient, idp: httpx.Client, provider: OidcProvider
) -> None:
    answer = sso(client, idp, "olga", next="/jobs")

    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/jobs"
    assert client.get("/jobs").status_code == 200
    with app.db.read() as session:
        olga = session.scalars(select(User).where(User.name == "olga")).one()
        assert (olga.role, olga.identity_provider, olga.subject) == (
            "operator",
            provider.issuer,
            "sub-olga-7f3a",
        )
    events, _ = list_event_views(app, ACTOR_ADMIN, AuditFilter(actor="olga", action="login"))
    assert events[0].success
    assert events[0].detail["provider"] == "Test IdP"
    assert events[0].detail["issuer"] == provider.issuer


def test_the_highest_role_of_a_users_groups_counts(
    app: App, client: TestClient, idp: httpx.Client
) -> None:
    assert sso(client, idp, "ada").status_code == 303

    with app.db.read() as session:
        assert session.scalars(select(User.role).where(User.name == "ada")).one() == "admin"


def test_an_account_from_the_provider_has_no_password_to_log_in_with(
    app: App, client: TestClient, idp: httpx.Client
) -> None:
    assert sso(client, idp, "olga").status_code == 303
    with new_client(app) as other:
        for password in ("", "!sso", "olga-secret-1"):
            refused = other.post("/login", data={"username": "olga", "password": password})
            assert refused.status_code in (401, 422)


def test_a_user_whose_groups_map_to_no_role_is_refused_and_the_admin_is_told(
    app: App, client: TestClient, idp: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    answer = sso(client, idp, "nina")

    assert answer.status_code == 403
    assert "no role for your groups" in answer.text
    assert client.get("/", follow_redirects=False).status_code == 303  # still anonymous
    with app.db.read() as session:
        assert session.scalar(select(User).where(User.name == "nina")) is None
    assert "sso.no_role" in refusals(caplog)
    assert any(
        d.get("reason") == "no_role" and "marketing" in str(d.get("error"))
        for d in failed_logins(app)
    )


def test_the_provider_cannot_take_over_the_local_break_glass_admin(
    app: App, client: TestClient, idp: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    answer = sso(client, idp, "admin")  # the provider's "admin" is someone else

    assert answer.status_code == 403
    assert "taken by another fleetcron account" in answer.text
    assert "sso.name_taken" in refusals(caplog)
    with app.db.read() as session:
        local = session.scalars(select(User).where(User.name == "admin")).one()
        assert local.identity_provider is None
    # The break-glass path: the local admin still logs in with the password.
    with new_client(app) as break_glass:
        password_log_in(break_glass, "admin")
        assert "admin" in break_glass.get("/users").text


def test_a_callback_used_twice_is_refused_the_second_time(
    app: App, client: TestClient, idp: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    started = client.get("/login/oidc")
    back = sign_in_at_provider(idp, started.headers["location"], user("olga"), back_to=FLEET)
    assert client.get(back).status_code == 303  # negative control: the first use logs in

    with new_client(app) as replaying:
        replaying.cookies.set("fleetcron_sso_state", parse_qs(urlsplit(back).query)["state"][0])
        replayed = replaying.get(back)
        assert replayed.status_code == 400
        assert "used already" in replayed.text
        assert replaying.get("/", follow_redirects=False).status_code == 303
    assert "sso.state_unknown" in refusals(caplog)


def test_a_log_in_that_stayed_too_long_at_the_provider_is_refused(
    app: App, client: TestClient, idp: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    started = client.get("/login/oidc")
    back = sign_in_at_provider(idp, started.headers["location"], user("olga"), back_to=FLEET)
    with app.db.session() as session:
        session.execute(update(SsoLogin).values(expires_at=app.now() - timedelta(seconds=1)))

    answer = client.get(back)

    assert answer.status_code == 400
    assert "longer than 10 minutes" in answer.text
    assert "sso.state_expired" in refusals(caplog)
    with app.db.read() as session:
        assert session.scalars(select(WebSession)).all() == []


def test_a_callback_in_another_browser_than_the_one_that_started_is_refused(
    app: App, client: TestClient, idp: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Login CSRF: a victim sent to the attacker's callback URL is not logged in."""
    caplog.set_level(logging.WARNING)
    started = client.get("/login/oidc")
    back = sign_in_at_provider(idp, started.headers["location"], user("olga"), back_to=FLEET)

    with new_client(app) as victim:
        answer = victim.get(back)
        assert answer.status_code == 400
        assert "another browser" in answer.text
        assert victim.get("/", follow_redirects=False).status_code == 303
    assert "sso.state_mismatch" in refusals(caplog)


def test_a_provider_that_refuses_says_so(
    app: App, client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    started = client.get("/login/oidc")
    state = parse_qs(urlsplit(started.headers["location"]).query)["state"][0]

    answer = client.get("/login/oidc/callback", params={"state": state, "error": "access_denied"})

    assert answer.status_code == 400
    assert "did not log you in (access_denied)" in answer.text
    assert "sso.provider_error" in refusals(caplog)


def test_a_wrong_issuer_is_a_message_not_a_500(
    database_url: str, tmp_path: Path, provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """The discovery document of http://localhost:PORT names http://127.0.0.1:PORT."""
    caplog.set_level(logging.WARNING)
    wrong = provider.issuer.replace("127.0.0.1", "localhost")
    app = open_app(database_url, tmp_path, provider, oidc_issuer=wrong)
    try:
        with new_client(app) as fleet:
            answer = fleet.get("/login/oidc")
        assert answer.status_code == 502
        assert "does not answer as fleetcron is configured" in answer.text
        assert "sso.issuer_mismatch" in refusals(caplog)
        assert any(d.get("reason") == "issuer_mismatch" for d in failed_logins(app))
    finally:
        app.close()
        forget_provider(wrong)


def test_an_unreachable_issuer_is_a_message_not_a_500(
    database_url: str, tmp_path: Path, provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    closed = f"http://127.0.0.1:{free_port()}"
    app = open_app(database_url, tmp_path, provider, oidc_issuer=closed)
    try:
        with new_client(app) as fleet:
            answer = fleet.get("/login/oidc")
            assert answer.status_code == 502
            assert "cannot be reached" in answer.text
            # The password form still works: the break-glass path needs no provider.
            password_log_in(fleet, "admin")
        assert "sso.issuer_unreachable" in refusals(caplog)
    finally:
        app.close()
        forget_provider(closed)


def test_the_log_in_page_offers_the_provider(client: TestClient) -> None:
    page = client.get("/login", params={"next": "/jobs"})

    assert 'href="/login/oidc?next=/jobs"' in page.text or "/login/oidc?next=%2Fjobs" in page.text
    assert "Log in with Test IdP" in page.text


def test_logging_out_goes_on_to_the_providers_logout(
    app: App, client: TestClient, idp: httpx.Client, provider: OidcProvider
) -> None:
    assert sso(client, idp, "olga").status_code == 303
    csrf = client.get("/").text.split('name="csrf_token" value="')[1].split('"')[0]

    page = client.post("/logout", data={"csrf_token": csrf})

    assert page.status_code == 200
    assert f'content="0;url={provider.issuer}/session/end?client_id=fleetcron' in page.text
    assert client.get("/", follow_redirects=False).status_code == 303
    # Negative control: a local account's logout goes straight to the log-in form.
    with new_client(app) as local:
        password_log_in(local, "operator")
        csrf = local.get("/").text.split('name="csrf_token" value="')[1].split('"')[0]
        assert local.post("/logout", data={"csrf_token": csrf}).status_code == 303
    assert ACCOUNTS["operator"][0] == "olivia"


def test_log_ins_under_way_are_bounded(
    app: App, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone may start a log-in; the rows they leave are capped until they expire."""
    monkeypatch.setattr(oidc, "MAX_PENDING", 2)
    assert client.get("/login/oidc").status_code == 303
    assert client.get("/login/oidc").status_code == 303

    refused = client.get("/login/oidc")

    assert refused.status_code == 429
    assert "Too many log-ins are under way" in refused.text
    with app.db.read() as session:
        assert len(session.scalars(select(SsoLogin)).all()) == 2


def test_over_https_the_state_cookie_cannot_be_planted_by_a_sibling_domain(
    database_url: str, tmp_path: Path, provider: OidcProvider
) -> None:
    app = open_app(database_url, tmp_path, provider, cookie_secure=True)
    try:
        with new_client(app) as fleet:
            started = fleet.get("/login/oidc")
        cookie = started.headers["set-cookie"]
        assert cookie.startswith("__Host-fleetcron_sso_state=")
        assert "Secure" in cookie and "Path=/" in cookie and "HttpOnly" in cookie
        assert "Domain" not in cookie
    finally:
        app.close()
