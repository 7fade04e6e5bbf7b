"""Regression tests for the security audit of the web server (issue 12), against a real
uvicorn on loopback where the finding is about HTTP itself (body sizes, concurrency, the TCP
peer behind a proxy), and through the ASGI client where the same code path runs."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Literal

import httpx
import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from fixtures.app import FakeClock
from fleetcron.app import App
from fleetcron.services.accounts import users
from fleetcron.store.schema import AuditEvent, WebSession
from fleetcron.web.deps import SECURE_SESSION_COOKIE, SESSION_COOKIE
from fleetcron.web.middleware import real_client
from fleetcron.web.ratelimit import LoginLimiter, Refusal, Reservation
from integration.web.conftest import (
    ACCOUNTS,
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

MiB = 1 << 20
JOB = {"name": "big", "schedule": "0 3 * * *", "command": "true", "bulk": True}


def login(client: httpx.Client | TestClient, name: str, password: str, **headers: str) -> int:
    response = client.post("/login", data={"username": name, "password": password}, headers=headers)
    return response.status_code


# --- request bodies ------------------------------------------------------------------


def declare_only(
    base: str, path: str, length: int, headers: dict[str, str], timeout: float = 30
) -> httpx.Response:
    """POST ``path`` declaring a body of ``length`` bytes and send none of it: the answer
    can only have been decided before the body was read. (Sending the body too raced the
    server's early answer: once it closed the connection with upload bytes unread, the
    kernel's reset could discard the 413 before the client read it.)"""
    url = httpx.URL(base)
    connection = http.client.HTTPConnection(url.host, url.port, timeout=timeout)
    try:
        connection.putrequest("POST", path)
        for name, value in {**headers, "content-length": str(length)}.items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return httpx.Response(answer.status, headers=answer.getheaders(), content=answer.read())
    finally:
        connection.close()


@sqlite_only
def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read(app: App) -> None:
    token = token_for(app, "operator")
    json_body = {"content-type": "application/json"}
    with live(app) as (_, client):
        base = str(client.base_url)
        declared = declare_only(base, f"{API}/jobs", 11 * MiB, {**bearer(token), **json_body})
        anonymous = declare_only(base, f"{API}/jobs", 2 * MiB, json_body)
        # The control: a body within the limit, declared the same way, is waited for (the
        # server reads it, so no answer comes before the timeout).
        with pytest.raises(TimeoutError):
            declare_only(base, f"{API}/jobs", 64, {**bearer(token), **json_body}, timeout=1)

    assert declared.status_code == 413
    assert error_of(declared)["code"] == "too_large"
    assert "max_body_bytes" in str(error_of(declared)["message"])
    assert anonymous.status_code == 413


@sqlite_only
def test_a_streamed_body_without_length_is_cut_off_at_the_limit(app: App) -> None:
    token = token_for(app, "operator")

    def chunks(total: int) -> Iterator[bytes]:
        sent = 0
        while sent < total:
            yield b" " * 65536
            sent += 65536

    with live(app) as (_, client):
        big = client.post(
            f"{API}/jobs",
            content=chunks(3 * MiB),
            headers={**bearer(token), "content-type": "application/json"},
        )
        # negative control: the same streaming, under the limit, reaches the route
        small = client.post(
            f"{API}/jobs",
            content=iter([b'{"name": "small", "schedule": "0 3 * * *", ', b'"command": "true"}']),
            headers={**bearer(token), "content-type": "application/json"},
        )

    assert "content-length" not in big.request.headers
    assert big.status_code == 413, big.text
    assert error_of(big)["code"] == "too_large"
    assert small.status_code == 422, small.text  # neither bulk nor a target: the route spoke


@sqlite_only
def test_the_body_limit_is_a_setting(app: App) -> None:
    body = {**JOB, "notes": "x" * 3000}
    with live(with_settings(app, max_body_bytes=2048)) as (_, client):
        refused = client.post(f"{API}/jobs", json=body, headers=bearer(token_for(app, "operator")))
    with live(app) as (_, client):
        allowed = client.post(f"{API}/jobs", json=body, headers=bearer(token_for(app, "operator")))

    assert (refused.status_code, allowed.status_code) == (413, 201)


@sqlite_only
def test_an_anonymous_state_change_is_refused_before_its_body_is_parsed(app: App) -> None:
    broken = b'{"name":'
    with live(app) as (_, client):
        anonymous = client.post(
            f"{API}/jobs", content=broken, headers={"content-type": "application/json"}
        )
        bad_token = client.post(
            f"{API}/jobs",
            content=broken,
            headers={"content-type": "application/json", "authorization": "Bearer fct_nope"},
        )
        form = client.post("/jobs/new", data={"x": "y" * 1000})
        # negative control: a real caller's broken body is parsed, and refused as such
        known = client.post(
            f"{API}/jobs",
            content=broken,
            headers={**bearer(token_for(app, "operator")), "content-type": "application/json"},
        )

    assert anonymous.status_code == 401, anonymous.text
    assert error_of(anonymous)["code"] == "unauthenticated"
    assert bad_token.status_code == 401
    assert (form.status_code, form.headers["location"]) == (303, "/login")
    assert known.status_code == 422


# --- the login limiter ---------------------------------------------------------------


class CountingHasher(PasswordHasher):
    """Real argon2id (cheap parameters) that counts checks and the most at once; each check
    lingers a little so that concurrent requests overlap."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=8, parallelism=1)
        self.lock = threading.Lock()
        self.checks = 0
        self.running = 0
        self.most = 0

    def verify(self, hash: str | bytes, password: str | bytes) -> Literal[True]:
        with self.lock:
            self.checks += 1
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.15)
            return super().verify(hash, password)
        finally:
            with self.lock:
                self.running -= 1


def sixteen_wrong_passwords(client: httpx.Client) -> list[int]:
    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(lambda _: login(client, "admin", "wrong-password"), range(16)))


@sqlite_only
def test_sixteen_concurrent_wrong_passwords_get_five_checks_two_at_a_time(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    hasher = CountingHasher()
    monkeypatch.setattr(users, "_hasher", hasher)
    with live(with_settings(app, login_hash_concurrency=2)) as (_, client):
        statuses = sixteen_wrong_passwords(client)

    assert sorted(statuses) == [401] * 5 + [429] * 11
    assert hasher.checks == 5
    assert hasher.most <= 2


@sqlite_only
def test_the_concurrency_harness_sees_a_limiter_that_lets_everything_through(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with no per-account limit and 16 hashing slots, the same harness
    counts 16 checks, many at once, so the numbers above are measured, not assumed."""
    hasher = CountingHasher()
    monkeypatch.setattr(users, "_hasher", hasher)
    with live(app) as (web, client):
        web.state.login_limiter = LoginLimiter(per_account=100, per_address=100, hash_slots=16)
        statuses = sixteen_wrong_passwords(client)

    assert statuses == [401] * 16
    assert hasher.checks == 16
    assert hasher.most > 2


def test_the_account_delay_doubles_and_spares_an_address_that_logged_in_before() -> None:
    limiter = LoginLimiter()
    now = FakeClock(datetime(2026, 3, 2, tzinfo=UTC))
    owner = limiter.reserve("olivia", "192.0.2.10", now())
    assert isinstance(owner, Reservation)
    limiter.succeeded(owner)
    for _ in range(5):
        assert isinstance(limiter.reserve("olivia", "203.0.113.66", now()), Reservation)

    refused = limiter.reserve("olivia", "203.0.113.66", now())
    new_place = limiter.reserve("olivia", "198.51.100.1", now())

    assert isinstance(refused, Refusal) and refused.reason == "account"
    assert refused.retry_at - now() == limiter.base_delay
    assert isinstance(new_place, Refusal)
    now.advance(minutes=1)
    assert isinstance(limiter.reserve("olivia", "203.0.113.66", now()), Reservation)
    second = limiter.reserve("olivia", "203.0.113.66", now())
    assert isinstance(second, Refusal)
    assert second.retry_at - now() == 2 * limiter.base_delay  # 6 failures: 1 min * 2**1
    for _ in range(20):
        now.advance(minutes=15)
        limiter.reserve("olivia", "203.0.113.66", now())
    capped = limiter.reserve("olivia", "203.0.113.66", now())
    assert isinstance(capped, Refusal) and capped.retry_at - now() == limiter.max_delay
    # the owner's address that logged in before is not delayed at all
    assert isinstance(limiter.reserve("olivia", "192.0.2.10", now()), Reservation)


def test_refused_attempts_do_not_extend_the_delay() -> None:
    limiter = LoginLimiter()
    now = FakeClock(datetime(2026, 3, 2, tzinfo=UTC))
    for _ in range(5):
        limiter.reserve("admin", "203.0.113.66", now())
    for _ in range(100):
        now.advance(seconds=0.5)
        assert isinstance(limiter.reserve("admin", "203.0.113.66", now()), Refusal)
    now.advance(seconds=10.5)  # one minute after the fifth failure

    assert isinstance(limiter.reserve("admin", "203.0.113.66", now()), Reservation)


@sqlite_only
def test_the_owner_logs_in_from_a_known_address_while_an_attacker_fails(
    app: App, clock: FakeClock
) -> None:
    name, password = ACCOUNTS["operator"]
    proxied = with_settings(app, trusted_proxies="127.0.0.1")
    with live(proxied) as (_, client):
        owner = {"x-forwarded-for": "192.0.2.10"}
        attacker = {"x-forwarded-for": "203.0.113.66"}
        stranger = {"x-forwarded-for": "198.51.100.1"}
        assert login(client, name, password, **owner) == 303
        attacks = [login(client, name, "guess", **attacker) for _ in range(8)]
        from_new = login(client, name, password, **stranger)
        clock.advance(seconds=30)
        from_known = login(client, name, password, **owner)

    assert attacks == [401] * 5 + [429] * 3
    # a new address waits out the delay (a minute here), the owner's usual one does not
    assert (from_new, from_known) == (429, 303)


# --- trusted proxies -----------------------------------------------------------------


def test_forwarded_headers_count_only_from_a_trusted_proxy() -> None:
    import ipaddress

    proxies = [ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.1/32")]
    xff = {"x-forwarded-for": "198.51.100.7, 10.1.2.3", "x-forwarded-proto": "https"}

    assert real_client("127.0.0.1", xff, proxies) == ("198.51.100.7", "https")
    assert real_client("192.0.2.1", xff, proxies) == ("192.0.2.1", None)  # not a proxy
    assert real_client("127.0.0.1", xff, []) == ("127.0.0.1", None)
    # a client's own forged entry stays left of the address the proxy appended
    forged = {"x-forwarded-for": "10.9.9.9, 203.0.113.66"}
    assert real_client("127.0.0.1", forged, proxies) == ("203.0.113.66", None)
    rfc = {"forwarded": 'for="[2001:db8::1]:4711";proto=https, for=10.0.0.2'}
    assert real_client("127.0.0.1", rfc, proxies) == ("2001:db8::1", "https")


@sqlite_only
def test_behind_a_trusted_proxy_one_bad_client_does_not_block_the_others(app: App) -> None:
    name, password = ACCOUNTS["viewer"]
    proxied = with_settings(app, trusted_proxies="127.0.0.1")
    with live(proxied) as (_, client):
        bad = [
            login(client, f"user{i}", "guess", **{"x-forwarded-for": "203.0.113.66"})
            for i in range(21)
        ]
        other = login(client, name, password, **{"x-forwarded-for": "198.51.100.7"})
    addresses = {row.detail["address"] for row in _login_rows(app)}

    assert bad == [401] * 20 + [429]
    assert other == 303
    assert addresses == {"203.0.113.66", "198.51.100.7"}


@sqlite_only
def test_without_the_setting_forwarded_headers_are_ignored(app: App) -> None:
    """Negative control: the same requests with no trusted proxy all count against the
    TCP peer, so the second client is blocked too and no header can spoof an address."""
    name, password = ACCOUNTS["viewer"]
    with live(app) as (_, client):
        for i in range(20):
            login(client, f"user{i}", "guess", **{"x-forwarded-for": "203.0.113.66"})
        other = login(client, name, password, **{"x-forwarded-for": "198.51.100.7"})

    assert other == 429


# --- the audit log of logins ---------------------------------------------------------


def _login_rows(app: App) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent)
                .where(AuditEvent.action.startswith("login"))
                .order_by(AuditEvent.id)
            )
        )


