"""The job page's Preview and its halted labels, on SQLite and PostgreSQL: the preview
shows the batches, the stop threshold and the targets left out; running from it asks for
an explicit way (the rollout, or all at once), with the CSRF token and the operator role,
audited; a rollout that halted labels its targets and its slot."""

from __future__ import annotations

import asyncio
import re

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Run
from integration.web.conftest import csrf_token_of, log_in, new_client

ADMIN = Actor("admin", "admin")
NAMES = ["n0", "n1", "n2", "n3", "n4"]


def a_fleet(app: App, *, max_failures: str = "2") -> None:
    for name in NAMES:
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec("0 3 * * *", "deploy", batch="2", max_failures=max_failures)
    jobs.add_job(app, ADMIN, "deploy", spec, bulk=True)


def run_it_through(app: App, clock: FakeClock, failing: set[str]) -> None:
    """A run now of the job on a real scheduler whose local targets fail as scripted."""

    def script(target: RunTarget, request: ExecRequest) -> FakeOutcome:
        return FakeOutcome(exit_code=1 if target.name in failing else 0)

    async def drive() -> None:
        fake = FakeExecutor(clock=clock)
        fake.script = script
        scheduler = Scheduler(app, clock=clock, executors={"local": fake})
        await scheduler.start()
        try:
            for _ in range(6):
                await scheduler.tick()
                await scheduler.idle()
        finally:
            await scheduler.shutdown()

    runs.request_run(app, ADMIN, "deploy")
    asyncio.run(drive())


def count_runs(app: App) -> int:
    with app.db.read() as session:
        return session.scalar(select(func.count(Run.id))) or 0


def test_the_preview_shows_batches_threshold_and_what_is_left_out(
    app: App, browser: TestClient
) -> None:
    a_fleet(app)
    jobs.set_enabled(app, ADMIN, "deploy", False, target="n4")

    page = browser.get("/jobs/deploy/plan")

    assert page.status_code == 200, page.text
    batches = re.findall(r'<tr data-batch="(\d)" data-target="(\w+)"', page.text)
    assert batches == [("1", "n0"), ("1", "n1"), ("2", "n2"), ("2", "n3")]
    assert "2 failed of 4 (max_failures 2) halt the targets not started yet" in page.text
    assert "n4</span>: the job is paused on this target" in page.text
    assert 'name="rollout" value="job"' in page.text
    assert 'value="all_at_once"' not in page.text  # all at once only after its own preview
    assert count_runs(app) == 0


def test_the_preview_refuses_an_unknown_only_word_naming_it(app: App, browser: TestClient) -> None:
    a_fleet(app)
    page = browser.get("/jobs/deploy/plan", params={"only": "later"})
    assert page.status_code == 422
    assert "only: &#39;later&#39; is not a way a run did not succeed" in page.text


def test_running_from_the_preview_takes_the_chosen_way_and_is_audited(
    app: App, browser: TestClient
) -> None:
    a_fleet(app)
    token = csrf_token_of(browser)

    done = browser.post(
        "/jobs/deploy/run-plan", data={"csrf_token": token, "rollout": "all_at_once"}
    )

    assert done.status_code == 303, done.text
    with app.db.read() as session:
        assert set(session.scalars(select(Run.status))) == {"queued"}
        detail = session.scalars(
            select(AuditEvent.detail).where(AuditEvent.action == "job.run")
        ).one()
    assert detail["rollout"] == "all_at_once"


def test_running_from_the_preview_needs_a_way_the_csrf_token_and_the_operator_role(
    app: App, browser: TestClient
) -> None:
    a_fleet(app)
    token = csrf_token_of(browser)

    no_way = browser.post("/jobs/deploy/run-plan", data={"csrf_token": token, "rollout": "fast"})
    assert no_way.status_code == 303
    assert "rollout: &#39;fast&#39;" in browser.get(no_way.headers["location"]).text
    no_csrf = browser.post("/jobs/deploy/run-plan", data={"rollout": "job"})
    assert no_csrf.status_code == 403
    with new_client(app) as viewer:
        log_in(viewer, "viewer")
        refused = viewer.post(
            "/jobs/deploy/run-plan", data={"csrf_token": csrf_token_of(viewer), "rollout": "job"}
        )
        assert refused.status_code == 403
        assert "Preview run" in viewer.get("/jobs/deploy").text
        assert 'name="rollout"' not in viewer.get("/jobs/deploy/plan").text
    assert count_runs(app) == 0


def test_a_halted_rollout_labels_its_targets_and_its_slot(
    app: App, browser: TestClient, clock: FakeClock
) -> None:
    a_fleet(app)
    run_it_through(app, clock, failing={"n0", "n1"})

    page = browser.get("/jobs/deploy")

    assert page.status_code == 200, page.text
    halted = re.findall(
        r'<tr data-target="(\w+)"[^>]*>(?:(?!</tr>).)*data-halted\b', page.text, re.S
    )
    assert halted == ["n2", "n3", "n4"]
    assert "halted: 2 of 5 failed, threshold 2" in page.text
    assert "3 not started" in page.text
    assert "Re-run not succeeded (5)" in page.text
    link = re.search(r'href="([^"]+)" data-rerun-slot', page.text)
    assert link is not None
    preview = browser.get(link.group(1).replace("&amp;", "&"))
    assert preview.status_code == 200, preview.text
    assert "data-plan-slot" in preview.text and 'name="slot"' in preview.text
    shown = re.findall(r'<tr data-batch="\d" data-target="(\w+)"', preview.text)
    assert sorted(shown) == NAMES


def test_a_rollout_that_finished_has_no_halted_label(
    app: App, browser: TestClient, clock: FakeClock
) -> None:
    # Negative control of the test above: one failure, under the threshold.
    a_fleet(app)
    run_it_through(app, clock, failing={"n0"})

    page = browser.get("/jobs/deploy")

    assert page.status_code == 200, page.text
    assert "data-halted" not in page.text
    assert "data-rerun-slot" not in page.text
    assert "Re-run not succeeded (1)" in page.text
