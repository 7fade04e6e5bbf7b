"""History in the browser: the Upcoming page, the chart on the job page (also without
JavaScript) and a revert from the job page through its confirmation."""

from __future__ import annotations

from datetime import UTC, datetime

from live_web import ADMIN, LiveServer, OpenPage, problems_of
from playwright.sync_api import expect

from fixtures.app import FakeClock
from fleetcron.services.jobs import versions
from fleetcron.services.jobs.edit import JobSpec, add_job, edit_job, remove_job, show_job
from fleetcron.services.targets import edit as targets
from integration.history.runs_helper import fire_minutes


def test_the_upcoming_page_lists_the_next_fires_with_paused_and_disabled_targets(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_job(
        server.app,
        ADMIN,
        "upcoming-report",
        JobSpec("17 3 * * *", "echo upcoming", timezone="Asia/Tokyo"),
        bulk=True,
        disabled_on=["charlie"],
    )
    targets.pause_target(server.app, ADMIN, "bravo", "disk swap")
    try:
        page = open_page("victor")
        page.goto(server.at("/"))
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Upcoming").click()
        page.wait_for_url(server.at("/upcoming"))

        row = page.locator('#upcoming-fires tr[data-job="upcoming-report"]')
        expect(row).to_have_count(1)
        expect(row).to_have_attribute("data-zone", "Asia/Tokyo")
        cells = row.locator("td")
        expect(cells.nth(1)).to_contain_text("03:17")
        expect(cells.nth(3)).to_have_text("fires")
        expect(cells.nth(4)).to_have_text("1")  # alpha
        expect(cells.nth(5)).to_have_text("1")  # bravo, paused
        expect(cells.nth(6)).to_have_text("1")  # charlie, disabled

        page.get_by_label("Job").fill("upcoming-report")
        page.get_by_label("Next").fill("1")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#upcoming-none, #upcoming-fires")).to_be_visible()
        assert problems_of(page) == []
    finally:
        targets.resume_target(server.app, ADMIN, "bravo")
        remove_job(server.app, ADMIN, "upcoming-report")


def test_the_job_page_draws_the_last_slots_as_a_chart_readable_without_javascript(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_job(server.app, ADMIN, "chart-job", JobSpec("* * * * *", "true"), target="alpha")
    clock = FakeClock(datetime.now(UTC))
    # Other tests' jobs on the shared server fall due at set times of day (0 4 * * *, ...).
    fire_minutes(
        server.app,
        clock,
        [[("succeeded", 400)], [("failed", 100)], [("succeeded", 200)]],
        jobs=["chart-job"],
    )
    try:
        page = open_page("victor", javascript=False)
        page.goto(server.at("/jobs/chart-job"))

        chart = page.locator("#job-history-chart")
        expect(chart).to_be_visible()
        failed = chart.locator('rect[data-outcome="failed"]')
        expect(failed).to_have_count(1)
        expect(failed.locator("title")).to_contain_text("1 failed; longest 100 ms")
        assert chart.locator('rect[data-outcome="ok"]').count() >= 2
        heights = {
            r.get_attribute("data-outcome"): float(r.get_attribute("height") or 0)
            for r in chart.locator("rect").all()
        }
        assert heights["failed"] < heights["ok"]
        expect(page.locator("#job-chart")).to_contain_text("p95")
    finally:
        remove_job(server.app, ADMIN, "chart-job")


def test_a_revert_from_the_job_page_asks_then_restores_the_old_definition(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_job(server.app, ADMIN, "revert-job", JobSpec("0 4 * * *", "echo v1"), target="alpha")
    edit_job(server.app, ADMIN, "revert-job", command="echo v2", schedule="0 5 * * *")
    try:
        page = open_page("olivia")
        page.goto(server.at("/jobs/revert-job"))
        versions_table = page.locator("#job-versions")
        expect(versions_table.locator("tr[data-version]")).to_have_count(2)

        versions_table.get_by_role("link", name="Revert to v1").click()
        expect(
            page.get_by_role("heading", name="Revert job revert-job to version 1?")
        ).to_be_visible()
        assert show_job(server.app, ADMIN, "revert-job").command == "echo v2"
        page.get_by_role("button", name="Revert to v1").click()

        page.wait_for_url(server.at("/jobs/revert-job"))
        expect(page.get_by_role("status")).to_contain_text("definition of version 1 again")
        expect(page.locator('#job-versions tr[data-version="3"]')).to_contain_text("web")
        shown = show_job(server.app, ADMIN, "revert-job")
        assert (shown.command, shown.schedule) == ("echo v1", "0 4 * * *")
        newest = versions.list_versions(server.app, ADMIN, "revert-job")[0]
        assert (newest.version, newest.actor, newest.source) == (3, "olivia", "web")

        page.locator('#job-versions tr[data-version="2"]').get_by_role(
            "link", name="v2", exact=True
        ).click()
        expect(page.locator("#version-diff")).to_contain_text("echo v1")
        expect(page.locator("#version-diff")).to_contain_text("echo v2")
        assert problems_of(page) == []
    finally:
        remove_job(server.app, ADMIN, "revert-job")
