"""The header's project switcher in Chromium: choosing a project opens the job list there,
and the choice is kept from page to page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live_web import ADMIN, LiveServer, log_in
from playwright.sync_api import BrowserContext, expect
from sqlalchemy import delete

from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Project

PROJECT = "pbx"


@pytest.fixture
def second_project(server: LiveServer) -> Iterator[None]:
    """Project ``pbx`` with a target and a job of its own, gone again after the test (the
    server is shared: its other tests' global users would see a switcher)."""
    admin = ADMIN.within(PROJECT)
    projects.add_project(server.app, ADMIN, PROJECT)
    targets.add_target(server.app, admin, TargetSpec("pbx1", TargetKind.LOCAL))
    spec = JobSpec(schedule="0 4 * * *", command="echo pbx")
    jobs.add_job(server.app, admin, "pbx-report", spec, bulk=True)
    yield
    jobs.remove_job(server.app, admin, "pbx-report")
    targets.remove_target(server.app, admin, "pbx1")
    with server.app.db.session() as session:
        session.execute(delete(Project).where(Project.name == PROJECT))


def test_choosing_a_project_in_the_header_shows_its_jobs_and_keeps_it(
    second_project: None, server: LiveServer, fresh_context: BrowserContext
) -> None:
    page = fresh_context.new_page()
    log_in(page, server, "olivia")
    page.goto(server.at("/jobs"))
    switch = page.get_by_label("Project")
    expect(switch).to_have_value("default")
    expect(page.locator("main")).not_to_contain_text("pbx-report")

    switch.select_option(PROJECT)  # the page script opens it at once
    page.wait_for_url(server.at(f"/jobs?project={PROJECT}"))
    expect(page.locator("main")).to_contain_text("pbx-report")
    page.goto(server.at("/jobs"))
    expect(page.get_by_label("Project")).to_have_value(PROJECT)
    expect(page.locator("main")).to_contain_text("pbx-report")
