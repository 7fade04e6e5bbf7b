"""The real web application over the ``app`` fixture (SQLite and PostgreSQL).

``client`` talks to the ASGI app in process through :class:`fastapi.testclient.TestClient`
(httpx underneath): every middleware, dependency and exception handler runs as in
production. It does not follow redirects, and an unhandled exception becomes a 500 answer
rather than an exception in the test, so a test can assert "never a 500".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlalchemy import update

from fleetcron.app import Actor, App
from fleetcron.services.accounts import users
from fleetcron.services.accounts.users import create_token
from fleetcron.store.schema import User
from fleetcron.web.app import create_app

API = "/api/v1"

#: For tests whose subject does not touch the database (headers, request validation):
#: run them on SQLite only instead of twice.
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

#: the seeded users of ``fixtures.app``: role -> (name, password)
ACCOUNTS = {
    "admin": ("admin", "admin-password"),
    "operator": ("olivia", "operator-password"),
    "viewer": ("victor", "viewer-password"),
}

_CSRF_INPUT = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture(autouse=True)
def cheap_password_hashing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Argon2id with the smallest cost for the tests that use ``app``.

    The product's cost (64 MiB, 3 passes) spends a large part of a second per log-in, and
    these tests log in about a hundred times. The hashing is still real argon2id:
    the seeded users' hashes are rewritten with the cheap parameters (verification reads
    them from the hash), and new hashes use them too.
    """
    if "app" not in request.fixturenames:
        return
    app: App = request.getfixturevalue("app")
    cheap = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
    monkeypatch.setattr(users, "_hasher", cheap)
    with app.db.session() as session:
        for name, password in ACCOUNTS.values():
            session.execute(
                update(User).where(User.name == name).values(password_hash=cheap.hash(password))
            )


def new_client(app: App) -> TestClient:
    return TestClient(create_app(app), raise_server_exceptions=False, follow_redirects=False)


@pytest.fixture
def client(app: App) -> Iterator[TestClient]:
    with new_client(app) as the_client:
        yield the_client


def token_for(app: App, role: str, token_name: str = "tests") -> str:
    """A fresh API token of the seeded user with ``role``."""
    name, _ = ACCOUNTS[role]
    token, _ = create_token(app, Actor(name, role), name, token_name)
    return token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def as_admin(app: App) -> dict[str, str]:
    """Authorization headers of the admin's API token."""
    return bearer(token_for(app, "admin"))


@pytest.fixture
def as_operator(app: App) -> dict[str, str]:
    return bearer(token_for(app, "operator"))


@pytest.fixture
def as_viewer(app: App) -> dict[str, str]:
    return bearer(token_for(app, "viewer"))


def log_in(client: TestClient, role: str) -> None:
    """Log in through the form; the client keeps the session cookie."""
    name, password = ACCOUNTS[role]
    response = client.post("/login", data={"username": name, "password": password})
    assert response.status_code == 303, response.text


def csrf_token_of(client: TestClient) -> str:
    """The CSRF token a logged-in browser finds in every page (hidden input ``csrf_token``)."""
    page = client.get("/")
    assert page.status_code == 200, page.text
    found = _CSRF_INPUT.search(page.text)
    assert found is not None, "no csrf_token input on the dashboard"
    return found.group(1)


@pytest.fixture
def browser(app: App) -> Iterator[TestClient]:
    """A client logged in as the operator with a session cookie (no bearer token)."""
    with new_client(app) as the_client:
        log_in(the_client, "operator")
        yield the_client


def error_of(response: httpx.Response) -> dict[str, object]:
    """The ``error`` object of a JSON error answer, checking its shape on the way."""
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, object] = body["error"]
    assert set(error) == {"code", "message", "field"}, error
    assert isinstance(error["message"], str) and error["message"], error
    return error
