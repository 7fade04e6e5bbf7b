"""Names in the user and token forms: no ``maxlength`` that cuts a paste short; the server
refuses a name over 64 characters beside the field and gives it back as typed."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.services.accounts import users as users_svc
from integration.web.conftest import csrf_token_of, log_in, new_client, sqlite_only

pytestmark = sqlite_only


@pytest.fixture
def admin_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "admin")
        yield client


def value_of(page: str, input_id: str) -> str:
    found = re.search(rf'<input id="{input_id}"[^>]* value="([^"]*)"', page)
    assert found is not None, input_id
    return html.unescape(found.group(1))


def error_of(page: str, error_id: str) -> str:
    found = re.search(rf'<p class="field-error" id="{error_id}">(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else ""


@pytest.mark.parametrize("path", ["/users", "/tokens"])
def test_the_name_fields_cut_nothing(admin_browser: TestClient, path: str) -> None:
    page = admin_browser.get(path)
    assert page.status_code == 200
    assert "maxlength" not in page.text


def test_a_user_name_of_65_characters_is_refused_beside_the_field_and_64_is_added(
    app: App, admin: Actor, admin_browser: TestClient
) -> None:
    name = "u" * 65
    form = {"name": name, "role": "viewer", "password": "a-long-password"}
    response = admin_browser.post(
        "/users/new", data={**form, "csrf_token": csrf_token_of(admin_browser)}
    )
    assert response.status_code == 422
    assert error_of(response.text, "new-name-error").startswith(f"name: '{name}' is not a valid")
    assert value_of(response.text, "new-name") == name
    form["name"] = name[:64]
    response = admin_browser.post(
        "/users/new", data={**form, "csrf_token": csrf_token_of(admin_browser)}
    )
    assert response.status_code == 303, response.text
    assert name[:64] in {user.name for user in users_svc.list_users(app, admin)}


def test_a_token_name_of_65_characters_is_refused_beside_the_field_and_64_is_created(
    admin_browser: TestClient,
) -> None:
    name = "t" * 65
    token = csrf_token_of(admin_browser)
    response = admin_browser.post("/tokens/new", data={"name": name, "csrf_token": token})
    assert response.status_code == 422
    assert error_of(response.text, "token-name-error").startswith(f"name: '{name}' is not a valid")
    assert value_of(response.text, "token-name") == name
    response = admin_browser.post("/tokens/new", data={"name": name[:64], "csrf_token": token})
    assert response.status_code == 201, response.text
