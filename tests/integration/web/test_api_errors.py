"""What the API answers to requests it cannot serve: always the JSON error shape, never a 500."""

from __future__ import annotations

from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, bearer, error_of, sqlite_only

Headers = dict[str, str]


def test_a_request_without_credentials_is_401_with_a_bearer_challenge(
    client: TestClient,
) -> None:
    response = client.get(f"{API}/jobs")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] == "unauthenticated"


def test_an_unknown_token_is_401(client: TestClient) -> None:
    response = client.get(f"{API}/jobs", headers=bearer("fct_" + "x" * 43))

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert error_of(response)["code"] == "unauthenticated"


@sqlite_only
def test_a_token_without_the_product_prefix_is_401(client: TestClient) -> None:
    response = client.get(f"{API}/jobs", headers=bearer("not-a-fleetcron-token"))

    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthenticated"


@sqlite_only
def test_basic_authentication_is_not_accepted(client: TestClient) -> None:
    response = client.get(f"{API}/jobs", headers={"Authorization": "Basic YWRtaW46YWRtaW4="})

    assert response.status_code == 401


@sqlite_only
def test_a_change_without_credentials_is_refused_before_the_body_is_read(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.post(f"{API}/targets", json={"name": "box", "kind": "local"})

    assert response.status_code == 401
    assert client.get(f"{API}/targets", headers=as_viewer).json() == []


@sqlite_only
def test_an_unknown_api_path_is_a_json_404(client: TestClient, as_viewer: Headers) -> None:
    response = client.get(f"{API}/nothing-here", headers=as_viewer)

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


@sqlite_only
def test_a_method_the_path_does_not_have_is_a_json_405(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.put(f"{API}/targets", headers=as_viewer)

    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


@sqlite_only
def test_a_body_that_is_not_json_is_422(client: TestClient, as_operator: Headers) -> None:
    response = client.post(
        f"{API}/targets",
        content=b"{name: box",
        headers={**as_operator, "Content-Type": "application/json"},
    )

    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid"


@sqlite_only
def test_a_body_that_is_a_list_is_422(client: TestClient, as_operator: Headers) -> None:
    response = client.post(f"{API}/targets", json=["box"], headers=as_operator)

    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid"


@sqlite_only
def test_a_wrongly_typed_field_is_refused_naming_it(
    client: TestClient, as_operator: Headers
) -> None:
    response = client.post(
        f"{API}/targets", json={"name": "box", "kind": "local", "port": "ssh"}, headers=as_operator
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "port"


# PostgreSQL cannot hold a NUL character in text, SQLite can: either answer is right as long
# as PostgreSQL's refusal is a 422 rather than a 500.


def test_a_nul_character_in_a_body_field_is_not_a_server_error(
    client: TestClient, as_admin: Headers
) -> None:
    response = client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local", "notes": "before\x00after"},
        headers=as_admin,
    )

    assert response.status_code in (201, 422)


def test_a_nul_character_in_a_query_filter_is_not_a_server_error(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.get(f"{API}/runs", params={"job": "a\x00b"}, headers=as_viewer)

    assert response.status_code in (200, 422)


def test_a_nul_character_in_a_path_name_is_not_a_server_error(
    client: TestClient, as_viewer: Headers, app: App, operator: Actor
) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))

    response = client.get(f"{API}/targets/box%00", headers=as_viewer)

    assert response.status_code in (404, 422)
