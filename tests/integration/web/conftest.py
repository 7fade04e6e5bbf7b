"""The real web application over the ``app`` fixture (SQLite and PostgreSQL).

``client`` talks to the ASGI app in process through :class:`fastapi.testclient.TestClient`
(httpx underneath): every middleware, dependency and exception handler runs as in
production. It does not follow redirects, and an unhandled exception becomes a 500 answer
rather than an exception in the test, so a test can assert "never a 500".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI
from fastapi.routing import APIRouter
from fastapi.testclient import TestClient
from sqlalchemy import update

from fixtures.app import derived_postgres, derived_sqlite, make_settings
from fixtures.postgres import PostgresServer
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
    these tests log in about a hundred times. The hashing is still real argon2id: the
    seeded users' hashes have the cheap parameters already in this package's templates
    (:func:`sqlite_template`, :func:`postgres_template`; verification reads them from the
    hash), and new hashes use them too.
    """
    if "app" not in request.fixturenames:
        return
    monkeypatch.setattr(users, "_hasher", CHEAP_HASHER)


CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@pytest.fixture(scope="session")
def sqlite_template(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded SQLite template with the users' passwords hashed by :data:`CHEAP_HASHER`,
    made once per process (rewriting them in every test's copy cost each test a
    transaction); every source a module builds from the template has them too."""
    return derived_sqlite(sqlite_template, tmp_path_factory.mktemp("sqlite-web-template"), _rehash)


@pytest.fixture(scope="session")
def postgres_template(
    postgres_template: str,
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """The seeded PostgreSQL template with cheap password hashes, as :func:`sqlite_template`."""
    return derived_postgres(
        postgres_server,
        postgres_template,
        "fleetcron_web_template",
        tmp_path_factory.mktemp("pg-web-template"),
        _rehash,
    )


def _rehash(database_url: str, data_dir: Path) -> None:
    the_app = App.open(make_settings(data_dir, database_url))
    try:
        cheap_hashes(the_app)
    finally:
        the_app.close()


def cheap_hashes(app: App) -> None:
    """Rewrite the seeded users' password hashes in ``app`` with :data:`CHEAP_HASHER`."""
    with app.db.session() as session:
        for name, password_hash in _cheap_hashes().items():
            session.execute(
                update(User).where(User.name == name).values(password_hash=password_hash)
            )


@functools.cache
def _cheap_hashes() -> dict[str, str]:
    """The seeded users' passwords hashed with :data:`CHEAP_HASHER`, once per process (each
    hash is salted; one is as good as another for every test)."""
    return {name: CHEAP_HASHER.hash(password) for name, password in ACCOUNTS.values()}


#: The route table the first :func:`web_app` of this process built, shared by every later one.
_ROUTES: list[APIRouter] = []


def web_app(app: App) -> FastAPI:
    """``create_app(app)`` with the route table of the first one this process built.

    FastAPI resolves each route's dependencies and models the first time a request is
    matched against it, once per application: a new application paid about 0.1 CPU-s in
    its first requests (every route before the one asked for), in every test. The routes
    are module-level declarations, the same for every application built, so later
    applications take the first one's router, already resolved. Everything else is this
    application's own, as ``create_app`` made it: its state (the app, the login limiter,
    the refusal tally, the metrics), its middleware with this app's settings and its error
    handlers. (The shared router reads dependency overrides from the first application;
    these tests set none.)"""
    web = create_app(app)
    if not _ROUTES:
        _ROUTES.append(web.router)
    else:
        web.router = _ROUTES[0]
    return web


def new_client(app: App) -> TestClient:
    return TestClient(web_app(app), raise_server_exceptions=False, follow_redirects=False)


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
    """The CSRF token a logged-in browser finds in every page (hidden input ``csrf_token``),
    read from the account page: the dashboard, the obvious choice, runs about 47 statements
    (32 ms of CPU on SQLite) against the account page's 5 (5 ms), and this is asked for in
    many tests (the dashboard's own tests render it)."""
    page = client.get("/account")
    assert page.status_code == 200, page.text
    found = _CSRF_INPUT.search(page.text)
    assert found is not None, "no csrf_token input on the account page"
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