@sqlite_only
def test_a_flood_of_refused_logins_leaves_a_handful_of_rows_under_a_fixed_actor(
    app: App, client: TestClient
) -> None:
    statuses = [login(client, "admin", "x-guess-x") for _ in range(300)]
    rows = _login_rows(app)

    assert statuses.count(401) == 5 and statuses.count(429) == 295
    assert {row.actor for row in rows} == {"anonymous"}
    refused = [row.detail["refused"] for row in rows if row.action == "login.refused"]
    assert refused == [1, 10, 100]
    assert len(rows) == 8


def test_attempted_names_are_shown_to_admins_only(app: App, client: TestClient) -> None:
    login(client, "Oper-pass-123", "oper1")
    query = {"action": "login"}

    as_viewer = client.get(f"{API}/audit", params=query, headers=bearer(token_for(app, "viewer")))
    as_admin = client.get(f"{API}/audit", params=query, headers=bearer(token_for(app, "admin")))
    page = new_client(app)
    log_in(page, "viewer")
    html = page.get("/audit").text

    [seen_by_viewer] = [e for e in as_viewer.json()["items"] if e["actor"] == "anonymous"]
    [seen_by_admin] = [e for e in as_admin.json()["items"] if e["actor"] == "anonymous"]
    assert "user" not in seen_by_viewer["detail"]
    assert seen_by_admin["detail"]["user"] == "Oper-pass-123"
    assert "Oper-pass-123" not in html
    assert _login_rows(app)[0].detail["user"] == "Oper-pass-123"  # stored, only hidden


