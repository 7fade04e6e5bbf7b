"""Smoke test of the API on SQLite, for ``make quick``: a token authenticates, a job is
created, read back and listed, a bad schedule is a 422 naming the cron field and saves nothing,
and no token is a 401. The full API tests are the other files here (on PostgreSQL too)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of, sqlite_only


@sqlite_only
def test_a_job_is_created_read_and_listed_and_bad_input_is_refused(
    app: App, client: TestClient, as_operator: dict[str, str]
) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("web1", TargetKind.LOCAL))
    body = {"name": "rotate", "target": "web1", "schedule": "0 3 * * *", "command": "echo hi"}
    created = client.post(f"{API}/jobs", json=body, headers=as_operator)
    assert created.status_code == 201, created.text
    shown = client.get(f"{API}/jobs/rotate", headers=as_operator).json()
    assert shown["schedule"] == "0 3 * * *"
    listed = client.get(f"{API}/jobs", headers=as_operator).json()
    assert "rotate" in [job["name"] for job in listed]

    bad = client.post(
        f"{API}/jobs", json={**body, "name": "bad", "schedule": "61 * * * *"}, headers=as_operator
    )
    assert bad.status_code == 422
    error = error_of(bad)
    assert error["field"] == "minute"
    assert "61" in str(error["message"]) and "0-59" in str(error["message"])
    assert client.get(f"{API}/jobs/bad", headers=as_operator).status_code == 404
    assert client.get(f"{API}/jobs").status_code == 401
