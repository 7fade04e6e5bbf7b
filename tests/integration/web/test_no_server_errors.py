"""Every route, with the hostile values of the security audit, answers without a 500:
ids beyond 64 bits, dates whose conversion overflows, a time-zone cookie naming a tzdata
directory or too long, a forged or deeply nested flash cookie, and control characters.

The routes are enumerated from the application, so routes added later are swept too."""

from __future__ import annotations

import base64
import dataclasses

import pytest
from fastapi.testclient import TestClient

from fleetcron.app import App
from integration.web.conftest import bearer, log_in, new_client, sqlite_only, token_for
from integration.web.test_route_permissions import Endpoint, call, endpoints

HUGE = "99999999999999999999"
DATES = ("9999-12-31T23:59:59-11:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59")
NESTED = base64.urlsafe_b64encode(b"[" * 3000 + b"]" * 3000).decode()
COOKIES = {
    "directory zone": {"fleetcron_tz": "America"},
    "long zone": {"fleetcron_tz": "A" * 300},
    "traversal zone": {"fleetcron_tz": "../../../../etc/passwd"},
    "nested flash": {"fleetcron_flash": NESTED},
    "forged flash": {"fleetcron_flash": base64.urlsafe_b64encode(b'["ok", "forged"]').decode()},
}


def hostile(endpoint: Endpoint) -> Endpoint:
    """The endpoint with every numeric id replaced by one beyond 64 bits."""
    url = endpoint.url.replace("987654", HUGE)
    return dataclasses.replace(endpoint, url=url, public=False)


def sweep(client: TestClient, headers: dict[str, str]) -> list[str]:
    web = client.app
    assert hasattr(web, "routes")
    errors = []
    for endpoint in endpoints(web):  # type: ignore[arg-type]
        target = hostile(endpoint)
        response = call(client, target, headers)
        if response.status_code >= 500:
            errors.append(f"{target.method} {target.url}: {response.status_code}")
        if endpoint.method == "GET":
            for date in DATES:
                url = f"{target.url}?since={date}&until={date}"
                status = client.get(url, headers=headers).status_code
                if status >= 500:
                    errors.append(f"GET {url}: {status}")
    return errors


@sqlite_only
def test_every_route_as_an_admin_token_answers_hostile_values_without_a_500(app: App) -> None:
    with new_client(app) as c:
        assert sweep(c, bearer(token_for(app, "admin"))) == []


@sqlite_only
def test_every_page_in_a_browser_session_answers_hostile_values_without_a_500(app: App) -> None:
    with new_client(app) as client:
        log_in(client, "admin")
        assert sweep(client, {}) == []


@sqlite_only
@pytest.mark.parametrize("case", sorted(COOKIES))
def test_a_hostile_cookie_breaks_no_page(app: App, case: str) -> None:
    with new_client(app) as client:
        log_in(client, "viewer")
        for name, value in COOKIES[case].items():
            client.cookies.set(name, value)
        pages = {path: client.get(path) for path in ("/", "/runs", "/audit", "/tokens")}
    with new_client(app) as anonymous:
        for name, value in COOKIES[case].items():
            anonymous.cookies.set(name, value)
        pages["/login"] = anonymous.get("/login")

    assert {path: r.status_code for path, r in pages.items()} == dict.fromkeys(pages, 200)
    assert "forged" not in pages["/"].text  # an unsigned flash is not shown


@sqlite_only
def test_a_flash_message_written_by_the_server_is_still_shown(app: App) -> None:
    with new_client(app) as client:
        log_in(client, "viewer")
        from integration.web.conftest import csrf_token_of

        csrf = csrf_token_of(client)
        created = client.post("/tokens/new", data={"name": "flashy", "csrf_token": csrf})
        assert created.status_code == 201
        revoke = next(
            line for line in created.text.splitlines() if "/revoke" in line and "action" in line
        )
        action = revoke.split('action="')[1].split('"')[0]
        done = client.post(action, data={"csrf_token": csrf})
        shown = client.get("/tokens")

    assert done.status_code == 303 and "fleetcron_flash" in done.headers["set-cookie"]
    assert "Revoked the token" in shown.text
