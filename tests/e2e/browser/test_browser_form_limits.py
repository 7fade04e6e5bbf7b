"""The target and log-in forms in real Chromium (issue 10, item 5): what the server refuses
comes back in the fields exactly as typed, as the browser itself reads the page (a textarea
loses a line break right after its opening tag unless the page adds one)."""

from __future__ import annotations

import pytest
from live_web import ADMIN, BROWSER_ZONE, LiveServer, OpenPage, problems_of
from playwright.sync_api import BrowserContext, expect

from fleetcron.core import validation as v
from fleetcron.errors import NotFound
from fleetcron.services.targets.reads import show_target

REFUSED = (
    "Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"
)


def test_a_typed_port_0_comes_back_refused_with_the_notes_and_their_leading_line_break(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/targets/new"))
    notes = "\nrack 4, the blank line above on purpose\n  indented"
    page.get_by_label("Name", exact=True).fill("port-zero")
    page.get_by_label("Host", exact=True).fill("port-zero.example.com")
    page.get_by_label("Port", exact=True).fill("0")
    page.get_by_label("User", exact=True).fill("deploy")
    page.get_by_label("Private key").fill("not a key")
    page.get_by_label("Notes", exact=True).fill(notes)
    expect(page.locator("#notes-count")).to_have_text(
        f"{len(notes)} / {v.NOTES_MAX_CHARS} characters"
    )
    with page.expect_response(server.at("/targets/new")) as response:
        page.get_by_role("button", name="Add and pair").click()

    assert response.value.status == 422
    expect(page.locator("#port-error")).to_have_text("port: 0 is out of range 1-65535")
    expect(page.get_by_label("Port", exact=True)).to_have_value("0")
    expect(page.get_by_label("Host", exact=True)).to_have_value("port-zero.example.com")
    expect(page.get_by_label("Notes", exact=True)).to_have_value(notes)
    expect(page.locator("#notes-count")).to_have_text(
        f"{len(notes)} / {v.NOTES_MAX_CHARS} characters"
    )
    with pytest.raises(NotFound):
        show_target(server.app, ADMIN, "port-zero")
    assert problems_of(page) == [REFUSED]


def test_an_over_long_user_name_comes_back_on_the_log_in_form(
    fresh_context: BrowserContext, server: LiveServer
) -> None:
    page = fresh_context.new_page()
    page.goto(server.at("/login"))
    page.get_by_text(f"Times in {BROWSER_ZONE}").wait_for()
    name = "o" * 65
    page.get_by_label("User").fill(name)
    page.get_by_label("Password").fill("operator-password")
    with page.expect_response(server.at("/login")) as response:
        page.get_by_role("button", name="Log in").click()

    assert response.value.status == 422
    expect(page.get_by_role("alert")).to_have_text(
        "user: is 65 characters long; at most 64 are allowed."
    )
    expect(page.get_by_label("User")).to_have_value(name)
    expect(page.get_by_label("Password")).to_have_value("")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
