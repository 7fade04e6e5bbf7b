"""A job named ``new`` cannot be created, because ``/jobs/new`` is the form that adds a job
and the job would have no page; likewise a target named ``new`` (``/targets/new``). Refused
alike by the API (a 422 naming the field), the web form (beside the field) and the CLI
(exit 2), on SQLite and PostgreSQL. A job that has the name from before the rule is still
shown by the API and the CLI, and its edit page answers."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job
from integration.web.conftest import csrf_token_of, error_of

API = "/api/v1"
ADMIN = Actor("admin", "admin")
Headers = dict[str, str]


def test_the_api_refuses_a_job_named_new_and_takes_new_db(
    client: TestClient, as_operator: Headers
) -> None:
    body = {"schedule": "@daily", "command": "true", "bulk": True}
    refused = client.post(f"{API}/jobs", json={"name": "new", **body}, headers=as_operator)
    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["field"] == "name"
    assert str(error["message"]).startswith("name: 'new' is reserved (/jobs/new is the form")
    assert client.get(f"{API}/jobs/new", headers=as_operator).status_code == 404

    taken = client.post(f"{API}/jobs", json={"name": "new-db", **body}, headers=as_operator)
    assert taken.status_code == 201, taken.text  # negative control: only the word itself


def test_the_api_refuses_a_target_named_new(client: TestClient, as_admin: Headers) -> None:
    refused = client.post(f"{API}/targets", json={"name": "new", "kind": "local"}, headers=as_admin)
    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["field"] == "name"
    assert "'new' is reserved (/targets/new is the form that adds a target)" in str(
        error["message"]
    )


def test_the_new_job_form_says_why_beside_the_name(browser: TestClient, app: App) -> None:
    fields = {"name": "new", "schedule": "@daily", "command": "true", "timeout": "60"}
    response = browser.post("/jobs/new", data={**fields, "csrf_token": csrf_token_of(browser)})
    assert response.status_code == 422, response.text
    assert 'id="name-error">name: &#39;new&#39; is reserved' in response.text
    assert [j.name for j in jobs.list_jobs(app, ADMIN)] == []


def test_the_cli_refuses_a_job_named_new_with_exit_2(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    point_the_cli_at(app, monkeypatch)
    args = ["job", "add", "new", "--bulk", "--schedule", "@daily", "--command", "true"]

    code = run_cli(cli, args)

    err = capsys.readouterr().err
    assert code == 2, err
    assert "name: 'new' is reserved" in err and "Traceback" not in err
    assert run_cli(cli, [*args[:2], "new-db", *args[3:]]) == 0  # negative control


def test_a_job_named_new_from_before_is_still_reachable(
    app: App, client: TestClient, as_operator: Headers, browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("alpha", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "legacy", JobSpec("@daily", "echo from-before"), bulk=True)
    with app.db.session() as session:  # as a database made before the rule holds it
        session.execute(update(Job).where(Job.name == "legacy").values(name="new"))

    shown = client.get(f"{API}/jobs/new", headers=as_operator)
    assert shown.status_code == 200, shown.text
    assert shown.json()["command"] == "echo from-before"
    edit = browser.get("/jobs/new/edit")
    assert edit.status_code == 200 and "echo from-before" in edit.text
    fleet = client.get(f"{API}/jobs/new/targets", headers=as_operator)
    assert fleet.status_code == 200 and "alpha" in fleet.text
