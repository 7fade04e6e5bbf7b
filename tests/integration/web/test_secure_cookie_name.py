"""Over https (or with ``cookie_secure``) only the ``__Host-`` session cookie counts: the
plain name, which a sibling subdomain can plant, is ignored."""

from __future__ import annotations

import httpx

from fleetcron.app import App
from fleetcron.web.deps import SECURE_SESSION_COOKIE, SESSION_COOKIE
from integration.web.conftest import ACCOUNTS, API, new_client, sqlite_only
from integration.web.live import live, with_settings

HTTPS = {"x-forwarded-proto": "https"}


def _session(client: httpx.Client, **headers: str) -> str:
    name, password = ACCOUNTS["viewer"]
    response = client.post("/login", data={"username": name, "password": password}, headers=headers)
    assert response.status_code == 303, response.text
    return response.headers["set-cookie"].split(";")[0].split("=", 1)[1]


def _status(client: httpx.Client, path: str, cookie: str, value: str, **headers: str) -> int:
    client.cookies.clear()
    client.cookies.set(cookie, value)
    return client.get(path, headers=headers).status_code


@sqlite_only
def test_behind_a_tls_proxy_only_the_host_prefixed_name_is_accepted(app: App) -> None:
    with live(with_settings(app, trusted_proxies="127.0.0.1")) as (_, client):
        value = _session(client, **HTTPS)
        secure_page = _status(client, "/", SECURE_SESSION_COOKIE, value, **HTTPS)
        plain_page = _status(client, "/", SESSION_COOKIE, value, **HTTPS)
        plain_api = _status(client, f"{API}/jobs", SESSION_COOKIE, value, **HTTPS)
        # control: over plain http the plain name is the session cookie and is accepted
        http_value = _session(client)
        over_http = _status(client, "/", SESSION_COOKIE, http_value)

    assert secure_page == 200
    assert plain_page == 303  # to the log-in page: not logged in
    assert plain_api == 401
    assert over_http == 200


@sqlite_only
def test_with_cookie_secure_only_the_host_prefixed_name_is_accepted(app: App) -> None:
    with new_client(with_settings(app, cookie_secure=True)) as client:
        value = _session(client)
        secure_api = _status(client, f"{API}/jobs", SECURE_SESSION_COOKIE, value)
        plain_api = _status(client, f"{API}/jobs", SESSION_COOKIE, value)
    with new_client(app) as client:  # control: cookie_secure unset, plain http
        value = _session(client)
        plain_default = _status(client, f"{API}/jobs", SESSION_COOKIE, value)

    assert secure_api == 200
    assert plain_api == 401
    assert plain_default == 200
