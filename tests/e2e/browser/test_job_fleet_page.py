"""The job page in a real Chromium against the live server and its real scheduler: a bulk
job on the three local targets fails on bravo only; "Re-run not succeeded" queues and runs it
again on bravo alone; selected targets are paused with the checkboxes."""

from __future__ import annotations

from live_web import ADMIN, LiveServer, OpenPage, problems_of, screenshot
from playwright.sync_api import expect
from sqlalchemy import select

from fleetcron.services.jobs.edit import JobSpec, add_job, show_job
from fleetcron.services.runs.reads import request_run
from fleetcron.store.schema import Run
from waiting import eventually

WAIT_S = 20


def runs_of(server: LiveServer, job: str) -> list[tuple[str, str]]:
    with server.app.db.read() as session:
        rows = session.execute(
            select(Run.target_name, Run.status).where(Run.job_name == job).order_by(Run.id)
        ).all()
    return [(target, str(status)) for target, status in rows]


def wait_finished(server: LiveServer, job: str, count: int) -> list[tuple[str, str]]:
    def finished() -> list[tuple[str, str]] | None:
        found = runs_of(server, job)
        done = [r for r in found if r[1] not in ("queued", "running")]
        return found if len(done) >= count else None

    return eventually(
        finished,
        WAIT_S,
        lambda: f"runs of {job} to finish: {runs_of(server, job)}",
        interval=0.1,
    )


def failing_on_bravo(server: LiveServer, name: str) -> None:
    """A bulk job that fails on bravo, run once everywhere (by the live scheduler)."""
    command = f'test "$FLEETCRON_TARGET" != bravo # {name}'
    add_job(server.app, ADMIN, name, JobSpec(schedule="0 3 * * *", command=command), bulk=True)
    request_run(server.app, ADMIN, name)
    wait_finished(server, name, 3)


def test_rerun_failed_on_the_job_page_runs_the_job_again_on_the_failed_target_only(
    open_page: OpenPage, server: LiveServer
) -> None:
    failing_on_bravo(server, "fleet-reload")
    page = open_page("olivia")
    page.goto(server.at("/jobs"))
    page.get_by_role("link", name="fleet-reload").click()

    page.wait_for_url(server.at("/jobs/fleet-reload"))
    expect(page.locator('tr[data-target="bravo"]')).to_have_attribute("data-state", "failed")
    expect(page.locator('tr[data-target="alpha"]')).to_have_attribute("data-state", "ok")
    expect(page.locator("#job-counts")).to_contain_text("1failed")
    page.get_by_role("button", name="Re-run not succeeded (1)").click()

    expect(page.get_by_role("status")).to_contain_text("Queued 1 run of fleet-reload")
    found = wait_finished(server, "fleet-reload", 4)
    assert sorted(t for t, _ in found) == ["alpha", "bravo", "bravo", "charlie"]
    assert found[-1] == ("bravo", "failed")
    page.reload()
    bravo = page.locator('tr[data-target="bravo"]')
    expect(bravo.locator(".cell-failed")).to_have_count(2)
    expect(bravo).to_contain_text("2×")
    expect(page.locator('tr[data-target="alpha"] .cell-ok')).to_have_count(1)
    screenshot(page, "job-page")
    assert problems_of(page) == []


def test_pause_selected_with_the_checkboxes_and_the_slot_link(
    open_page: OpenPage, server: LiveServer
) -> None:
    failing_on_bravo(server, "fleet-rotate")
    page = open_page("olivia")
    page.goto(server.at("/jobs/fleet-rotate"))
    page.get_by_label("Select alpha").check()
    page.get_by_label("Select charlie").check()
    expect(page.locator("[data-selected-count]")).to_have_text("2 of 3 shown selected:")
    page.get_by_role("button", name="Pause selected").click()

    expect(page.get_by_role("status")).to_contain_text("Paused job fleet-rotate on 2 targets")
    states = {a.target: a.enabled for a in show_job(server.app, ADMIN, "fleet-rotate").assignments}
    assert states == {"alpha": False, "bravo": True, "charlie": False}
    expect(page.locator('tr[data-target="alpha"]')).to_contain_text("paused")

    page.locator("#job-slots a", has_text="3 runs").click()
    page.wait_for_url("**/runs?**")
    expect(page.locator("table.runs tbody tr")).to_have_count(3)
    assert problems_of(page) == []


def test_the_dashboard_grid_links_each_cell_to_its_newest_run(
    open_page: OpenPage, server: LiveServer
) -> None:
    failing_on_bravo(server, "fleet-grid")
    page = open_page("victor")
    page.goto(server.at("/"))

    grid = page.locator("#fleet-grid")
    expect(grid.get_by_role("link", name="fleet-grid")).to_be_visible()
    bravo_cell = grid.locator('tr[data-target="bravo"] a[title^="fleet-grid on bravo:"]')
    expect(bravo_cell).to_have_class("cell cell-failed")
    screenshot(page, "dashboard-grid")
    bravo_cell.click()
    page.wait_for_url("**/runs/*")
    expect(page.locator("body")).to_contain_text("bravo")
    assert problems_of(page) == []
