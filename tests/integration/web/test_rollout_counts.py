"""A rollout count (batch, max_failures) may be a number where JSON and YAML have numbers:
``"batch": 10`` in the API and ``max_failures: 2`` in a schedule file mean the text "10"
and "2" (SQLite and PostgreSQL). Booleans and fractions stay refused, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services import schedule_file
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job
from integration.web.conftest import API, error_of

Headers = dict[str, str]
JOB: dict[str, Any] = {
    "name": "reload",
    "bulk": True,
    "schedule": "0 2 * * *",
    "command": "reload",
}
FILE = """
version: 1
jobs:
  - name: reload
    bulk: true
    schedule: "0 2 * * *"
    command: reload
    batch: BATCH
    max_failures: 2
"""


@pytest.fixture
def fleet(app: App) -> None:
    for name in ("alpha", "bravo", "charlie"):
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))


def stored(app: App) -> tuple[str, str]:
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == "reload"))
        assert job is not None
        return job.batch, job.max_failures


def test_the_api_takes_a_count_as_a_json_number(
    app: App, client: TestClient, as_operator: Headers, fleet: None
) -> None:
    created = client.post(
        f"{API}/jobs", json=JOB | {"batch": 10, "max_failures": 2}, headers=as_operator
    )
    assert created.status_code == 201, created.text
    assert (created.json()["batch"], created.json()["max_failures"]) == ("10", "2")
    assert stored(app) == ("10", "2")

    patched = client.patch(f"{API}/jobs/reload", json={"batch": 5}, headers=as_operator)
    assert patched.status_code == 200, patched.text
    assert stored(app) == ("5", "2")


@pytest.mark.parametrize("value", [True, 2.5, [1]])
def test_a_boolean_a_fraction_or_a_list_is_still_refused_naming_the_field(
    app: App, client: TestClient, as_operator: Headers, fleet: None, value: Any
) -> None:
    response = client.post(f"{API}/jobs", json=JOB | {"batch": value}, headers=as_operator)
    assert response.status_code == 422
    assert "batch" in str(error_of(response))
    with app.db.read() as session:
        assert session.scalar(select(Job).where(Job.name == "reload")) is None


def test_a_schedule_file_takes_a_count_as_a_yaml_integer(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE.replace("BATCH", "10"))
    assert stored(app) == ("10", "2")
    # What export writes applies back to no change.
    exported = schedule_file.export_schedule(app, operator)
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty

    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, FILE.replace("BATCH", "1.5"))
    assert "batch" in str(caught.value)
    assert stored(app) == ("10", "2")
