"""A job's ``spread`` through every adapter the declaration feeds, on SQLite and PostgreSQL:
the API (with each target's offset), the CLI (run in process against the same database,
``job show --json``), the web form and the job list, and schedule files; bad
values, alone or with jitter, are refused naming the field, the value and what is allowed."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from cli_env import run_in_process
from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.start_window import spread_offset
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services import schedule_file
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job, Target
from integration.web.conftest import API, csrf_token_of, error_of, log_in, new_client

Headers = dict[str, str]
NAMES = ("alpha", "bravo", "charlie")


@pytest.fixture
def fleet(app: App) -> None:
    for name in NAMES:
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))


def stored(app: App, name: str = "reload") -> tuple[int, int]:
    """The job's (spread_s, jitter_s) as stored."""
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        assert job is not None
        return job.spread_s, job.jitter_s


def expected_offsets(app: App, name: str = "reload") -> dict[str, float]:
    """Each target's offset, computed from the ids as the scheduler does."""
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        assert job is not None
        ids = {name: tid for name, tid in session.execute(select(Target.name, Target.id))}
        return {t: spread_offset(job.id, ids[t], job.spread_s) for t in NAMES}


def offsets_of(view: dict[str, Any]) -> dict[str, float]:
    return {a["target"]: a["spread_offset_s"] for a in view["assignments"]}


BULK = {"name": "reload", "bulk": True, "schedule": "0 2 * * *", "command": "reload"}


def test_the_api_takes_shows_and_edits_the_spread_with_each_targets_offset(
    app: App, client: TestClient, as_operator: Headers, fleet: None
) -> None:
    created = client.post(f"{API}/jobs", json={**BULK, "spread_s": 600}, headers=as_operator)
    assert created.status_code == 201, created.text
    view = created.json()
    assert view["spread_s"] == 600 and stored(app) == (600, 0)
    offsets = offsets_of(view)
    assert offsets == expected_offsets(app)
    assert all(0 <= o < 600 for o in offsets.values()) and len(set(offsets.values())) == 3

    edited = client.patch(f"{API}/jobs/reload", json={"spread_s": 60}, headers=as_operator)
    assert edited.status_code == 200, edited.text
    assert stored(app) == (60, 0)
    assert offsets_of(edited.json()) == expected_offsets(app)

    off = client.patch(f"{API}/jobs/reload", json={"spread_s": 0}, headers=as_operator)
    assert set(offsets_of(off.json()).values()) == {0.0}


def test_a_job_added_without_a_spread_has_none(
    app: App, client: TestClient, as_operator: Headers, fleet: None
) -> None:
    created = client.post(f"{API}/jobs", json=BULK, headers=as_operator)

    assert created.json()["spread_s"] == 0
    assert set(offsets_of(created.json()).values()) == {0.0}


@pytest.mark.parametrize("value", [-1, v.MAX_JITTER_S + 1])
def test_the_api_refuses_a_spread_outside_its_range_naming_it(
    app: App, client: TestClient, as_operator: Headers, fleet: None, value: int
) -> None:
    response = client.post(f"{API}/jobs", json={**BULK, "spread_s": value}, headers=as_operator)

    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "spread_s"
    assert str(v.MAX_JITTER_S if value > 0 else 0) in str(error["message"])
    assert client.get(f"{API}/jobs", headers=as_operator).json() == []


def test_spread_and_jitter_together_beyond_the_bound_are_refused_and_nothing_changes(
    app: App, client: TestClient, as_operator: Headers, fleet: None
) -> None:
    body = {**BULK, "spread_s": 3000, "jitter_s": 601}
    refused = client.post(f"{API}/jobs", json=body, headers=as_operator)
    assert refused.status_code == 422
    assert error_of(refused) == {
        "code": "invalid",
        "field": "spread",
        "message": "spread: 3000 with jitter 601 could delay a start by 3601 s; spread and "
        "jitter together are at most 3600",
    }

    created = client.post(f"{API}/jobs", json={**body, "jitter_s": 600}, headers=as_operator)
    assert created.status_code == 201, created.text
    # An edit of one of the two is checked against the other as stored.
    raised = client.patch(f"{API}/jobs/reload", json={"jitter_s": 700}, headers=as_operator)
    assert raised.status_code == 422
    assert error_of(raised)["field"] == "spread"
    assert stored(app) == (3000, 600)


def test_the_viewer_may_not_change_the_spread(
    client: TestClient, as_operator: Headers, as_viewer: Headers, fleet: None
) -> None:
    assert client.post(f"{API}/jobs", json=BULK, headers=as_operator).status_code == 201

    refused = client.patch(f"{API}/jobs/reload", json={"spread_s": 30}, headers=as_viewer)

    assert refused.status_code == 403


# --- the CLI ----------------------------------------------------------------------------


