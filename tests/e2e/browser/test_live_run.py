"""A running run's page in real Chromium: the output appears while the job runs, the
elapsed clock counts, Stop kills the run's process group and leaves it cancelled; without
JavaScript the page follows the run by reloading itself."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from live_web import ADMIN, LiveServer, OpenPage, problems_of
from playwright.sync_api import expect

from fixtures.sshd import SshServer
from fleetcron.core.targets import TargetSpec
from fleetcron.services.jobs.edit import JobSpec, add_job
from fleetcron.services.runs import reads as runs
from fleetcron.services.runs.views import RunView, show_run
from fleetcron.services.targets.edit import add_target, remove_target
from fleetcron.web.pages.runs import REFRESH_S
from integration.executors.procs import kill_all, marker_seconds, sleeping
from waiting import eventually


def start(server: LiveServer, job: str, command: str, target: str = "alpha") -> int:
    add_job(server.app, ADMIN, job, JobSpec(schedule="0 3 1 1 *", command=command), target=target)
    [run_id] = runs.request_run(server.app, ADMIN, job)
    eventually(
        lambda: show_run(server.app, ADMIN, run_id).status == "running",
        10,
        "the scheduler to start the run",
    )
    return run_id


def the_run(server: LiveServer, run_id: int) -> RunView:
    return show_run(server.app, ADMIN, run_id)


def test_live_output_appears_line_by_line_and_stop_leaves_the_run_cancelled(
    open_page: OpenPage, server: LiveServer
) -> None:
    marker = marker_seconds()
    # It ticks until it is stopped: however long a loaded machine takes to load the page
    # and get to the Stop button, the run cannot end by itself first.
    run_id = start(
        server,
        "ticker",
        f"sleep {marker} & i=0; while :; do i=$((i + 1)); echo tick $i; sleep 1; done",
    )
    try:
        page = open_page("olivia")
        page.goto(server.at(f"/runs/{run_id}"))
        out = page.locator("[data-live-output]")
        expect(out).to_contain_text("tick 1")
        first = out.inner_text()
        # Lines printed after the page was loaded arrive through the poll, without a reload.
        expect(out).to_contain_text("tick 4", timeout=10_000)
        assert out.inner_text().startswith(first.strip())
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        clock = page.locator("[data-elapsed]")
        shown = clock.inner_text()
        expect(clock).not_to_have_text(shown, timeout=5_000)
        assert re.fullmatch(r"\d+s|\d+m \d\ds", clock.inner_text())
        assert sleeping(marker), "the job's background child runs before the stop"

        page.get_by_role("button", name="Stop…").click()
        page.get_by_role("button", name=f"Stop run #{run_id}").click()

        expect(page.get_by_role("status")).to_contain_text(f"Stopping run #{run_id}")
        expect(page.locator("h1 .badge")).to_have_text("cancelled", timeout=10_000)
        expect(page.locator(".facts")).to_contain_text("Stopped by")
        expect(page.locator(".facts")).to_contain_text("olivia")
        expect(page.locator("section.stream pre").first).to_contain_text("tick 1")
        run = the_run(server, run_id)
        assert (run.status, run.stop_requested_by) == ("cancelled", "olivia")
        assert sleeping(marker) == []
        assert problems_of(page) == []  # no console error, no CSP violation
    finally:
        kill_all(marker)


def test_without_javascript_the_page_of_a_running_run_reloads_until_it_ends(
    open_page: OpenPage, server: LiveServer, tmp_path: Path
) -> None:
    # The run ends when the test says so (the file appears), not after a fixed time that a
    # loaded machine may spend before the page first shows it running.
    done = tmp_path / "done"
    run_id = start(
        server,
        "short-lived",
        f"echo begun; while [ ! -e {done} ]; do sleep 0.1; done; echo over",
    )
    page = open_page("olivia", javascript=False)
    page.goto(server.at(f"/runs/{run_id}"))
    # The run may be loaded before its first line is recorded: then the line arrives with
    # a later reload, so wait for several reload periods (a loaded machine may take more
    # than one to start the command) rather than the default 10 s.
    expect(page.locator("[data-live-output]")).to_contain_text(
        "begun", timeout=6 * REFRESH_S * 1000
    )
    assert page.locator('noscript meta[http-equiv="refresh"]').count() == 1
    done.touch()

    expect(page.locator("h1 .badge")).to_have_text("succeeded", timeout=15_000)
    expect(page.locator("pre").last).to_contain_text("over")
    assert page.locator('meta[http-equiv="refresh"]').count() == 0


def test_a_viewer_sees_the_live_output_but_no_stop_button(
    open_page: OpenPage, server: LiveServer
) -> None:
    marker = marker_seconds()
    run_id = start(server, "watched", f"echo watching; sleep {marker}")
    try:
        page = open_page("victor")
        page.goto(server.at(f"/runs/{run_id}"))
        expect(page.locator("[data-live-output]")).to_contain_text("watching")
        assert page.get_by_role("button", name="Stop").count() == 0
    finally:
        runs.stop_run(server.app, ADMIN, run_id)
        kill_all(marker)


def test_terminal_sequences_in_the_output_are_shown_as_text_live_and_recorded(
    open_page: OpenPage, server: LiveServer
) -> None:
    run_id = start(
        server,
        "colours",
        r"printf 'one \033[31mred\007\n'; sleep 2; printf 'two \033]0;title\007\r\n'; sleep 6",
    )
    page = open_page("olivia")
    page.goto(server.at(f"/runs/{run_id}"))
    out = page.locator("[data-live-output]")
    expect(out).to_contain_text(r"one \x1b[31mred\x07")
    # The second line arrives through the poll, escaped the same way by the page's script.
    expect(out).to_contain_text(r"two \x1b]0;title\x07", timeout=10_000)
    assert "\x1b" not in out.inner_text() and "\x07" not in out.inner_text()
    assert r"\r" not in out.inner_text()  # a Windows line end is a line end

    expect(page.locator("h1 .badge")).to_have_text("succeeded", timeout=15_000)
    recorded = page.locator("section.stream pre").first
    expect(recorded).to_contain_text(r"two \x1b]0;title\x07")
    assert "\x1b" not in page.content()
    assert problems_of(page) == []


@pytest.mark.sshd
def test_stop_on_an_ssh_target_leaves_no_process_behind_there(
    open_page: OpenPage, server: LiveServer, sshd: SshServer
) -> None:
    """The sshd fixture runs on this machine, so the target's processes are visible here."""
    # Pairing logs in with asyncio.run: on a thread of its own (Playwright's sync API keeps
    # an event loop marked as running in this one).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(
            add_target,
            server.app,
            ADMIN,
            TargetSpec(
                "remote-box",
                host=sshd.host,
                port=sshd.port,
                user=sshd.user,
                private_key=sshd.client_private_key.encode(),
                host_key=sshd.host_key_line,
            ),
        ).result()
    main, child = marker_seconds(), marker_seconds()
    run_id = start(
        server,
        "remote-ticker",
        f"sleep {child} & for i in 1 2 3 4 5 6; do echo remote tick $i; sleep 1; done; "
        f"sleep {main}",
        target="remote-box",
    )
    try:
        page = open_page("olivia")
        page.goto(server.at(f"/runs/{run_id}"))
        out = page.locator("[data-live-output]")
        expect(out).to_contain_text("remote tick 2", timeout=10_000)
        assert sleeping(child), "the checker finds the target's processes before the stop"

        page.get_by_role("button", name="Stop…").click()
        page.get_by_role("button", name=f"Stop run #{run_id}").click()

        expect(page.locator("h1 .badge")).to_have_text("cancelled", timeout=15_000)
        left = sleeping(main) + sleeping(child)
    finally:
        kill_all(main, child)
        # The server is shared: other tests count its targets (bulk jobs reach every one).
        remove_target(server.app, ADMIN, "remote-box", with_jobs=True)
    assert left == []
    run = the_run(server, run_id)
    assert (run.status, run.target_name, run.stop_requested_by) == (
        "cancelled", "remote-box", "olivia"
    )  # fmt: skip
