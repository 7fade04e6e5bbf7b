"""The job form in real Chromium: a long command is typed, counted and saved whole, or
refused by the server with the command still in the field (issue 10, item 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_web import ADMIN, LiveServer, OpenPage, problems_of
from playwright.sync_api import Page, expect

from fleetcron.services.jobs.edit import list_jobs, show_job


@pytest.fixture
def limit_1000(server: LiveServer) -> Iterator[int]:
    """The server configured with FLEETCRON_COMMAND_MAX_LENGTH=1000 for one test."""
    app = server.app
    before = app.settings
    app.settings = before.model_copy(update={"command_max_length": 1000})
    yield 1000
    app.settings = before


def command_of(length: int) -> str:
    tail = " && rm -rf /var/spool/fleetcron-e2e/tmp-*"
    head = "/usr/local/bin/collect --all #"
    return head + "x" * (length - len(head) - len(tail)) + tail


def start_form(page: Page, server: LiveServer, name: str) -> None:
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Schedule").fill("0 2 * * *")


def test_a_typed_600_character_command_is_counted_as_typed_and_saved_whole(
    open_page: OpenPage, server: LiveServer, limit_1000: int
) -> None:
    page = open_page("olivia")
    start_form(page, server, "long-collect")
    counter = page.locator("#command-count")
    expect(counter).to_have_text(f"0 / {limit_1000} characters")
    command = command_of(600)
    box = page.get_by_label("Command")
    box.press_sequentially(command[:40])
    expect(counter).to_have_text(f"40 / {limit_1000} characters")
    # the rest as a paste would put it: the browser cuts nothing (no maxlength)
    box.fill(command)
    expect(box).to_have_value(command)
    expect(counter).to_have_text(f"600 / {limit_1000} characters")
    expect(counter).not_to_have_class("counter over")
    page.get_by_role("button", name="Create bulk job").click()

    page.wait_for_url(server.at("/jobs"))
    assert show_job(server.app, ADMIN, "long-collect").command == command
    assert problems_of(page) == []


def test_a_command_over_the_limit_turns_the_counter_red_and_comes_back_refused_but_whole(
    open_page: OpenPage, server: LiveServer
) -> None:
    limit = server.app.settings.command_max_length
    page = open_page("olivia")
    start_form(page, server, "too-long-collect")
    command = command_of(limit + 1)
    box = page.get_by_label("Command")
    box.fill(command[:-1])
    counter = page.locator("#command-count")
    expect(counter).to_have_text(f"{limit} / {limit} characters")
    box.press_sequentially(command[-1])
    expect(counter).to_have_text(f"{limit + 1} / {limit} characters: 1 too many")
    expect(counter).to_have_class("counter over")
    with page.expect_response(server.at("/jobs/new")) as response:
        page.get_by_role("button", name="Create bulk job").click()

    assert response.value.status == 422
    expect(page.locator("#command-error")).to_have_text(
        f"command: is {limit + 1} characters long; at most {limit} are allowed"
    )
    expect(page.get_by_label("Command")).to_have_value(command)
    expect(page.locator("#command-count")).to_have_text(
        f"{limit + 1} / {limit} characters: 1 too many"
    )
    assert "too-long-collect" not in {view.name for view in list_jobs(server.app, ADMIN)}
    # deleting one character brings it within the limit, and then it is saved whole
    page.get_by_label("Command").press("Control+End")
    page.get_by_label("Command").press("Backspace")
    expect(page.locator("#command-count")).to_have_text(f"{limit} / {limit} characters")
    page.get_by_role("button", name="Create bulk job").click()
    page.wait_for_url(server.at("/jobs"))
    assert show_job(server.app, ADMIN, "too-long-collect").command == command[:-1]
    # the one console error is Chromium reporting the refused post's 422; no CSP violation
    assert problems_of(page) == [
        "Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"
    ]
