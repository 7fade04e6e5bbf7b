"""The job page (``/jobs/{name}``), its actions, the per-job counts of the bulk list and
the dashboard's grid, through the real web app on SQLite and PostgreSQL.

History as in ``test_job_fleet``: a scheduler ticks the bulk job for three minutes on three
local targets; it fails on ``bravo``.
"""

from __future__ import annotations

import re
from datetime import datetime

from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import SYSTEM, App
from fleetcron.services.jobs import edit as jobs
from fleetcron.store.schema import AuditEvent
from integration.web.conftest import csrf_token_of, log_in, new_client
from integration.web.test_job_fleet import (
    JOB,
    history,
    postgres_history,
    postgres_source,
    queued_targets,
    run_count,
    sqlite_history,
    sqlite_source,
)

__all__ = [  # the fixtures, used by name
    "history",
    "postgres_history",
    "postgres_source",
    "sqlite_history",
    "sqlite_source",
]

ROW = re.compile(r'<tr data-target="([^"]+)" data-state="([^"]+)"')


def rows_of(html: str) -> list[tuple[str, str]]:
    return ROW.findall(html)


def test_the_job_page_lists_every_target_with_its_state_strip_and_slots(
    browser: TestClient, history: list[datetime]
) -> None:
    response = browser.get(f"/jobs/{JOB}")

    assert response.status_code == 200, response.text
    assert rows_of(response.text) == [("alpha", "ok"), ("bravo", "failed"), ("charlie", "ok")]
    assert response.text.count('class="cell cell-failed"') == 3
    assert response.text.count('class="cell cell-ok"') == 6
    assert "Re-run not succeeded (1)" in response.text
    assert response.text.count("<tr data-slot=") == 3
    assert "/runs?job=reload&amp;since=" in response.text


def test_filters_and_sort_on_the_page(browser: TestClient, history: list[datetime]) -> None:
    failed = browser.get(f"/jobs/{JOB}?status=failed")
    staging = browser.get(f"/jobs/{JOB}?label=env%3Dstaging")
    by_status = browser.get(f"/jobs/{JOB}?sort=status")
    bad = browser.get(f"/jobs/{JOB}?sort=colour")

    assert rows_of(failed.text) == [("bravo", "failed")]
    assert rows_of(staging.text) == [("charlie", "ok")]
    assert [name for name, _ in rows_of(by_status.text)] == ["bravo", "alpha", "charlie"]
    assert bad.status_code == 422 and "sort" in bad.text and len(rows_of(bad.text)) == 3


def test_new_stays_the_form_and_an_unknown_job_is_a_404(
    browser: TestClient, history: list[datetime]
) -> None:
    assert "Create bulk job" in browser.get("/jobs/new").text
    assert browser.get("/jobs/nosuch").status_code == 404


def test_rerun_failed_queues_only_bravo_and_says_so(
    app: App, browser: TestClient, history: list[datetime]
) -> None:
    token = csrf_token_of(browser)

    response = browser.post(
        f"/jobs/{JOB}/rerun-failed",
        data={"csrf_token": token, "back": f"/jobs/{JOB}?status=failed"},
    )

    assert response.status_code == 303
    assert response.headers["location"] == f"/jobs/{JOB}?status=failed"
    assert queued_targets(app) == ["bravo"]
    page = browser.get(response.headers["location"])
    assert "Queued 1 run of reload on the targets whose last run did not succeed" in page.text


def test_rerun_failed_without_the_csrf_token_is_refused_and_queues_nothing(
    app: App, browser: TestClient, history: list[datetime]
) -> None:
    before = run_count(app)

    response = browser.post(f"/jobs/{JOB}/rerun-failed", data={})

    assert response.status_code == 403
    assert run_count(app) == before


def test_a_viewer_sees_the_page_without_actions_and_may_not_post(
    app: App, history: list[datetime]
) -> None:
    with new_client(app) as viewer:
        log_in(viewer, "viewer")
        page = viewer.get(f"/jobs/{JOB}")
        token = csrf_token_of(viewer)
        refused = viewer.post(f"/jobs/{JOB}/rerun-failed", data={"csrf_token": token})

    assert page.status_code == 200 and "Re-run not succeeded" not in page.text
    assert "Run on selected" not in page.text
    assert refused.status_code == 403
    assert queued_targets(app) == []


def test_run_pause_and_resume_selected(
    app: App, browser: TestClient, history: list[datetime]
) -> None:
    token = csrf_token_of(browser)

    ran = browser.post(
        f"/jobs/{JOB}/run-selected", data={"csrf_token": token, "target": ["alpha", "charlie"]}
    )
    paused = browser.post(
        f"/jobs/{JOB}/pause-selected", data={"csrf_token": token, "target": ["alpha", "bravo"]}
    )
    nothing = browser.post(f"/jobs/{JOB}/run-selected", data={"csrf_token": token})

    assert ran.status_code == paused.status_code == nothing.status_code == 303
    assert queued_targets(app) == ["alpha", "charlie"]
    assert {a.target: a.enabled for a in jobs.show_job(app, SYSTEM, JOB).assignments} == {
        "alpha": False,
        "bravo": False,
        "charlie": True,
    }
    page = browser.get(f"/jobs/{JOB}?status=paused")
    assert [name for name, _ in rows_of(page.text)] == ["alpha", "bravo"]
    browser.post(f"/jobs/{JOB}/resume-selected", data={"csrf_token": token, "target": "bravo"})
    assert jobs.show_job(app, SYSTEM, JOB).enabled == 2
    with app.db.read() as session:
        run_event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "job.run").order_by(AuditEvent.id)
        ).first()
    assert run_event is not None and run_event.detail["selection"] == {
        "targets": ["alpha", "charlie"]
    }


def test_the_bulk_list_and_the_dashboard_show_counts_and_the_grid(
    browser: TestClient, history: list[datetime]
) -> None:
    listed = browser.get("/jobs")
    dashboard = browser.get("/")

    row = listed.text.split(f'<tr data-job="{JOB}">', 1)[1].split("</tr>", 1)[0]
    assert "2 ok" in row and "1 failed" in row and "0 paused" in row
    assert f'href="/jobs/{JOB}"' in row
    assert 'id="fleet-grid"' in dashboard.text
    grid = dashboard.text.split('id="fleet-grid"', 1)[1].split("</table>", 1)[0]
    assert grid.count("cell cell-ok") == 2 and grid.count("cell cell-failed") == 1
    counts = dashboard.text.split('id="bulk-job-counts"', 1)[1].split("</table>", 1)[0]
    assert "1 failed" in counts