# --- password changes end sessions ---------------------------------------------------


def _sessions_of(app: App, name: str) -> int:
    with app.db.read() as session:
        return (
            session.scalar(select(func.count(WebSession.id)).where(WebSession.user.has(name=name)))
            or 0
        )


def test_an_admin_reset_ends_the_users_sessions_and_optionally_tokens(app: App) -> None:
    victim = new_client(app)
    log_in(victim, "viewer")
    token = token_for(app, "viewer")
    admin = bearer(token_for(app, "admin"))
    with new_client(app) as client:
        kept_token = client.patch(
            f"{API}/users/victor", json={"password": "changed-pass-1"}, headers=admin
        )
        assert kept_token.status_code == 200, kept_token.text
        assert victim.get("/").status_code == 303  # the old session is gone
        assert client.get(f"{API}/jobs", headers=bearer(token)).status_code == 200
        revoked = client.patch(
            f"{API}/users/victor",
            json={"password": "changed-pass-2", "revoke_tokens": True},
            headers=admin,
        )
        assert revoked.status_code == 200
        assert client.get(f"{API}/jobs", headers=bearer(token)).status_code == 401


def test_a_user_changes_their_own_password_on_the_account_page(app: App) -> None:
    other = new_client(app)
    log_in(other, "viewer")
    token = token_for(app, "viewer")
    with new_client(app) as client:
        log_in(client, "viewer")
        csrf = csrf_token_of(client)
        assert "Change your password" in client.get("/account").text
        wrong = client.post(
            "/account/password",
            data={
                "csrf_token": csrf,
                "current_password": "not-it",
                "new_password": "brand-new-pass",
                "confirm_password": "brand-new-pass",
            },
        )
        done = client.post(
            "/account/password",
            data={
                "csrf_token": csrf,
                "current_password": "viewer-password",
                "new_password": "brand-new-pass",
                "confirm_password": "brand-new-pass",
                "revoke_tokens": "1",
            },
        )
        still_here = client.get("/")

    assert wrong.status_code == 422 and "not the current password" in wrong.text
    assert done.status_code == 303
    assert still_here.status_code == 200  # this session stays
    assert other.get("/").status_code == 303  # the other one ended
    assert _sessions_of(app, "victor") == 1
    assert login(new_client(app), "victor", "brand-new-pass") == 303
    assert new_client(app).get(f"{API}/jobs", headers=bearer(token)).status_code == 401


