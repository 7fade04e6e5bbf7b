"""Rollout options (canary, batch, max_failures) belong to bulk jobs: an individual job is
refused them through the service, the API, an edit and a schedule file, on SQLite and
PostgreSQL, naming the field; a bulk job with the same options is the negative control.

Why it matters: on an individual job a canary that names another target halted every slot
before it ran (`rollout halted: no target of this slot is a canary`), silently.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from fleetcron.app import Actor, App
from fleetcron.core.job_options import ROLLOUT_KEYS
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput
from fleetcron.services import schedule_file
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job
from integration.web.conftest import API, csrf_token_of, error_of, log_in

Headers = dict[str, str]
ADMIN = Actor("admin", "admin")


@pytest.fixture
def fleet(app: App) -> None:
    for name in ("alpha", "bravo"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))


def job_names(app: App) -> list[str]:
    with app.db.read() as session:
        return sorted(session.scalars(select(Job.name)))


@pytest.mark.parametrize(
    ("key", "value"), [("canary", "bravo"), ("batch", "1"), ("max_failures", "50%")]
)
def test_an_individual_job_is_refused_each_rollout_option_naming_it(
    app: App, operator: Actor, fleet: None, key: str, value: str
) -> None:
    spec = JobSpec("0 2 * * *", "reload", **{key: value})  # type: ignore[arg-type]

    with pytest.raises(InvalidInput) as refused:
        jobs.add_job(app, operator, "single", spec, target="alpha")

    assert refused.value.field == key
    assert refused.value.message.startswith(f"{key}: ")
    assert "bulk jobs only" in refused.value.message
    assert job_names(app) == []
    # Negative control: the same option on a bulk job is taken.
    jobs.add_job(app, operator, "many", spec, bulk=True)
    assert job_names(app) == ["many"]


def test_the_api_refuses_a_canary_on_an_individual_job_with_a_json_4xx(
    app: App, client: TestClient, as_operator: Headers, fleet: None
) -> None:
    body = {"name": "single", "target": "alpha", "schedule": "0 2 * * *", "command": "x"}

    refused = client.post(f"{API}/jobs", json={**body, "canary": "bravo"}, headers=as_operator)
    assert refused.status_code == 422
    assert error_of(refused)["field"] == "canary"
    assert job_names(app) == []

    created = client.post(f"{API}/jobs", json=body, headers=as_operator)
    assert created.status_code == 201, created.text
    patched = client.patch(f"{API}/jobs/single", json={"max_failures": "1"}, headers=as_operator)
    assert patched.status_code == 422
    assert error_of(patched)["field"] == "max_failures"
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == "single"))
        assert job is not None and job.max_failures == ""


def test_an_individual_job_stored_with_a_canary_can_have_it_cleared(
    app: App, operator: Actor, fleet: None
) -> None:
    # As a database from before this rule may hold one.
    jobs.add_job(app, operator, "single", JobSpec("0 2 * * *", "x"), target="alpha")
    with app.db.session() as session:
        session.execute(update(Job).where(Job.name == "single").values(canary="bravo"))

    with pytest.raises(InvalidInput) as refused:
        jobs.edit_job(app, operator, "single", notes="keeps the canary")
    assert refused.value.field == "canary"

    jobs.edit_job(app, operator, "single", canary="", notes="cleared")
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == "single"))
        assert job is not None and (job.canary, job.notes) == ("", "cleared")


def test_a_schedule_file_with_a_canary_on_an_individual_job_is_refused_at_its_line(
    app: App, operator: Actor, fleet: None
) -> None:
    text = """\
version: 1
jobs:
  - name: single
    target: alpha
    schedule: "0 2 * * *"
    command: x
    canary: bravo
"""
    with pytest.raises(ScheduleFileError) as refused:
        schedule_file.apply_schedule(app, operator, text)
    assert "canary" in str(refused.value) and "bulk jobs only" in str(refused.value)
    assert job_names(app) == []

    # Negative control: the same declaration as a bulk job applies.
    schedule_file.apply_schedule(app, operator, text.replace("target: alpha", "bulk: true"))
    assert job_names(app) == ["single"]


def test_the_forms_of_an_individual_job_do_not_offer_the_rollout_options(
    app: App, operator: Actor, client: TestClient, fleet: None
) -> None:
    jobs.add_job(app, operator, "single", JobSpec("0 2 * * *", "x"), target="alpha")
    jobs.add_job(app, operator, "many", JobSpec("0 2 * * *", "y"), bulk=True)
    log_in(client, "operator")

    individual = [client.get("/jobs/single/edit").text, client.get("/targets/alpha").text]
    bulk = client.get("/jobs/many/edit").text

    for key in ROLLOUT_KEYS:
        for page in individual:
            assert f'name="{key}"' not in page
        assert f'name="{key}"' in bulk  # negative control: the bulk job's form has them
    assert 'name="timeout"' in individual[0] and 'name="timeout"' in individual[1]

    # Saving the individual job's form (which has no rollout fields) still works.
    page = client.get("/jobs/single/edit").text
    token = csrf_token_of(client)
    saved = client.post(
        "/jobs/single/edit",
        data={"csrf_token": token, "schedule": "0 3 * * *", "timezone": "UTC", "command": "x"},
        follow_redirects=False,
    )
    assert saved.status_code == 303, page[:200]
