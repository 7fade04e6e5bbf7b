"""The Preview of a run now and the halted labels, in a real Chromium against the live
server and its real scheduler (real local processes): the preview shows the batches and
the threshold, the run started from it follows them and halts, and the job page then
labels the halted target and slot and previews the re-run of what did not succeed."""

from __future__ import annotations

from live_web import ADMIN, LiveServer, OpenPage
from playwright.sync_api import expect
from sqlalchemy import select

from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.store.schema import Run
from waiting import eventually


def add_job(server: LiveServer, name: str, failing_on: str) -> None:
    # Fails on one target; the targets go one at a time, alphabetically.
    command = f'sleep 0.3; test "$FLEETCRON_TARGET" != {failing_on}'
    spec = JobSpec("0 0 1 1 *", command, batch="1", max_failures="1")
    jobs.add_job(server.app, ADMIN, name, spec, bulk=True)


def wait_for(server: LiveServer, job: str, target: str, status: str) -> None:
    """Until the run of ``job`` on ``target`` has ``status`` (the page then shows it)."""
    query = select(Run.status).where(Run.job_name == job, Run.target_name == target)

    def has_status() -> bool:
        with server.app.db.read() as session:
            return status in [str(s) for s in session.scalars(query)]

    eventually(has_status, 30, f"{job} on {target} to become {status}")


def test_the_preview_shows_the_batches_and_the_run_from_it_halts_where_it_said(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_job(server, "preview-halts", failing_on="bravo")
    page = open_page("olivia")
    page.goto(server.at("/jobs/preview-halts"))
    page.get_by_role("link", name="Preview run…").click()

    rows = page.locator("table.plan tbody tr")
    expect(rows).to_have_count(3)
    for number, target in (("1", "alpha"), ("2", "bravo"), ("3", "charlie")):
        expect(page.locator(f'tr[data-target="{target}"]')).to_have_attribute("data-batch", number)
    expect(page.locator("[data-plan-stops]")).to_contain_text(
        "1 failed of 3 (max_failures 1) halt the targets not started yet"
    )
    page.get_by_role("button", name="Run 3 targets in these batches").click()
    page.wait_for_url(server.at("/jobs/preview-halts"))
    wait_for(server, "preview-halts", "charlie", "skipped")
    page.reload()

    charlie = page.locator('tr[data-target="charlie"]')
    expect(charlie.locator("[data-halted]")).to_be_visible(timeout=30_000)
    expect(page.locator('tr[data-target="bravo"] [data-halted]')).to_have_count(0)
    expect(page.locator("[data-halted-slot]")).to_contain_text("halted: 1 of 3 failed, threshold 1")

    page.get_by_role("link", name="Preview re-run…").click()
    expect(page.locator("table.plan tbody tr")).to_have_count(2)
    expect(page.locator('tr[data-target="bravo"]')).to_have_attribute("data-batch", "1")
    expect(page.locator('tr[data-target="charlie"]')).to_have_attribute("data-batch", "2")


def test_a_rollout_that_ran_through_shows_no_halted_label(
    open_page: OpenPage, server: LiveServer
) -> None:
    # Negative control of the test above: nothing fails, nothing is halted.
    add_job(server, "preview-through", failing_on="nobody")
    page = open_page("olivia")
    page.goto(server.at("/jobs/preview-through/plan"))
    page.get_by_role("button", name="Run 3 targets in these batches").click()
    page.wait_for_url(server.at("/jobs/preview-through"))
    wait_for(server, "preview-through", "charlie", "succeeded")
    page.reload()

    expect(page.locator('tr[data-target="charlie"]')).to_have_attribute("data-status", "succeeded")
    expect(page.locator("[data-halted]")).to_have_count(0)
    expect(page.locator("[data-halted-slot]")).to_have_count(0)