def test_a_user_changes_their_own_password_through_the_api(app: App, client: TestClient) -> None:
    token = token_for(app, "operator")
    wrong = client.post(
        f"{API}/account/password",
        json={"current_password": "nope", "new_password": "another-pass-9"},
        headers=bearer(token),
    )
    done = client.post(
        f"{API}/account/password",
        json={"current_password": "operator-password", "new_password": "another-pass-9"},
        headers=bearer(token),
    )

    assert wrong.status_code == 422 and error_of(wrong)["field"] == "current_password"
    assert done.status_code == 200 and done.json() == {"sessions_ended": 0, "tokens_revoked": 0}
    assert login(client, "olivia", "another-pass-9") == 303


# --- the session cookie --------------------------------------------------------------


def _set_cookie(client: httpx.Client, **headers: str) -> str:
    name, password = ACCOUNTS["viewer"]
    response = client.post("/login", data={"username": name, "password": password}, headers=headers)
    assert response.status_code == 303
    return response.headers["set-cookie"]


@sqlite_only
def test_the_cookie_is_secure_with_the_host_prefix_behind_a_tls_proxy(app: App) -> None:
    with live(with_settings(app, trusted_proxies="127.0.0.1")) as (_, client):
        behind_tls = _set_cookie(client, **{"x-forwarded-proto": "https"})
        plain = _set_cookie(client)
        cookie = behind_tls.split(";")[0].split("=", 1)[1]
        page = client.get("/", cookies={SECURE_SESSION_COOKIE: cookie})
    with live(app) as (_, client):
        untrusted = _set_cookie(client, **{"x-forwarded-proto": "https"})
    with live(with_settings(app, cookie_secure=True)) as (_, client):
        configured = _set_cookie(client)

    assert behind_tls.startswith(f"{SECURE_SESSION_COOKIE}=") and "Secure" in behind_tls
    assert page.status_code == 200
    assert plain.startswith(f"{SESSION_COOKIE}=") and "Secure" not in plain
    assert untrusted.startswith(f"{SESSION_COOKIE}=") and "Secure" not in untrusted
    assert configured.startswith(f"{SECURE_SESSION_COOKIE}=") and "Secure" in configured


