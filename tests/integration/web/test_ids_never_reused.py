"""A job or target added after the newest one was removed gets an id of its own, so its
pages show none of the removed one's runs (SQLite and PostgreSQL). Without AUTOINCREMENT,
SQLite gave it the removed row's id (the largest id plus one), and runs, which keep
``job_id``, ``target_id`` and ``assignment_id`` as plain columns, showed up as its own."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import delete, select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs import versions as job_versions
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Assignment, Job, Run, Target
from integration.history.runs_helper import fire_minutes

ADMIN = Actor("admin", "admin")
EVERY_MINUTE = JobSpec(schedule="* * * * *", command="true")
RUN_LINK = re.compile(r'href="/runs/(\d+)"')


def job_ids(app: App, name: str) -> tuple[int, list[int]]:
    """The job's id and the ids of its assignments."""
    with app.db.read() as session:
        job = session.scalar(select(Job).where(Job.name == name))
        assert job is not None
        assignments = session.scalars(select(Assignment.id).where(Assignment.job_id == job.id))
        return job.id, list(assignments)


def run_ids(app: App) -> list[int]:
    with app.db.read() as session:
        return list(session.scalars(select(Run.id).order_by(Run.id)))


def test_a_job_added_after_the_newest_was_removed_shows_none_of_its_runs(
    app: App, clock: FakeClock, browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("pbx1", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "old", EVERY_MINUTE, target="pbx1")
    fire_minutes(app, clock, [[("failed", 5)], [("succeeded", 5)]])
    old_job, old_assignments = job_ids(app, "old")
    old_runs = run_ids(app)
    assert len(old_runs) == 2 and RUN_LINK.findall(browser.get("/jobs/old").text)

    jobs.remove_job(app, ADMIN, "old")
    jobs.add_job(app, ADMIN, "fresh", EVERY_MINUTE, target="pbx1")

    new_job, new_assignments = job_ids(app, "fresh")
    assert new_job > old_job
    assert not set(new_assignments) & set(old_assignments)
    page = browser.get("/jobs/fresh")
    assert page.status_code == 200, page.text
    assert not set(RUN_LINK.findall(page.text)) & {str(i) for i in old_runs}
    assert 'data-state="never"' in page.text
    assert [v.version for v in job_versions.list_versions(app, ADMIN, "fresh")] == [1]
    api = browser.get("/api/v1/jobs/fresh/targets")
    assert api.status_code == 200, api.text
    assert [item["last"] for item in api.json()["items"]] == [None]


def test_a_target_added_after_the_newest_was_removed_shows_none_of_its_runs(
    app: App, clock: FakeClock, browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("pbx1", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "backup", EVERY_MINUTE, target="pbx1")
    fire_minutes(app, clock, [[("failed", 5)]])
    with app.db.read() as session:
        old_target = session.scalar(select(Target.id).where(Target.name == "pbx1"))
    old_runs = {str(i) for i in run_ids(app)}
    assert set(RUN_LINK.findall(browser.get("/targets/pbx1").text)) == old_runs

    targets.remove_target(app, ADMIN, "pbx1", with_jobs=True)
    targets.add_target(app, ADMIN, TargetSpec("pbx2", TargetKind.LOCAL))

    with app.db.read() as session:
        new_target = session.scalar(select(Target.id).where(Target.name == "pbx2"))
    assert old_target is not None and new_target is not None and new_target > old_target
    page = browser.get("/targets/pbx2")
    assert page.status_code == 200, page.text
    assert not set(RUN_LINK.findall(page.text)) & old_runs
    listed = browser.get("/targets")
    assert listed.status_code == 200
    row = re.search(r'<tr data-target="pbx2">(.*?)</tr>', listed.text, re.DOTALL)
    assert row is not None and not RUN_LINK.findall(row.group(1))


def test_a_run_id_is_not_handed_out_again_after_every_run_was_pruned(
    app: App, clock: FakeClock
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("pbx1", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "backup", EVERY_MINUTE, target="pbx1")
    fire_minutes(app, clock, [[("succeeded", 5)]])
    [first] = run_ids(app)
    with app.db.session() as session:
        session.execute(delete(Run))

    fire_minutes(app, clock, [[("succeeded", 5)]])

    assert run_ids(app)[0] > first
