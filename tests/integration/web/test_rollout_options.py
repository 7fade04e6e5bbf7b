"""The rollout options of a job (batch, batch_pause_s, max_failures, canary) through every
adapter the declaration feeds, on SQLite and PostgreSQL: the API, the CLI (run in process
against the same database), and schedule files; bad values are refused
naming the field, the value and what is allowed."""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from cli_env import run_in_process
from fleetcron.app import Actor, App
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services import schedule_file
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Job
from integration.web.conftest import API, error_of

Headers = dict[str, str]


@pytest.fixture
def fleet(app: App) -> None:
    for name in ("alpha", "bravo", "charlie"):
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))


def stored(app: App, name: str) -> tuple[str, int, str, str]:
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        assert job is not None
        return job.batch, job.batch_pause_s, job.max_failures, job.canary


def test_the_api_takes_shows_and_edits_the_rollout_options(
    app: App, client: TestClient, as_operator: Headers, fleet: None
) -> None:
    body: dict[str, Any] = {
        "name": "reload",
        "bulk": True,
        "schedule": "0 2 * * *",
        "command": "reload",
        "batch": " 10 %",
        "batch_pause_s": 30,
        "max_failures": "2",
        "canary": "alpha, bravo",
    }
    created = client.post(f"{API}/jobs", json=body, headers=as_operator)
    assert created.status_code == 201, created.text
    job = created.json()
    assert (job["batch"], job["batch_pause_s"], job["max_failures"], job["canary"]) == (
        "10%",
        30,
        "2",
        "alpha,bravo",
    )
    assert stored(app, "reload") == ("10%", 30, "2", "alpha,bravo")

    edited = client.patch(
        f"{API}/jobs/reload",
        json={"max_failures": "25%", "canary": "role=canary"},
        headers=as_operator,
    )
    assert edited.status_code == 200, edited.text
    assert stored(app, "reload") == ("10%", 30, "25%", "role=canary")
    with app.db.read() as session:
        actions = list(session.scalars(select(AuditEvent.action).order_by(AuditEvent.id)))
    assert actions[-1] == "job.edit"

    cleared = client.patch(
        f"{API}/jobs/reload", json={"batch": "", "canary": ""}, headers=as_operator
    )
    assert cleared.status_code == 200, cleared.text
    assert stored(app, "reload") == ("", 30, "25%", "")


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("batch", "0", "percentage"),
        ("batch", "101%", "percentage"),
        ("max_failures", "many", "percentage"),
        ("canary", "alpha,role=x", "selector"),
        ("batch_pause_s", -1, "greater than or equal to 0"),
    ],
)
def test_the_api_refuses_a_bad_rollout_option_naming_the_field(
    app: App,
    client: TestClient,
    as_operator: Headers,
    fleet: None,
    field: str,
    value: object,
    allowed: str,
) -> None:
    body = {"name": "reload", "bulk": True, "schedule": "0 2 * * *", "command": "r", field: value}
    response = client.post(f"{API}/jobs", json=body, headers=as_operator)
    assert response.status_code in (400, 422), response.text
    error = error_of(response)
    key = {"batch_pause_s": "batch_pause"}.get(field, field)
    assert error["field"] in (field, key), error
    assert allowed in str(error["message"]), error
    listed = client.get(f"{API}/jobs", headers=as_operator).json()
    assert "reload" not in json.dumps(listed)


def test_the_viewer_may_not_set_rollout_options(
    client: TestClient, as_operator: Headers, as_viewer: Headers, fleet: None
) -> None:
    body = {"name": "reload", "bulk": True, "schedule": "0 2 * * *", "command": "r"}
    assert client.post(f"{API}/jobs", json=body, headers=as_operator).status_code == 201
    refused = client.patch(f"{API}/jobs/reload", json={"batch": "1"}, headers=as_viewer)
    assert refused.status_code == 403


@pytest.fixture
def cli(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``fleetcron ARGS`` against the test's database, run in process (``run_in_process``)."""
    return functools.partial(run_in_process, app, monkeypatch, capsys)


def test_the_cli_sets_the_rollout_options_and_refuses_bad_ones(
    app: App, fleet: None, cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    added = cli(
        "job", "add", "reload", "--bulk", "--schedule", "0 2 * * *", "--command", "reload",
        "--batch", "2", "--batch-pause", "60", "--max-failures", "50%", "--canary", "charlie",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert stored(app, "reload") == ("2", 60, "50%", "charlie")

    shown = cli("job", "show", "reload", "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert (view["batch"], view["max_failures"], view["canary"]) == ("2", "50%", "charlie")

    refused = cli("job", "edit", "reload", "--max-failures", "0%")
    assert refused.returncode == 2
    assert "max_failures" in refused.stderr and "'0%'" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert stored(app, "reload") == ("2", 60, "50%", "charlie")

    edited = cli("job", "edit", "reload", "--batch", "")
    assert edited.returncode == 0, edited.stderr
    assert stored(app, "reload") == ("", 60, "50%", "charlie")


def test_a_schedule_file_sets_and_exports_the_rollout_options(
    app: App, operator: Actor, fleet: None
) -> None:
    text = """
version: 1
jobs:
  - name: reload
    bulk: true
    schedule: "0 2 * * *"
    command: reload
    batch: 10%
    batch_pause: 30
    max_failures: "3"
    canary: role=canary
"""
    schedule_file.apply_schedule(app, operator, text)
    assert stored(app, "reload") == ("10%", 30, "3", "role=canary")
    exported = schedule_file.export_schedule(app, operator)
    assert "batch: 10%" in exported and "canary: role=canary" in exported
    # The export applies back to no change.
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty

    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, text.replace("batch: 10%", "batch: 0%"))
    assert "batch" in str(caught.value) and "percentage" in str(caught.value)
    assert stored(app, "reload") == ("10%", 30, "3", "role=canary")
