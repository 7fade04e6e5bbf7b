"""Bulk jobs and a target's page, driven through the browser like an operator would."""

from __future__ import annotations

import re

import pytest
from live_web import ADMIN, LiveServer, OpenPage
from playwright.sync_api import expect

from fleetcron.cron import parse
from fleetcron.errors import CronError
from fleetcron.services.jobs.edit import JobSpec, add_job, list_jobs, show_job

FIRE_TIME = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d{2}-\d{2} \d{2}:\d{2}$")


def bulk_job(server: LiveServer, name: str, command: str, disabled_on: list[str]) -> None:
    add_job(
        server.app,
        ADMIN,
        name,
        JobSpec(schedule="0 3 * * *", command=command),
        bulk=True,
        disabled_on=disabled_on,
    )


def test_a_bulk_job_created_with_one_target_unchecked_is_enabled_on_two_of_three(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Name", exact=True).fill("nightly-report")
    page.get_by_label("Schedule").fill("0 2 * * *")
    page.get_by_label("Command").fill("echo report")
    page.get_by_label("charlie").uncheck()
    page.get_by_role("button", name="Create bulk job").click()

    page.wait_for_url(server.at("/jobs"))
    expect(page.locator('tr[data-job="nightly-report"]')).to_contain_text("2/3 enabled")
    view = show_job(server.app, ADMIN, "nightly-report")
    assert [a.target for a in view.assignments if not a.enabled] == ["charlie"]


def test_enabling_a_paused_bulk_job_on_a_targets_page_makes_it_three_of_three(
    open_page: OpenPage, server: LiveServer
) -> None:
    bulk_job(server, "log-rotate", "echo rotate", disabled_on=["charlie"])
    page = open_page("olivia")
    page.goto(server.at("/targets/charlie"))
    row = page.locator('tr[data-job="log-rotate"]')
    expect(row).to_contain_text("paused")
    row.get_by_role("button", name="Enable").click()

    expect(page.get_by_role("status")).to_contain_text("Enabled job log-rotate on charlie")
    page.goto(server.at("/jobs"))
    expect(page.locator('tr[data-job="log-rotate"]')).to_contain_text("3/3 enabled")


def test_run_now_on_a_target_shows_the_finished_run_with_its_output_in_recent_runs(
    open_page: OpenPage, server: LiveServer
) -> None:
    bulk_job(server, "say-hello", 'echo "hello from $FLEETCRON_TARGET"', disabled_on=[])
    page = open_page("olivia")
    page.goto(server.at("/targets/bravo"))
    page.locator('tr[data-job="say-hello"]').get_by_role("button", name="Run now").click()

    expect(page.get_by_role("status")).to_contain_text("queued")
    # The page reloads itself while the run is queued or running; the scheduler runs it.
    finished = page.locator('#recent-runs tr[data-status="succeeded"]', has_text="say-hello")
    expect(finished).to_be_visible(timeout=15_000)
    expect(finished.locator(".badge-ok", has_text="0")).to_be_visible()
    finished.get_by_text("stdout").click()
    expect(finished.locator("details.output pre").first).to_have_text("hello from bravo\n")


def test_the_schedule_preview_describes_a_valid_schedule_and_lists_its_next_fire_times(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Schedule").press_sequentially("30 4 * * 1-5")

    preview = page.locator("#schedule-preview")
    expect(preview.locator(".description")).to_have_text(parse("30 4 * * 1-5").describe())
    fires = preview.locator(".fires li")
    expect(fires).to_have_count(5)
    for text in fires.all_inner_texts():
        assert FIRE_TIME.match(text), text
        assert text.endswith("04:30") and not text.startswith(("Sat", "Sun")), text


def test_the_schedule_preview_shows_why_an_invalid_schedule_is_refused(
    open_page: OpenPage, server: LiveServer
) -> None:
    with pytest.raises(CronError) as refused:
        parse("61 * * * *")
    page = open_page("olivia")
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Schedule").press_sequentially("61 * * * *")

    expect(page.locator("#schedule-preview .field-error")).to_have_text(refused.value.message)
    expect(page.locator("#schedule-preview .fires")).to_have_count(0)


def test_without_javascript_a_refused_form_comes_back_with_the_error_and_the_input_kept(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia", javascript=False)
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Name", exact=True).fill("bad-hour")
    page.get_by_label("Schedule").fill("0 25 * * *")
    page.get_by_label("Command").fill("echo never")
    with page.expect_response(server.at("/jobs/new")) as response:
        page.get_by_role("button", name="Create bulk job").click()

    assert response.value.status == 422
    expect(page.locator("#schedule-error")).to_contain_text("hour: 25 is out of range 0-23")
    expect(page.get_by_label("Schedule")).to_have_value("0 25 * * *")
    expect(page.get_by_label("Command")).to_have_value("echo never")
    expect(page.get_by_label("Name", exact=True)).to_have_value("bad-hour")
    assert "bad-hour" not in {view.name for view in list_jobs(server.app, ADMIN)}


def test_unchecking_a_target_in_the_edit_form_pauses_the_job_only_there(
    open_page: OpenPage, server: LiveServer
) -> None:
    bulk_job(server, "cache-purge", "echo purge", disabled_on=[])
    page = open_page("olivia")
    page.goto(server.at("/jobs/cache-purge/edit"))
    page.get_by_label("alpha").uncheck()
    page.get_by_role("button", name="Save").click()

    expect(page.get_by_role("status")).to_contain_text("enabled on 2 of 3 targets")
    states = {a.target: a.enabled for a in show_job(server.app, ADMIN, "cache-purge").assignments}
    assert states == {"alpha": False, "bravo": True, "charlie": True}


def test_a_job_is_deleted_after_confirming_on_the_confirm_page_without_javascript(
    open_page: OpenPage, server: LiveServer
) -> None:
    bulk_job(server, "old-cleanup", "echo cleanup", disabled_on=[])
    page = open_page("olivia", javascript=False)
    page.goto(server.at("/jobs"))
    page.locator('tr[data-job="old-cleanup"]').get_by_role("link", name="Delete").click()
    expect(page.get_by_role("heading", name="Delete job old-cleanup?")).to_be_visible()
    page.get_by_role("button", name="Delete old-cleanup").click()

    expect(page.get_by_role("status")).to_contain_text("Deleted job old-cleanup from 3 targets")
    expect(page.locator('tr[data-job="old-cleanup"]')).to_have_count(0)
    assert "old-cleanup" not in {view.name for view in list_jobs(server.app, ADMIN)}


def test_an_individual_job_created_on_a_targets_page_belongs_to_that_target_only(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/targets/bravo"))
    page.locator("summary", has_text="New individual job").click()
    page.get_by_label("Name", exact=True).fill("bravo-vacuum")
    page.get_by_label("Schedule").fill("0 1 * * 0")
    page.get_by_label("Command").fill("echo vacuum")
    page.get_by_role("button", name="Create job on bravo").click()

    expect(page.get_by_role("status")).to_contain_text("Created individual job bravo-vacuum")
    expect(page.locator('tr[data-job="bravo-vacuum"]')).to_contain_text("enabled")
    view = show_job(server.app, ADMIN, "bravo-vacuum")
    assert (view.origin, view.target, [a.target for a in view.assignments]) == (
        "individual",
        "bravo",
        ["bravo"],
    )
    page.goto(server.at("/jobs"))
    expect(page.locator('tr[data-job="bravo-vacuum"]')).to_have_count(0)
