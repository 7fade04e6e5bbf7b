"""API token scopes (read, run, write) narrow what a token may do within its owner's role,
against the real server; a token without write cannot mint tokens; another user's token is
answered like a missing one; tokens made before scopes are write (migration 0025)."""

from __future__ import annotations

from typing import Any

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import text

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.permissions import MATRIX, SCOPE_NEEDED, SCOPES
from fleetcron.services.accounts.users import create_token
from fleetcron.store.db import alembic_config
from integration.web.conftest import ACCOUNTS, API, bearer, error_of, sqlite_only

Headers = dict[str, str]


def scoped(app: App, role: str, scope: str) -> Headers:
    name, _ = ACCOUNTS[role]
    token, _ = create_token(app, Actor(name, role), name, f"t-{scope}", scope=scope)
    return bearer(token)


def three_actions(client: TestClient, headers: Headers, tag: str) -> tuple[int, int, int]:
    """(read, run, write) statuses: list jobs; stop a run (404: allowed, no such run);
    add a job (201)."""
    read = client.get(f"{API}/jobs", headers=headers).status_code
    run = client.post(f"{API}/runs/999999/stop", headers=headers).status_code
    job = {"name": f"j-{tag}", "schedule": "0 3 * * *", "command": "true", "bulk": True}
    write = client.post(f"{API}/jobs", json=job, headers=headers).status_code
    return read, run, write


@pytest.mark.parametrize(
    ("role", "scope", "expected"),
    [
        ("operator", "read", (200, 403, 403)),
        ("operator", "run", (200, 404, 403)),
        ("operator", "write", (200, 404, 201)),
        # never wider than the role: a viewer's write token reads only
        ("viewer", "write", (200, 403, 403)),
        ("viewer", "run", (200, 403, 403)),
    ],
)
def test_each_scope_allows_what_it_names_and_no_more_than_the_role(
    app: App, client: TestClient, role: str, scope: str, expected: tuple[int, int, int]
) -> None:
    assert three_actions(client, scoped(app, role, scope), f"{role}-{scope}") == expected


def test_a_refusal_by_scope_names_the_scope_needed(app: App, client: TestClient) -> None:
    refused = client.post(f"{API}/runs/999999/stop", headers=scoped(app, "operator", "read"))

    assert refused.status_code == 403
    assert "read scope" in str(error_of(refused)["message"])
    assert "run scope" in str(error_of(refused)["message"])


@pytest.mark.parametrize(("scope", "status"), [("read", 403), ("run", 403), ("write", 201)])
def test_only_a_write_token_mints_tokens(
    app: App, client: TestClient, scope: str, status: int
) -> None:
    response = client.post(
        f"{API}/tokens",
        json={"name": "minted", "scope": "write"},
        headers=scoped(app, "admin", scope),
    )

    assert response.status_code == status, response.text


def test_a_created_tokens_scope_is_listed_and_enforced(app: App, client: TestClient) -> None:
    owner = scoped(app, "operator", "write")
    made = client.post(f"{API}/tokens", json={"name": "ro", "scope": "read"}, headers=owner)
    listed = {t["name"]: t["scope"] for t in client.get(f"{API}/tokens", headers=owner).json()}
    statuses = three_actions(client, bearer(made.json()["token"]), "made")

    assert made.status_code == 201
    assert listed["ro"] == "read"
    assert statuses == (200, 403, 403)


@sqlite_only
def test_a_bad_scope_is_refused_naming_the_field(app: App, client: TestClient) -> None:
    response = client.post(
        f"{API}/tokens", json={"name": "x", "scope": "admin"}, headers=scoped(app, "admin", "write")
    )

    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "scope"
    assert "read" in str(error["message"]) and "write" in str(error["message"])


@sqlite_only
def test_the_token_page_creates_a_scoped_token(app: App) -> None:
    from integration.web.conftest import csrf_token_of, log_in, new_client

    with new_client(app) as browser:
        log_in(browser, "operator")
        csrf = csrf_token_of(browser)
        page = browser.get("/tokens")
        made = browser.post("/tokens/new", data={"name": "ui", "scope": "run", "csrf_token": csrf})
        bad = browser.post("/tokens/new", data={"name": "ui2", "scope": "root", "csrf_token": csrf})

    assert '<select id="token-scope" name="scope"' in page.text
    assert made.status_code == 201
    token = made.text.split('<code id="new-token">')[1].split("<")[0]
    with TestClient(browser.app) as client:
        assert three_actions(client, bearer(token), "ui") == (200, 404, 403)
    assert bad.status_code == 422 and "scope" in bad.text and "root" in bad.text


def test_every_action_has_a_scope() -> None:
    assert set(SCOPE_NEEDED) == set(MATRIX)
    assert set(SCOPE_NEEDED.values()) <= set(SCOPES)
    assert {a for a, s in SCOPE_NEEDED.items() if s == "run"} == {"job.run", "run.stop"}
    assert SCOPE_NEEDED["token.manage_own"] == "write"


# --- revoking: no id probing ---------------------------------------------------------


def _revoke(client: TestClient, token_id: int, headers: Headers) -> tuple[int, Any]:
    response = client.delete(f"{API}/tokens/{token_id}", headers=headers)
    return response.status_code, response.json() if response.content else None


def test_another_users_token_is_answered_like_a_missing_one(app: App, client: TestClient) -> None:
    _, theirs = create_token(app, Actor("olivia", "operator"), "olivia", "theirs")
    viewer = scoped(app, "viewer", "write")
    other, other_body = _revoke(client, theirs, viewer)
    missing, missing_body = _revoke(client, 424242, viewer)
    # controls: one's own token, and an admin revoking someone else's
    _, mine = create_token(app, Actor("victor", "viewer"), "victor", "mine")
    own, _ = _revoke(client, mine, viewer)
    by_admin, _ = _revoke(client, theirs, scoped(app, "admin", "write"))

    assert other == missing == 404
    assert other_body["error"]["message"].replace(str(theirs), "N") == missing_body["error"][
        "message"
    ].replace("424242", "N")
    assert own == 204
    assert by_admin == 204


# --- CLI and migration ---------------------------------------------------------------


@sqlite_only
def test_the_cli_creates_a_scoped_token_and_refuses_a_bad_scope(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    point_the_cli_at(app, monkeypatch)
    made = run_cli(cli, ["token", "create", "cli-ro", "--scope", "read", "--as", "olivia"])
    capsys.readouterr()
    listed = run_cli(cli, ["token", "list", "--json", "--as", "olivia"])
    out = capsys.readouterr().out
    bad = run_cli(cli, ["token", "create", "cli-x", "--scope", "admin", "--as", "olivia"])
    err = capsys.readouterr().err

    assert made == 0 and listed == 0
    assert '"scope": "read"' in out
    assert bad == 2
    assert "--scope" in err and "admin" in err and "Traceback" not in err


def test_tokens_made_before_scopes_become_write(app: App, client: TestClient) -> None:
    command.downgrade(alembic_config(engine=app.db.engine), "0024")
    with app.db.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO api_tokens (user_id, name, token_hash, prefix, created_at) "
                "SELECT id, 'old', :h, 'fct_old', :at FROM users WHERE name = 'olivia'"
            ),
            {"h": "0" * 64, "at": app.now()},
        )
    app.db.upgrade()
    with app.db.engine.connect() as connection:
        scope = connection.execute(
            text("SELECT scope FROM api_tokens WHERE name = 'old'")
        ).scalar_one()

    assert scope == "write"
