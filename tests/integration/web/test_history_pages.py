"""The history on the pages (SQLite and PostgreSQL): the chart and the versions on the job
page, the versions page with its diff, and a revert through its confirmation."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs import versions
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import history as history_svc
from fleetcron.services.targets import edit as targets
from integration.history.runs_helper import fire_minutes
from integration.web.conftest import csrf_token_of, log_in, new_client

OPERATOR = Actor("olivia", "operator")


def a_job(app: App) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("alpha", TargetKind.LOCAL))
    jobs.add_job(app, OPERATOR, "sweep", JobSpec("* * * * *", "echo one"), bulk=True)
    jobs.edit_job(app, OPERATOR, "sweep", command="echo two\necho three")


def test_the_job_page_shows_the_chart_of_its_slots_and_its_versions(
    browser: TestClient, app: App, clock: FakeClock
) -> None:
    a_job(app)
    fire_minutes(app, clock, [[("succeeded", 400)], [("failed", 100)]])

    page = browser.get("/jobs/sweep")

    assert page.status_code == 200, page.text
    chart = re.search(
        r'<svg class="history-chart" id="job-history-chart".*?</svg>', page.text, re.S
    )
    assert chart is not None
    assert re.findall(r'data-outcome="(\w+)"', chart.group(0)) == ["ok", "failed"]
    assert "longest 400 ms" in chart.group(0)
    assert "p50" in page.text
    rows = re.findall(r'<tr data-version="(\d+)"', page.text)
    assert rows == ["2", "1"]
    assert 'href="/jobs/sweep/revert?to=1"' in page.text


def test_a_viewer_sees_the_versions_without_a_revert_button(app: App) -> None:
    a_job(app)
    with new_client(app) as client:
        log_in(client, "viewer")
        page = client.get("/jobs/sweep")

    assert page.status_code == 200
    assert 'data-version="1"' in page.text
    assert "/revert?to=" not in page.text


def test_the_versions_page_shows_the_line_diff_of_a_command(browser: TestClient, app: App) -> None:
    a_job(app)

    page = browser.get("/jobs/sweep/versions?v=2")

    assert page.status_code == 200, page.text
    assert '<span class="del">-echo one</span>' in page.text
    assert '<span class="ins">+echo two</span>' in page.text
    assert browser.get("/jobs/sweep/versions?v=9").status_code == 422


def test_a_revert_from_the_page_asks_first_then_writes_a_version_from_the_web(
    browser: TestClient, app: App
) -> None:
    a_job(app)

    confirm = browser.get("/jobs/sweep/revert?to=1")
    assert confirm.status_code == 200
    assert "Revert job sweep to version 1?" in confirm.text
    assert jobs.show_job(app, OPERATOR, "sweep").command == "echo two\necho three"

    done = browser.post(
        "/jobs/sweep/revert?to=1",
        data={"csrf_token": csrf_token_of(browser)},
        follow_redirects=False,
    )

    assert done.status_code == 303
    assert jobs.show_job(app, OPERATOR, "sweep").command == "echo one"
    newest = versions.list_versions(app, OPERATOR, "sweep")[0]
    assert (newest.version, newest.source, newest.actor) == (3, "web", "olivia")


def test_a_revert_without_the_csrf_token_is_refused(browser: TestClient, app: App) -> None:
    a_job(app)

    refused = browser.post("/jobs/sweep/revert?to=1", data={}, follow_redirects=False)

    assert refused.status_code == 403
    assert jobs.show_job(app, OPERATOR, "sweep").command == "echo two\necho three"


def test_a_revert_to_a_version_beyond_any_is_refused_on_the_versions_page(
    browser: TestClient, app: App
) -> None:
    # 29 digits passed the form's number check and reached the database: the generic
    # "a number or a date in the request is out of range" page instead of the message.
    a_job(app)

    refused = browser.post(
        "/jobs/sweep/revert",
        data={"csrf_token": csrf_token_of(browser), "to": "9" * 29},
        follow_redirects=False,
    )

    assert refused.status_code == 303
    assert refused.headers["location"] == "/jobs/sweep/versions"
    page = browser.get("/jobs/sweep/versions")
    assert "to: name the version to go back to" in page.text
    assert jobs.show_job(app, OPERATOR, "sweep").command == "echo two\necho three"


def test_the_target_page_has_a_strip_of_runs_per_job(
    browser: TestClient, app: App, clock: FakeClock
) -> None:
    a_job(app)
    jobs.add_job(app, OPERATOR, "other", JobSpec("* * * * *", "echo other"), target="alpha")
    fire_minutes(app, clock, [[("failed", 5), ("succeeded", 10)], [("succeeded", 10)] * 2])

    page = browser.get("/targets/alpha")

    assert page.status_code == 200, page.text
    strips = re.search(r'<section aria-labelledby="strips-title".*?</section>', page.text, re.S)
    assert strips is not None
    rows = re.findall(r'<tr data-job="([\w-]+)">.*?</tr>', strips.group(0), re.S)
    assert rows == ["other", "sweep"]
    other = re.search(r'<tr data-job="other">.*?</tr>', strips.group(0), re.S)
    assert other is not None
    assert re.findall(r'data-outcome="(\w+)"', other.group(0)) == ["failed", "ok"]


def test_a_run_page_links_to_the_version_it_ran(
    browser: TestClient, app: App, clock: FakeClock
) -> None:
    a_job(app)
    fire_minutes(app, clock, [[("succeeded", 10)]])
    run_id = history_svc.job_slots(app, OPERATOR, "sweep")[0].run_id

    page = browser.get(f"/runs/{run_id}")

    assert page.status_code == 200, page.text
    assert 'href="/jobs/sweep/versions?v=2"' in page.text
