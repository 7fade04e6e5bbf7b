"""/api/v1/users and /api/v1/tokens on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from fixtures.app import FakeClock
from integration.web.conftest import API, bearer, error_of, sqlite_only

Headers = dict[str, str]


def user_names(client: TestClient, headers: Headers) -> list[str]:
    return [u["name"] for u in client.get(f"{API}/users", headers=headers).json()]


def test_an_admin_adds_a_user_with_a_role(client: TestClient, as_admin: Headers) -> None:
    response = client.post(
        f"{API}/users",
        json={"name": "nina", "password": "nina-password", "role": "operator"},
        headers=as_admin,
    )

    assert response.status_code == 201, response.text
    assert (response.json()["name"], response.json()["role"]) == ("nina", "operator")
    assert "password" not in response.text
    assert user_names(client, as_admin) == ["admin", "nina", "olivia", "victor"]


def test_a_new_user_logs_in_with_the_password_given(client: TestClient, as_admin: Headers) -> None:
    client.post(
        f"{API}/users", json={"name": "nina", "password": "nina-password"}, headers=as_admin
    )

    response = client.post("/login", data={"username": "nina", "password": "nina-password"})

    assert response.status_code == 303


def test_a_duplicate_user_is_a_conflict_naming_the_field(
    client: TestClient, as_admin: Headers
) -> None:
    response = client.post(
        f"{API}/users", json={"name": "olivia", "password": "another-password"}, headers=as_admin
    )

    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["field"]) == ("conflict", "name")


@sqlite_only
def test_an_unknown_role_is_refused_naming_the_field(client: TestClient, as_admin: Headers) -> None:
    response = client.post(
        f"{API}/users",
        json={"name": "nina", "password": "nina-password", "role": "root"},
        headers=as_admin,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "role"
    assert "nina" not in user_names(client, as_admin)


def test_a_role_is_changed_with_a_patch(client: TestClient, as_admin: Headers) -> None:
    response = client.patch(f"{API}/users/victor", json={"role": "operator"}, headers=as_admin)

    assert response.status_code == 200, response.text
    assert response.json()["role"] == "operator"


def test_a_new_password_set_with_a_patch_is_the_one_that_logs_in(
    client: TestClient, as_admin: Headers
) -> None:
    client.patch(f"{API}/users/victor", json={"password": "fresh-password"}, headers=as_admin)

    old = client.post("/login", data={"username": "victor", "password": "viewer-password"})
    new = client.post("/login", data={"username": "victor", "password": "fresh-password"})

    assert (old.status_code, new.status_code) == (401, 303)


def test_a_patch_of_an_unknown_user_is_404(client: TestClient, as_admin: Headers) -> None:
    response = client.patch(f"{API}/users/ghost", json={"role": "viewer"}, headers=as_admin)

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


@sqlite_only
def test_an_empty_patch_of_an_unknown_user_is_404(client: TestClient, as_admin: Headers) -> None:
    response = client.patch(f"{API}/users/ghost", json={}, headers=as_admin)

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_a_new_role_applies_at_once_to_the_users_existing_token(
    client: TestClient, as_admin: Headers, as_operator: Headers
) -> None:
    client.patch(f"{API}/users/olivia", json={"role": "viewer"}, headers=as_admin)

    response = client.post(
        f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_operator
    )

    assert response.status_code == 403
    assert "olivia (viewer)" in str(error_of(response)["message"])


def test_deleting_a_user_answers_204_and_removes_them(
    client: TestClient, as_admin: Headers
) -> None:
    response = client.delete(f"{API}/users/victor", headers=as_admin)

    assert response.status_code == 204
    assert "victor" not in user_names(client, as_admin)


def test_a_deleted_users_token_no_longer_authenticates(
    client: TestClient, as_admin: Headers, as_viewer: Headers
) -> None:
    client.delete(f"{API}/users/victor", headers=as_admin)

    response = client.get(f"{API}/jobs", headers=as_viewer)

    assert response.status_code == 401


def test_the_last_admin_cannot_be_deleted(client: TestClient, as_admin: Headers) -> None:
    response = client.delete(f"{API}/users/admin", headers=as_admin)

    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict"
    assert "admin" in user_names(client, as_admin)


def test_the_last_admin_cannot_be_demoted(client: TestClient, as_admin: Headers) -> None:
    response = client.patch(f"{API}/users/admin", json={"role": "operator"}, headers=as_admin)

    assert response.status_code == 409
    assert error_of(response)["code"] == "conflict"


def test_a_patch_whose_role_is_refused_changes_no_password(
    client: TestClient, as_admin: Headers
) -> None:
    # The last admin cannot be demoted: the password given with that role must not be set
    # either (it used to be, ending the admin's sessions, before the 409).
    response = client.patch(
        f"{API}/users/admin",
        json={"password": "taken-over-password", "role": "viewer"},
        headers=as_admin,
    )

    assert response.status_code == 409
    assert error_of(response)["field"] == "name"
    old = client.post("/login", data={"username": "admin", "password": "admin-password"})
    new = client.post("/login", data={"username": "admin", "password": "taken-over-password"})
    assert (old.status_code, new.status_code) == (303, 401)


def test_a_patch_whose_password_is_refused_changes_no_role(
    client: TestClient, as_admin: Headers
) -> None:
    response = client.patch(
        f"{API}/users/victor", json={"password": "short", "role": "admin"}, headers=as_admin
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "password"
    roles = {u["name"]: u["role"] for u in client.get(f"{API}/users", headers=as_admin).json()}
    assert roles["victor"] == "viewer"


def test_a_patch_with_a_password_and_a_role_sets_both(
    client: TestClient, as_admin: Headers
) -> None:
    response = client.patch(
        f"{API}/users/victor",
        json={"password": "fresh-password", "role": "operator"},
        headers=as_admin,
    )

    assert response.status_code == 200, response.text
    assert response.json()["role"] == "operator"
    login = client.post("/login", data={"username": "victor", "password": "fresh-password"})
    assert login.status_code == 303


@sqlite_only
def test_an_admin_can_be_deleted_once_there_is_another(
    client: TestClient, as_admin: Headers
) -> None:
    client.patch(f"{API}/users/olivia", json={"role": "admin"}, headers=as_admin)

    response = client.delete(f"{API}/users/admin", headers=as_admin)

    assert response.status_code == 204


def create_token(client: TestClient, headers: Headers, **body: Any) -> dict[str, Any]:
    response = client.post(f"{API}/tokens", json={"name": "ci", **body}, headers=headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_a_new_token_is_shown_once_and_authenticates(
    client: TestClient, as_viewer: Headers
) -> None:
    created = create_token(client, as_viewer)

    assert created["token"].startswith("fct_")
    assert client.get(f"{API}/jobs", headers=bearer(created["token"])).status_code == 200
    listed = client.get(f"{API}/tokens", headers=as_viewer).text
    assert created["token"] not in listed


@sqlite_only
def test_the_token_list_shows_the_prefix_and_no_use_before_the_first(
    client: TestClient, as_viewer: Headers
) -> None:
    created = create_token(client, as_viewer)

    listed = client.get(f"{API}/tokens", headers=as_viewer).json()

    [entry] = [t for t in listed if t["id"] == created["id"]]
    assert entry["prefix"] == created["token"][:10]
    assert entry["last_used_at"] is None
    assert "token" not in entry


def test_the_token_list_shows_when_a_token_was_last_used(
    client: TestClient, as_viewer: Headers, clock: FakeClock
) -> None:
    created = create_token(client, as_viewer)
    clock.advance(minutes=5)  # 09:05:30
    client.get(f"{API}/targets", headers=bearer(created["token"]))

    listed = client.get(f"{API}/tokens", headers=bearer(created["token"])).json()

    [entry] = [t for t in listed if t["id"] == created["id"]]
    assert entry["last_used_at"] == "2026-03-02T09:05:30Z"


@sqlite_only
def test_a_tokens_last_use_is_recorded_to_the_minute(
    client: TestClient, as_viewer: Headers, clock: FakeClock
) -> None:
    created = create_token(client, as_viewer)
    auth = bearer(created["token"])

    def last_used() -> str:
        listed = client.get(f"{API}/tokens", headers=as_viewer).json()
        [entry] = [t for t in listed if t["id"] == created["id"]]
        return str(entry["last_used_at"])

    client.get(f"{API}/targets", headers=auth)  # 09:00:30, the first use
    clock.advance(seconds=59)
    client.get(f"{API}/targets", headers=auth)
    assert last_used() == "2026-03-02T09:00:30Z"
    clock.advance(seconds=1)  # a minute after the recorded use
    client.get(f"{API}/targets", headers=auth)
    assert last_used() == "2026-03-02T09:01:30Z"


def test_the_token_list_shows_only_the_callers_own_tokens(
    client: TestClient, as_viewer: Headers, as_operator: Headers
) -> None:
    create_token(client, as_operator, name="olivias")

    listed = client.get(f"{API}/tokens", headers=as_viewer).json()

    assert "olivias" not in [t["name"] for t in listed]


def test_a_revoked_token_is_refused_with_401(client: TestClient, as_viewer: Headers) -> None:
    created = create_token(client, as_viewer)

    revoked = client.delete(f"{API}/tokens/{created['id']}", headers=as_viewer)
    response = client.get(f"{API}/jobs", headers=bearer(created["token"]))

    assert revoked.status_code == 204
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] == "unauthenticated"


def test_a_revoked_token_is_listed_with_its_revocation_time(
    client: TestClient, as_viewer: Headers
) -> None:
    created = create_token(client, as_viewer)
    client.delete(f"{API}/tokens/{created['id']}", headers=as_viewer)

    listed = client.get(f"{API}/tokens", headers=as_viewer).json()

    [entry] = [t for t in listed if t["id"] == created["id"]]
    assert entry["revoked_at"] == "2026-03-02T09:00:30Z"


@sqlite_only
def test_a_viewer_cannot_create_a_token_for_someone_else(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.post(
        f"{API}/tokens", json={"name": "ci", "user": "olivia"}, headers=as_viewer
    )

    assert response.status_code == 403
    assert error_of(response)["code"] == "forbidden"


@sqlite_only
def test_an_admin_creates_a_token_for_another_user_that_acts_as_them(
    client: TestClient, as_admin: Headers
) -> None:
    created = create_token(client, as_admin, user="victor")

    as_victor = bearer(created["token"])
    response = client.post(
        f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_victor
    )

    assert response.status_code == 403


@sqlite_only
def test_a_viewer_cannot_revoke_someone_elses_token(
    client: TestClient, as_viewer: Headers, as_operator: Headers
) -> None:
    created = create_token(client, as_operator)

    response = client.delete(f"{API}/tokens/{created['id']}", headers=as_viewer)

    # answered like a missing token, so token ids cannot be probed
    assert response.status_code == 404
    assert client.get(f"{API}/jobs", headers=bearer(created["token"])).status_code == 200


@sqlite_only
def test_revoking_an_unknown_token_is_404(client: TestClient, as_viewer: Headers) -> None:
    response = client.delete(f"{API}/tokens/4242", headers=as_viewer)

    assert response.status_code == 404


def test_a_token_id_beyond_the_id_range_is_refused_naming_it(
    client: TestClient, as_viewer: Headers
) -> None:
    # 2**31 is past PostgreSQL's integer: let through, it would reach the driver and fail there.
    response = client.delete(f"{API}/tokens/{2**31}", headers=as_viewer)

    assert response.status_code == 422
    assert error_of(response)["field"] == "token_id"


@sqlite_only
def test_an_invalid_token_name_is_refused_naming_the_field(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.post(f"{API}/tokens", json={"name": "CI Token"}, headers=as_viewer)

    assert response.status_code == 422
    assert error_of(response)["field"] == "name"
