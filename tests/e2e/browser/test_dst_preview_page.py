"""The job page's "DST ahead" preview and the form's, in a real Chromium against the live
server (real clock: the next transitions of Europe/Warsaw within a year): the job page says
what the job does at each; the edit form's live preview follows the "Time skipped by DST"
choice as it is changed, and once saved the job page says the same."""

from __future__ import annotations

from live_web import ADMIN, LiveServer, OpenPage
from playwright.sync_api import expect

from fleetcron.services.jobs.edit import JobSpec, add_job, remove_job

JOB = "dst-demo"
NO_DST = "dst-none"


def test_the_job_page_and_the_form_preview_what_the_job_does_at_dst(
    open_page: OpenPage, server: LiveServer
) -> None:
    app = server.app
    add_job(
        app, ADMIN, JOB, JobSpec("30 2 * * *", "echo dst", timezone="Europe/Warsaw"), target="alpha"
    )
    add_job(
        app,
        ADMIN,
        NO_DST,
        JobSpec("30 2 * * *", "echo tokyo", timezone="Asia/Tokyo"),
        target="alpha",
    )
    try:
        page = open_page("olivia")

        page.goto(server.at(f"/jobs/{JOB}"))
        expect(page.locator("dt", has_text="DST ahead")).to_have_count(1)
        gap = page.locator('#job-dst li[data-kind="gap"]')
        expect(gap).to_have_count(1)
        expect(gap).to_contain_text("Europe/Warsaw, ")
        expect(gap).to_contain_text("02:30 does not exist → runs at 03:00")
        fold = page.locator('#job-dst li[data-kind="fold"]')
        expect(fold).to_contain_text("02:30 happens twice → runs once, on the first pass")

        # The form's live preview asks again when the choice changes.
        page.goto(server.at(f"/jobs/{JOB}/edit"))
        notes = page.locator("#schedule-preview .dst-notes li")
        expect(notes.first).to_contain_text("02:30 does not exist → runs at 03:00")
        page.get_by_label("Time skipped by DST").select_option("skip")
        expect(notes.first).to_contain_text("02:30 does not exist → skipped")
        page.get_by_role("button", name="Save").click()
        page.wait_for_url(server.at("/targets/alpha"))  # an individual job's home
        page.goto(server.at(f"/jobs/{JOB}"))
        expect(gap).to_contain_text("02:30 does not exist → skipped")

        # A zone without DST has no preview (the negative control).
        page.goto(server.at(f"/jobs/{NO_DST}"))
        expect(page.locator("h1")).to_contain_text(NO_DST)
        expect(page.locator("#job-dst")).to_have_count(0)
    finally:
        remove_job(app, ADMIN, JOB)
        remove_job(app, ADMIN, NO_DST)
