"""Stop asks first, in real Chromium: the confirmation names the run's job, target, node
and start and says what a stop does (SIGTERM to the process group, SIGKILL after the
grace); nothing is stopped until it is confirmed; the run page then says who stopped it
and when."""

from __future__ import annotations

import re

from live_web import ADMIN, LiveServer, OpenPage, problems_of
from playwright.sync_api import expect

from fleetcron.core.stopping import STOP_GRACE_S
from fleetcron.services.jobs.edit import JobSpec, add_job
from fleetcron.services.runs import reads as runs
from fleetcron.services.runs.views import show_run
from integration.executors.procs import kill_all, marker_seconds, sleeping
from waiting import eventually


def start(server: LiveServer, job: str, command: str) -> int:
    add_job(server.app, ADMIN, job, JobSpec(schedule="0 3 1 1 *", command=command), target="bravo")
    [run_id] = runs.request_run(server.app, ADMIN, job)
    eventually(
        lambda: show_run(server.app, ADMIN, run_id).status == "running",
        timeout=10,
        message="the scheduler did not start the run",
    )
    return run_id


def test_stop_shows_what_it_touches_and_does_and_waits_for_the_confirmation(
    open_page: OpenPage, server: LiveServer
) -> None:
    marker = marker_seconds()
    run_id = start(server, "confirmed-stop", f"echo started; sleep {marker}")
    try:
        page = open_page("olivia")
        page.goto(server.at(f"/runs/{run_id}"))
        page.get_by_role("button", name="Stop…").click()

        expect(page).to_have_url(re.compile(rf"/runs/{run_id}/stop\??$"))
        facts = page.locator("[data-stop-facts]")
        expect(facts).to_contain_text("confirmed-stop")
        expect(facts).to_contain_text("bravo")
        expect(facts).to_contain_text("Running since")
        expect(facts).to_contain_text(server.app.node_name)
        effect = page.locator("[data-stop-effect]").inner_text()
        assert "SIGTERM" in effect and "process group" in effect
        assert f"SIGKILL to what is still alive {STOP_GRACE_S:g} s later" in effect
        # Showing the confirmation stopped nothing: the command still runs.
        assert sleeping(marker), "the run's command still runs while the stop is unconfirmed"
        assert show_run(server.app, ADMIN, run_id).stop_requested_by is None

        # Backing out leaves it running.
        page.get_by_role("link", name="Keep it running").click()
        expect(page.locator("h1 .badge")).to_have_text("running")
        assert sleeping(marker)

        page.get_by_role("button", name="Stop…").click()
        page.get_by_role("button", name=f"Stop run #{run_id}").click()

        expect(page.locator("h1 .badge")).to_have_text("cancelled", timeout=10_000)
        stopped = page.locator("[data-stopped-by]")
        expect(stopped).to_contain_text("olivia")
        assert re.search(r"at \S+", stopped.inner_text())
        # Control: the same process check sees the command gone once the stop is confirmed.
        eventually(lambda: sleeping(marker) == [], timeout=10, message="the command still runs")
        assert problems_of(page) == []
    finally:
        kill_all(marker)


def test_a_viewer_cannot_open_the_confirmation_and_an_ended_run_has_none(
    open_page: OpenPage, server: LiveServer
) -> None:
    marker = marker_seconds()
    run_id = start(server, "viewer-stop", f"sleep {marker}")
    try:
        viewer = open_page("victor")
        refused = viewer.goto(server.at(f"/runs/{run_id}/stop"))
        assert refused is not None and refused.status == 403
        assert sleeping(marker)
        runs.stop_run(server.app, ADMIN, run_id)
        eventually(lambda: show_run(server.app, ADMIN, run_id).status == "cancelled", timeout=10)
        page = open_page("olivia")
        page.goto(server.at(f"/runs/{run_id}/stop"))
        # An ended run sends the operator back to its page, which says why.
        expect(page).to_have_url(server.at(f"/runs/{run_id}"))
        expect(page.get_by_role("alert")).to_contain_text("has already ended (cancelled)")
        expect(page.locator("[data-stopped-by]")).to_contain_text(ADMIN.name)
    finally:
        kill_all(marker)
