"""The job page shows a bulk job's rollout (canaries, batch, pause, max failures) beside
its schedule, so that an operator looking at the job can tell that a slot goes out
canary-first; a job without a rollout shows none."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets

ADMIN = Actor("admin", "admin")
ROLLOUT = re.compile(r"<dt>Rollout</dt><dd[^>]*>(.*?)</dd>", re.S)


def rollout_shown(html: str) -> str | None:
    found = ROLLOUT.search(html)
    return None if found is None else re.sub(r"<[^>]+>", "", found.group(1))


def test_the_job_page_shows_the_rollout_beside_the_schedule(app: App, browser: TestClient) -> None:
    targets.add_target(app, ADMIN, TargetSpec("alpha", TargetKind.LOCAL, labels=["role=canary"]))
    targets.add_target(app, ADMIN, TargetSpec("bravo", TargetKind.LOCAL))
    spec = JobSpec(
        "*/5 * * * *",
        "systemctl reload app",
        canary="role=canary",
        batch="1",
        batch_pause_s=5,
        max_failures="1",
    )
    jobs.add_job(app, ADMIN, "reload", spec, bulk=True)
    jobs.add_job(app, ADMIN, "plain", JobSpec("0 3 * * *", "true"), bulk=True)

    page = browser.get("/jobs/reload")

    assert page.status_code == 200, page.text
    shown = rollout_shown(page.text)
    assert shown is not None, page.text
    assert "canaries first: role=canary" in shown
    assert "batches of 1" in shown
    assert "5 s between batches" in shown
    assert "halt after 1 failed" in shown
    assert page.text.index("<dt>Schedule</dt>") < page.text.index("<dt>Rollout</dt>")

    plain = browser.get("/jobs/plain")
    assert plain.status_code == 200, plain.text
    assert rollout_shown(plain.text) is None
