"""What the API names when it refuses a job or a body: the field that was wrong
(``disabled_on`` for a target that does not exist, ``timeout_s`` for a boolean or a
string where a whole number belongs), and for a body that is not JSON, where the JSON
broke, not the character position dressed as a field. Each with the request that passes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of, sqlite_only

Headers = dict[str, str]


@pytest.fixture
def alpha(app: App) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("alpha", TargetKind.LOCAL))
    return "alpha"


def job_body(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": "0 3 * * *", "command": "true", "bulk": True, **extra}


def test_a_disabled_on_target_that_does_not_exist_names_disabled_on(
    client: TestClient, as_operator: Headers, alpha: str
) -> None:
    refused = client.post(
        f"{API}/jobs", json=job_body("nightly", disabled_on=["nosuch"]), headers=as_operator
    )

    assert refused.status_code == 404, refused.text
    error = error_of(refused)
    assert error["field"] == "disabled_on"
    assert "nosuch" in str(error["message"])
    assert client.get(f"{API}/jobs/nightly", headers=as_operator).status_code == 404

    made = client.post(
        f"{API}/jobs", json=job_body("nightly", disabled_on=[alpha]), headers=as_operator
    )
    assert made.status_code == 201, made.text


@sqlite_only
@pytest.mark.parametrize("value", [True, False, "10", 10.0], ids=repr)
def test_an_integer_option_takes_no_boolean_string_or_float(
    client: TestClient, as_operator: Headers, alpha: str, value: Any
) -> None:
    body = job_body("nightly", timeout_s=value)
    refused = client.post(f"{API}/jobs", json=body, headers=as_operator)

    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["field"] == "timeout_s"
    assert error["message"] == f"timeout_s: must be a whole number (got {json.dumps(value)})"
    assert client.get(f"{API}/jobs/nightly", headers=as_operator).status_code == 404

    made = client.post(f"{API}/jobs", json=job_body("nightly", timeout_s=10), headers=as_operator)
    assert made.status_code == 201, made.text
    assert made.json()["timeout_s"] == 10


@sqlite_only
def test_an_integer_option_of_an_edit_takes_no_boolean(
    client: TestClient, as_operator: Headers, alpha: str
) -> None:
    made = client.post(f"{API}/jobs", json=job_body("nightly", timeout_s=10), headers=as_operator)
    assert made.status_code == 201, made.text

    refused = client.patch(f"{API}/jobs/nightly", json={"timeout_s": True}, headers=as_operator)

    assert refused.status_code == 422, refused.text
    assert error_of(refused)["field"] == "timeout_s"
    assert client.get(f"{API}/jobs/nightly", headers=as_operator).json()["timeout_s"] == 10


@sqlite_only
def test_a_body_that_is_not_json_says_so_and_where(
    client: TestClient, as_operator: Headers, alpha: str
) -> None:
    refused = client.post(
        f"{API}/jobs",
        content=b'{"name": "nightly", oops}',
        headers={**as_operator, "Content-Type": "application/json"},
    )

    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["field"] is None
    assert error["message"] == "the request body is not valid JSON (at character 20)"