# --- login CSRF, caching, redirects, docs --------------------------------------------


@sqlite_only
@pytest.mark.parametrize(
    "headers",
    [{"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}, {"origin": "null"}],
)
def test_a_cross_site_login_post_is_refused(client: TestClient, headers: dict[str, str]) -> None:
    name, password = ACCOUNTS["viewer"]
    response = client.post("/login", data={"username": name, "password": password}, headers=headers)

    assert response.status_code == 403
    assert "set-cookie" not in response.headers


@sqlite_only
@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://testserver"},
        {"sec-fetch-site": "same-origin"},
        {},
        {"origin": "https://cron.example.com", "x-forwarded-host": "cron.example.com"},
    ],
)
def test_a_same_site_login_post_is_accepted(client: TestClient, headers: dict[str, str]) -> None:
    name, password = ACCOUNTS["viewer"]
    assert login(client, name, password, **headers) == 303


@sqlite_only
def test_pages_of_a_logged_in_caller_are_not_cached(browser: TestClient, app: App) -> None:
    pages = ["/", "/runs", "/audit", "/tokens", "/account"]
    cached = {path: browser.get(path).headers.get("cache-control") for path in pages}
    with new_client(app) as anonymous:
        login_page = anonymous.get("/login")
        static = anonymous.get("/static/fleetcron.css")

    assert cached == dict.fromkeys(pages, "no-store")
    # negative control: what nobody logged in fetches may be cached
    assert "cache-control" not in login_page.headers
    assert static.headers.get("cache-control") != "no-store"


@sqlite_only
def test_trailing_slash_redirects_do_not_reflect_the_host_header(
    client: TestClient, as_viewer: dict[str, str]
) -> None:
    evil = {"host": "evil.example"}
    static = client.get("/static", headers=evil)
    api = client.get(f"{API}/jobs/", headers={**evil, **as_viewer})

    assert static.status_code in (307, 308) and static.headers["location"] == "/static/"
    assert api.status_code in (307, 308) and api.headers["location"] == f"{API}/jobs"


@sqlite_only
def test_the_swagger_ui_is_off_and_the_schema_stays_public(client: TestClient) -> None:
    assert client.get(f"{API}/docs").status_code in (401, 404)
    assert client.get("/docs/oauth2-redirect").status_code in (303, 404)
    schema = client.get(f"{API}/openapi.json")
    assert schema.status_code == 200 and "/api/v1/jobs" in schema.json()["paths"]


