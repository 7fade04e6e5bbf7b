"""Spread and jitter are one thing for an operator, the start window: the job form explains
it once beside its two fields, the job page and the jobs list say it in the same words, and
the upcoming view shows one *starts between* column, the first and the last start of each
fire as ``core/start_window.py`` computes them (read from the service, not recomputed)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from live_web import ADMIN, BROWSER_ZONE, LiveServer, OpenPage, screenshot
from playwright.sync_api import expect

from fleetcron.core.start_window import window_words
from fleetcron.services.jobs.edit import JobSpec, add_job, remove_job
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires

JOB = "window-demo"
PLAIN = "window-none"


def test_the_start_window_is_explained_once_and_shown_as_one_starts_between_column(
    open_page: OpenPage, server: LiveServer
) -> None:
    app = server.app
    add_job(
        app, ADMIN, JOB, JobSpec("0 * * * *", "echo window", spread_s=120, jitter_s=30), bulk=True
    )
    add_job(app, ADMIN, PLAIN, JobSpec("0 * * * *", "echo no window"), bulk=True)
    try:
        page = open_page("admin")

        # The form: both options in one "Start window" group, one explanation for both.
        page.goto(server.at(f"/jobs/{JOB}/edit"))
        group = page.get_by_role("group", name="Start window")
        expect(group.get_by_label("Spread (s)")).to_have_value("120")
        expect(group.get_by_label("Plus jitter (s)")).to_have_value("30")
        expect(page.locator(".start-window-help")).to_have_count(1)
        expect(group.get_by_label("Spread (s)")).to_have_attribute(
            "aria-describedby", "spread-help start-window-help"
        )
        group.scroll_into_view_if_needed()
        screenshot(page, "job-form-start-window")

        # The job page and the list: the same words, from the one rule's module.
        words = window_words(120, 30)
        page.goto(server.at(f"/jobs/{JOB}"))
        expect(page.locator("dd[data-spread]")).to_contain_text(words)
        page.goto(server.at("/jobs"))
        expect(page.locator(f'tr:has(a[href="/jobs/{JOB}"]) [data-spread]')).to_have_text(words)

        # Upcoming: each fire's first and last start, as the service computed them.
        page.goto(server.at(f"/upcoming?hours=3&job={JOB}"))
        expect(page.locator("#upcoming-fires thead")).to_contain_text("Starts between")
        expect(page.locator("#upcoming-fires thead")).not_to_contain_text("Spread")
        fires = upcoming_fires(app, ADMIN, UpcomingQuery(hours=3, job=JOB)).fires
        zone = ZoneInfo(BROWSER_ZONE)
        rows = page.locator("#upcoming-fires tbody tr")
        expect(rows).to_have_count(len(fires))
        for i, fire in enumerate(fires):
            first, last = (
                t.astimezone(zone).strftime("%H:%M:%S") for t in (fire.first_start, fire.last_start)
            )
            assert first != last  # three targets at their own places in 150 s
            cell = rows.nth(i).locator("td[data-starts] span")
            expect(cell).to_have_text(f"{first} – {last}")
            expect(cell).to_have_attribute("title", words)
        screenshot(page, "upcoming-starts-between")

        # The control: a job without a window starts every target at the fire's second.
        page.goto(server.at(f"/upcoming?hours=3&job={PLAIN}"))
        [fire, *_] = upcoming_fires(app, ADMIN, UpcomingQuery(hours=3, job=PLAIN)).fires
        plain = page.locator("#upcoming-fires tbody tr").first.locator("td[data-starts]")
        expect(plain).to_have_text(fire.at.astimezone(zone).strftime("%H:%M:%S"))
    finally:
        remove_job(app, ADMIN, JOB)
        remove_job(app, ADMIN, PLAIN)
