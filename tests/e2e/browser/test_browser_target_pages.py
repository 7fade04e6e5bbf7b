"""Adding, pairing and unpairing targets through the browser, on a server of their own
(these tests change the fleet that the other modules count on)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_web import ADMIN, NODE, TICK_S, LiveServer, OpenPage
from playwright.sync_api import expect

from fixtures.app import make_settings
from fixtures.sshd import SshServer
from fleetcron.app import App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs.edit import JobSpec, add_job, set_enabled, show_job
from fleetcron.services.targets.edit import add_target
from fleetcron.services.targets.reads import show_target


@pytest.fixture(scope="module")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("web-targets")
    shutil.copyfile(sqlite_template, directory / "fleetcron.db")
    settings = make_settings(
        directory / "data", f"sqlite:///{directory / 'fleetcron.db'}", tick_s=TICK_S, node_name=NODE
    )
    app = App.open(settings)
    add_target(app, ADMIN, TargetSpec("web-01", TargetKind.LOCAL, labels=["env=prod"]))
    add_job(app, ADMIN, "everywhere", JobSpec("0 6 * * *", "uptime"), bulk=True)
    live = LiveServer.start(app)
    yield live
    live.stop()
    app.close()


def test_adding_a_local_target_pairs_it_and_bulk_jobs_extend_to_it(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("admin")  # a local target is an admin's to add
    page.goto(server.at("/targets/new"))
    page.get_by_label("Name").fill("web-02")
    page.get_by_label("This machine (local)").check()
    expect(page.get_by_label("Host", exact=True)).to_be_hidden()
    page.get_by_label("Labels").fill("env=prod, role=web")
    page.get_by_role("button", name="Add and pair").click()

    expect(page.get_by_role("status")).to_contain_text("Added and paired target web-02")
    expect(page.locator("h1 .badge")).to_have_text("paired")
    expect(page.locator('tr[data-job="everywhere"]')).to_contain_text("enabled")
    assert show_job(server.app, ADMIN, "everywhere").total == 2


@pytest.mark.sshd
def test_adding_an_ssh_target_trusted_on_first_use_shows_its_host_key_fingerprint(
    open_page: OpenPage, server: LiveServer, sshd: SshServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/targets/new"))
    page.get_by_label("Name").fill("db-01")
    page.get_by_label("Host", exact=True).fill(sshd.host)
    page.get_by_label("Port").fill(str(sshd.port))
    page.get_by_label("User", exact=True).fill(sshd.user)
    page.get_by_label("Private key").fill(sshd.client_private_key)
    page.get_by_label("trust on first use").check()
    page.get_by_role("button", name="Add and pair").click()

    expect(page.get_by_role("status")).to_contain_text(
        f"Host key {sshd.host_key_fingerprint} (trusted on first use"
    )
    expect(page.locator("dl.facts")).to_contain_text(sshd.host_key_fingerprint)
    key_body = sshd.client_private_key.strip().splitlines()[1]
    for path in ("/targets/db-01", "/targets", "/audit"):
        page.goto(server.at(path))
        assert key_body not in page.content()


def test_a_refused_ssh_target_comes_back_without_its_private_key(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia", javascript=False)
    page.goto(server.at("/targets/new"))
    page.get_by_label("Name").fill("bad-key")
    page.get_by_label("Host", exact=True).fill("192.0.2.10")
    page.get_by_label("User", exact=True).fill("root")
    page.get_by_label("Private key").fill("-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key\n")
    page.get_by_role("button", name="Add and pair").click()

    expect(page.locator("#private_key-error")).to_contain_text("not a usable private key")
    expect(page.get_by_label("Private key")).to_have_value("")
    expect(page.get_by_label("Host", exact=True)).to_have_value("192.0.2.10")


def test_unpairing_a_target_after_confirming_removes_its_job_assignments(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/targets/web-01"))
    page.get_by_role("link", name="Unpair…").click()
    page.get_by_role("button", name="Unpair web-01").click()

    expect(page.get_by_role("status")).to_contain_text("Unpaired target web-01")
    expect(page.locator("h1 .badge")).to_have_text("not paired")
    target, assignments = show_target(server.app, ADMIN, "web-01")
    assert (target.paired, assignments) == (False, [])


def test_editing_a_target_then_pausing_and_resuming_it_keeps_its_jobs_flags(
    open_page: OpenPage, server: LiveServer
) -> None:
    add_target(server.app, ADMIN, TargetSpec("edge-01", TargetKind.LOCAL, labels=["env=prod"]))
    add_job(server.app, ADMIN, "edge-status", JobSpec("*/5 * * * *", "echo status"), bulk=True)
    set_enabled(server.app, ADMIN, "edge-status", False, target="edge-01")
    page = open_page("olivia")
    page.goto(server.at("/targets/edge-01"))

    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_role("heading", name="Edit target edge-01")).to_be_visible()
    page.get_by_label("Labels").fill("env=prod, role=edge")
    page.get_by_label("Notes").fill("rack 7")
    page.get_by_role("button", name="Save").click()

    expect(page.get_by_role("status")).to_contain_text(
        "Saved target edge-01: labels, notes changed."
    )
    expect(page.locator("dl.facts")).to_contain_text("role=edge")
    expect(page.locator("dl.facts")).to_contain_text("rack 7")

    page.get_by_text("Pause for maintenance…").click()
    page.get_by_label("Reason (optional)").fill("disk swap")
    page.get_by_role("button", name="Pause edge-01").click()

    expect(page.get_by_role("status").first).to_contain_text("Paused target edge-01")
    expect(page.locator("#paused-notice")).to_contain_text("Paused: disk swap")
    expect(page.locator("h1")).to_contain_text("paused")
    page.goto(server.at("/targets"))
    expect(page.locator('tr[data-target="edge-01"]')).to_contain_text("paused")
    assert show_target(server.app, ADMIN, "edge-01")[0].paused

    page.goto(server.at("/targets/edge-01"))
    page.get_by_role("button", name="Resume edge-01").click()

    expect(page.get_by_role("status")).to_contain_text("Resumed target edge-01")
    expect(page.locator("#paused-notice")).to_have_count(0)
    the_target, assignments = show_target(server.app, ADMIN, "edge-01")
    assert not the_target.paused
    assert {a.job.name: a.enabled for a in assignments}["edge-status"] is False