# --- token expiry ---------------------------------------------------------------------


def test_a_token_with_an_expiry_is_refused_after_it(
    app: App, client: TestClient, clock: FakeClock, as_viewer: dict[str, str]
) -> None:
    created = client.post(
        f"{API}/tokens", json={"name": "short", "expires_in_days": 2}, headers=as_viewer
    )
    assert created.status_code == 201, created.text
    short = bearer(created.json()["token"])
    listed = client.get(f"{API}/tokens", headers=as_viewer).json()

    assert client.get(f"{API}/jobs", headers=short).status_code == 200
    clock.advance(days=2)
    expired = client.get(f"{API}/jobs", headers=short)
    assert expired.status_code == 401 and "expired" in str(error_of(expired)["message"])
    assert client.get(f"{API}/jobs", headers=as_viewer).status_code == 200  # no expiry
    [entry] = [t for t in listed if t["name"] == "short"]
    assert entry["expires_at"] is not None


@sqlite_only
@pytest.mark.parametrize("days", [0, 3651, -1])
def test_a_token_expiry_out_of_range_names_the_field(
    client: TestClient, as_viewer: dict[str, str], days: int
) -> None:
    response = client.post(
        f"{API}/tokens", json={"name": "bad", "expires_in_days": days}, headers=as_viewer
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "expires_in_days"


@sqlite_only
def test_the_token_page_creates_an_expiring_token_and_shows_age_and_last_use(
    app: App, browser: TestClient, clock: FakeClock
) -> None:
    csrf = csrf_token_of(browser)
    made = browser.post(
        "/tokens/new", data={"name": "weekly", "expires_in_days": "7", "csrf_token": csrf}
    )
    bad = browser.post(
        "/tokens/new", data={"name": "oops", "expires_in_days": "soon", "csrf_token": csrf}
    )
    assert made.status_code == 201 and bad.status_code == 422
    token = made.text.split('id="new-token">')[1].split("<")[0]
    clock.advance(days=3)
    browser.get(f"{API}/jobs", headers=bearer(token))
    clock.advance(days=2)
    log_in(browser, "operator")  # the session of five days ago has expired
    page = browser.get("/tokens").text

    row = page.split('data-token="weekly"')[1].split("</tr>")[0]
    assert "(5 days ago)" in row  # age
    assert "(2 days ago)" in row  # last use
    assert "2026-03-09" in row  # expiry: created 2026-03-02 + 7 days


def test_the_limiter_forgets_idle_names_so_its_memory_stays_bounded() -> None:
    from fleetcron.web import ratelimit

    limiter = LoginLimiter()
    now = FakeClock(datetime(2026, 3, 2, tzinfo=UTC))
    for i in range(ratelimit.PRUNE_ABOVE):
        limiter.reserve(f"name-{i}", f"10.0.{i // 250}.{i % 250}", now())
    remembered = len(limiter._accounts)
    now.advance(hours=2)
    limiter.reserve("late", "192.0.2.1", now())

    assert remembered == ratelimit.PRUNE_ABOVE
    assert set(limiter._accounts) == {"late"}


@sqlite_only
def test_a_page_with_a_bad_bearer_token_ends_at_the_login_form_not_in_a_loop(
    client: TestClient,
) -> None:
    bad = {"authorization": "Bearer x"}
    page = client.get("/runs", headers=bad)
    form = client.get(page.headers["location"], headers=bad)

    assert page.status_code == 303
    assert form.status_code == 200 and "password" in form.text


@sqlite_only
def test_a_password_over_1024_characters_is_refused_on_the_form_too(browser: TestClient) -> None:
    log_in(browser, "admin")
    csrf = csrf_token_of(browser)
    response = browser.post(
        "/users/new",
        data={"name": "longpw", "password": "p" * 2000, "role": "viewer", "csrf_token": csrf},
    )

    assert response.status_code == 422 and "1024" in response.text


@sqlite_only
def test_the_cluster_peer_route_is_not_refused_before_its_own_signature_check(
    client: TestClient,
) -> None:
    """Peer routes authenticate with a signed envelope, not a user's credentials: the
    early authentication lets them through (standalone, the route itself answers 404)."""
    response = client.post(f"{API}/cluster/identity", json={"signed": "nothing"})

    assert response.status_code == 404
