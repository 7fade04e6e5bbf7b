"""Logging in, who sees which controls, CSRF, and the viewer's time zone."""

from __future__ import annotations

import json
import urllib.request
from zoneinfo import ZoneInfo

from live_web import ADMIN, BROWSER_ZONE, NODE, LiveServer, OpenPage, log_in
from playwright.sync_api import BrowserContext, expect

from fleetcron.services.audit import AuditFilter, list_event_views
from fleetcron.services.jobs.edit import JobSpec, add_job, list_jobs

EDIT_LINKS = 'main a[href$="/new"], main a[href$="/edit"], main a[href$="/delete"]'


def test_an_operator_logs_in_with_the_form_and_sees_the_scheduler_running(
    fresh_context: BrowserContext, server: LiveServer
) -> None:
    page = fresh_context.new_page()
    log_in(page, server, "olivia")

    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    expect(page.locator("#scheduler-status")).to_contain_text(f"Scheduler: running on {NODE}")
    expect(page.locator("header .who")).to_contain_text("olivia")


def test_a_page_asked_for_without_a_session_leads_to_the_login_form(
    fresh_context: BrowserContext, server: LiveServer
) -> None:
    page = fresh_context.new_page()
    page.goto(server.at("/targets/alpha"))

    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    assert page.url == server.at("/login?next=/targets/alpha")


def test_times_are_shown_in_the_time_zone_of_the_browser(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/audit?actor=olivia&action=login"))

    events, _ = list_event_views(server.app, ADMIN, AuditFilter(actor="olivia", action="login"))
    berlin = events[0].at.astimezone(ZoneInfo(BROWSER_ZONE)).strftime("%Y-%m-%d %H:%M:%S")
    expect(page.locator("table.audit tbody tr").first).to_contain_text(berlin)
    expect(page.locator("footer")).to_have_text(f"Times in {BROWSER_ZONE}.")


def test_a_viewer_sees_no_control_that_changes_anything(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_job(server.app, ADMIN, "viewer-sees", JobSpec("0 4 * * *", "uptime"), bulk=True)
    add_job(server.app, ADMIN, "alpha-only", JobSpec("0 5 * * *", "df -h"), target="alpha")
    page = open_page("victor")
    for path in ("/", "/jobs", "/targets", "/targets/alpha", "/runs", "/tokens"):
        page.goto(server.at(path))
        expect(page.locator("main h1")).to_be_visible()
        changing = page.locator("main form[method=post]")
        if path == "/tokens":  # a viewer manages their own API tokens, nothing else
            expect(changing).to_have_count(1)
            expect(changing).to_have_attribute("action", "/tokens/new")
        else:
            expect(changing).to_have_count(0)
        expect(page.locator(EDIT_LINKS)).to_have_count(0)
        if path == "/jobs":
            expect(page.locator('tr[data-job="viewer-sees"]')).to_be_visible()
        if path == "/targets/alpha":
            expect(page.locator('tr[data-job="alpha-only"]')).to_be_visible()
            expect(page.locator('tr[data-job="viewer-sees"]')).to_be_visible()
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Bulk jobs")).to_be_visible()
    expect(nav.get_by_role("link", name="Users")).to_have_count(0)


def test_a_viewer_is_refused_the_new_job_form(open_page: OpenPage, server: LiveServer) -> None:
    page = open_page("victor")
    response = page.goto(server.at("/jobs/new"))

    assert response is not None and response.status == 403
    expect(page.get_by_role("alert")).to_contain_text("needs the operator role")


def test_a_forged_post_without_the_csrf_token_is_refused(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/jobs"))
    # The request carries olivia's session cookie, as a cross-site form post would.
    forged = page.request.post(
        server.at("/jobs/new"),
        form={"name": "forged", "schedule": "* * * * *", "command": "id"},
        max_redirects=0,
    )

    assert forged.status == 403
    assert "CSRF" in forged.text()
    assert "forged" not in {view.name for view in list_jobs(server.app, ADMIN)}


def test_a_new_api_token_is_shown_once_and_lets_a_script_call_the_api(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/tokens"))
    page.get_by_label("Name").fill("ci-script")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text()

    request = urllib.request.Request(
        server.at("/api/v1/jobs"), headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert isinstance(json.loads(response.read()), list)
    page.goto(server.at("/tokens"))
    expect(page.locator('tr[data-token="ci-script"]')).to_contain_text("active")
    assert token not in page.content()


def test_a_user_an_admin_adds_can_log_in_with_the_given_role(
    open_page: OpenPage, fresh_context: BrowserContext, server: LiveServer
) -> None:
    page = open_page("admin")
    page.goto(server.at("/users"))
    page.get_by_label("Name").fill("nadia")
    page.locator("#new-role").select_option("operator")
    page.locator("#new-password").fill("nadia-password")
    page.get_by_role("button", name="Add user").click()
    expect(page.get_by_role("status")).to_contain_text("Added user nadia with the operator role")

    newcomer = fresh_context.new_page()
    newcomer.goto(server.at("/login"))
    newcomer.get_by_text(f"Times in {BROWSER_ZONE}").wait_for()
    newcomer.get_by_label("User").fill("nadia")
    newcomer.get_by_label("Password").fill("nadia-password")
    newcomer.get_by_role("button", name="Log in").click()
    expect(newcomer.locator("header .who")).to_contain_text("nadia operator")
