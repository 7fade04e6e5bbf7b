"""The blackout windows page in real Chromium: an operator adds a window through the form
(with the CSRF token it carries), sees it listed in force, and lifts it; a window the
service refuses shows the form again with what was typed and the error naming the field,
and saves nothing; a viewer sees the windows but no form. The live server reads the real
clock, so the windows are in 2030."""

from __future__ import annotations

from live_web import ADMIN, LiveServer, OpenPage, problems_of
from playwright.sync_api import Page, expect

from fleetcron.services.blackouts.windows import list_blackouts
from fleetcron.services.jobs.edit import JobSpec, add_job


def fill(page: Page, **values: str) -> None:
    for name, value in values.items():
        page.locator(f"#bw-{name}").fill(value)


def test_an_operator_adds_and_lifts_a_window_through_the_form(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_job(
        server.app,
        ADMIN,
        "patch-night",
        JobSpec(schedule="0 3 * * *", command="echo patch night"),
        target="alpha",
    )
    page = open_page("olivia")
    page.goto(server.at("/blackouts"))
    fill(
        page,
        name="rack-patch",
        reason="kernel 6.12 on rack r12",
        job="patch-night",
        zone="Europe/Warsaw",
        start="2030-03-02 22:00",
        end="2030-03-03 02:00",
    )
    page.get_by_role("button", name="Add window").click()

    expect(page.get_by_role("status")).to_contain_text('"rack-patch" added')
    row = page.locator("table.blackouts tbody tr", has_text="rack-patch")
    expect(row).to_contain_text("job=patch-night")
    expect(row).to_contain_text("2030-03-02 22:00 to 2030-03-03 02:00 (Europe/Warsaw)")
    expect(row).to_contain_text("in force")

    row.get_by_label("Why lift").fill("patched early")
    row.get_by_role("button", name="Lift").click()
    expect(page.get_by_role("status")).to_contain_text('"rack-patch" lifted')
    assert [w.name for w in list_blackouts(server.app, ADMIN)] == []
    assert problems_of(page) == []


def test_a_refused_window_names_the_field_keeps_the_form_and_saves_nothing(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/blackouts"))
    before = len(list_blackouts(server.app, ADMIN, include_ended=True))
    fill(
        page,
        name="backwards",
        reason="typo",
        target="bravo",
        zone="Europe/Warsaw",
        start="2030-03-03 02:00",
        end="2030-03-02 22:00",
    )
    page.get_by_role("button", name="Add window").click()

    expect(page.get_by_role("alert")).to_contain_text("end: ")
    expect(page.get_by_role("alert")).to_contain_text("is not after the start")
    expect(page.locator("#bw-end")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#bw-name")).to_have_value("backwards")
    assert len(list_blackouts(server.app, ADMIN, include_ended=True)) == before


def test_a_viewer_sees_the_windows_but_no_form(open_page: OpenPage, server: LiveServer) -> None:
    page = open_page("victor")
    page.goto(server.at("/blackouts"))

    expect(page.get_by_role("heading", name="Blackout windows")).to_be_visible()
    expect(page.locator("#blackout-form")).to_have_count(0)
    # Control: the operator's page has the form.
    operator = open_page("olivia")
    operator.goto(server.at("/blackouts"))
    expect(operator.locator("#blackout-form")).to_have_count(1)