@pytest.fixture
def cli(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``fleetcron ARGS`` against the test's database, run in process (``run_in_process``)."""
    return functools.partial(run_in_process, app, monkeypatch, capsys)


def test_the_cli_sets_shows_and_refuses_a_spread(
    app: App, fleet: None, cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    added = cli(
        "job", "add", "reload", "--bulk", "--schedule", "0 2 * * *", "--command", "reload",
        "--spread", "900",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert stored(app) == (900, 0)

    shown = cli("job", "show", "reload", "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["spread_s"] == 900
    assert offsets_of(view) == expected_offsets(app)
    table = cli("job", "show", "reload")
    assert table.returncode == 0, table.stderr
    assert "spread_s:       900" in table.stdout and "starts after (s)" in table.stdout
    for name, offset in expected_offsets(app).items():
        assert re.search(rf"{name} .* {offset:.3f}", table.stdout), (name, offset)

    refused = cli("job", "edit", "reload", "--spread", "3601")
    assert refused.returncode == 2
    assert "spread: 3601 is out of range 0-3600" in refused.stderr
    assert "Traceback" not in refused.stderr
    together = cli("job", "edit", "reload", "--jitter", "3000")
    assert together.returncode == 2
    assert "spread: 900 with jitter 3000" in together.stderr
    assert stored(app) == (900, 0)

    edited = cli("job", "edit", "reload", "--spread", "0")
    assert edited.returncode == 0, edited.stderr
    assert stored(app) == (0, 0)


# --- the web form and the job list ------------------------------------------------------


def form(**overrides: str) -> dict[str, str | list[str]]:
    fields: dict[str, str | list[str]] = {
        "name": "reload",
        "schedule": "0 2 * * *",
        "timezone": "UTC",
        "command": "reload",
        "timeout": "",
        "overlap": "allow",
        "catchup": "none",
        "jitter": "0",
        "spread": "120",
        "retries": "0",
        "retry_on": ["connect_error"],
        "retry_backoff": "30",
        "picker": list(NAMES),
        "enabled_on": list(NAMES),
    }
    fields.update(overrides)
    return fields


def input_value(page: str, name: str) -> str:
    found = re.search(rf'<input id="{name}" name="{name}" value="([^"]*)"', page)
    assert found is not None, name
    return found.group(1)


def test_the_job_form_sets_and_edits_the_spread_and_the_list_and_job_page_show_it(
    app: App, fleet: None
) -> None:
    with new_client(app) as browser:
        log_in(browser, "operator")
        page = browser.get("/jobs/new").text
        assert input_value(page, "spread") == "0"
        assert re.search(r'id="spread-help">0-3600<', page)

        created = browser.post("/jobs/new", data={**form(), "csrf_token": csrf_token_of(browser)})
        assert created.status_code == 303, created.text
        assert stored(app) == (120, 0)
        assert input_value(browser.get("/jobs/reload/edit").text, "spread") == "120"
        listed = browser.get("/jobs").text
        # One wording of the start window everywhere (core.start_window.window_words).
        words = "starts within 120 s, each target at its own fixed offset"
        assert 'data-spread="120"' in listed and words in listed
        job_page = browser.get("/jobs/reload").text
        assert 'data-spread="120"' in job_page and words in job_page
        # The form explains the window once, beside its two fields.
        form_page = browser.get("/jobs/reload/edit").text
        assert form_page.count('id="start-window-help"') == 1
        assert 'aria-describedby="spread-help start-window-help"' in form_page

        refused = browser.post(
            "/jobs/reload/edit",
            data={**form(spread="99999"), "csrf_token": csrf_token_of(browser)},
        )
        assert refused.status_code == 422
        assert "spread: 99999 is out of range 0-3600" in refused.text
        assert input_value(refused.text, "spread") == "99999"

        saved = browser.post(
            "/jobs/reload/edit", data={**form(spread="45"), "csrf_token": csrf_token_of(browser)}
        )
        assert saved.status_code == 303, saved.text
    assert stored(app) == (45, 0)


# --- schedule files ---------------------------------------------------------------------

FILE = """\
version: 1
jobs:
  - name: reload
    bulk: true
    schedule: "0 2 * * *"
    command: reload
    spread: 300
"""


def test_a_schedule_file_sets_and_exports_the_spread(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)
    assert stored(app) == (300, 0)

    exported = schedule_file.export_schedule(app, operator)
    assert "    spread: 300\n" in exported
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty

    changed = schedule_file.apply_schedule(app, operator, FILE.replace("300", "30"))
    assert [(f.field, f.old, f.new) for f in changed.plan.changes[0].fields] == [
        ("spread", 300, 30)
    ]


def test_a_job_without_a_spread_exports_no_spread_key(
    app: App, operator: Actor, fleet: None
) -> None:
    jobs.add_job(app, operator, "reload", JobSpec("0 2 * * *", "reload"), bulk=True)

    assert "spread" not in schedule_file.export_schedule(app, operator)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("spread: 3601", "schedule.yaml:7: jobs[0].spread: 3601 is out of range 0-3600"),
        ("spread: soon", "schedule.yaml:7: jobs[0].spread: expected an integer, got a string"),
        (
            "spread: 3000\n    jitter: 700",
            "schedule.yaml:7: jobs[0].spread: 3000 with jitter 700 could delay a start by "
            "3700 s; spread and jitter together are at most 3600",
        ),
    ],
    ids=["range", "type", "with-jitter"],
)
def test_a_bad_spread_in_a_file_is_reported_at_its_line_and_nothing_is_applied(
    app: App, operator: Actor, fleet: None, line: str, message: str
) -> None:
    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, FILE.replace("spread: 300", line))

    assert str(caught.value).startswith(message)
    with app.db.read() as session:
        assert session.scalar(select(Job)) is None
