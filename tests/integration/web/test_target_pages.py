"""The target pages over real HTTP (SQLite and PostgreSQL): edit, pause and resume, re-pin
against real sshd servers, removal with individual jobs, and every target error worded for
the page (what to click or tick), never as command-line advice."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fixtures.sshd import SshServer
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.schema import Target
from integration.web.conftest import csrf_token_of, log_in, new_client, sqlite_only

ADMIN = Actor("admin", "admin")
#: Command-line advice has no place on a page.
CLI_WORDS = ("--host-key", "--trust-on-first-use", "fleetcron target", "--with-jobs", "--allow")


@pytest.fixture
def operator_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "operator")
        yield client


def post(client: TestClient, url: str, **fields: str) -> httpx.Response:
    response: httpx.Response = client.post(
        url, data={"csrf_token": csrf_token_of(client), **fields}
    )
    return response


def flash_after(client: TestClient, response: httpx.Response) -> str:
    """The page a redirect leads to, with its one-time message, unescaped."""
    assert response.status_code == 303, response.text
    followed = client.get(response.headers["location"])
    assert followed.status_code == 200, followed.text
    return html.unescape(followed.text)


def assert_page_wording(text: str) -> None:
    for words in CLI_WORDS:
        assert words not in text, f"command-line advice {words!r} on a page"


def add_ssh(
    app: App,
    name: str,
    server: SshServer,
    *,
    host_key: str | None = None,
    timezone: str | None = None,
    verify: bool = True,
    trust_on_first_use: bool = False,
    allow_same_host: bool = False,
) -> None:
    targets.add_target(
        app,
        ADMIN,
        TargetSpec(
            name,
            host=server.host,
            port=server.port,
            user=server.user,
            private_key=server.client_private_key.encode(),
            host_key=host_key,
            timezone=timezone,
        ),
        verify=verify,
        trust_on_first_use=trust_on_first_use,
        allow_same_host=allow_same_host,
    )


def test_the_edit_page_saves_labels_and_notes_and_the_target_page_shows_them(
    app: App, operator_browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL, labels=["env=prod"]))

    form = operator_browser.get("/targets/box/edit")
    saved = post(
        operator_browser,
        "/targets/box/edit",
        kind="local",
        labels="env=dev, role=db",
        notes="rack 4",
    )

    assert form.status_code == 200 and 'value="env=prod"' in form.text
    shown = flash_after(operator_browser, saved)
    assert "Saved target box: labels, notes changed." in shown
    assert "role=db" in shown and "rack 4" in shown


@sqlite_only
def test_a_bad_port_comes_back_under_its_field_with_what_was_typed(
    app: App, operator_browser: TestClient, sshd: SshServer
) -> None:
    add_ssh(app, "pbx1", sshd, host_key=sshd.host_key_line, verify=False)

    response = post(
        operator_browser,
        "/targets/pbx1/edit",
        kind="ssh",
        host="pbx1.example.net",
        port="70000",
        user="root",
        labels="",
        notes="typed",
    )

    assert response.status_code == 422
    assert 'id="port-error"' in response.text and "70000" in response.text
    assert 'value="pbx1.example.net"' in response.text
    assert target_reads.show_target(app, ADMIN, "pbx1")[0].port == sshd.port


@pytest.mark.sshd
def test_a_changed_host_key_at_pairing_points_to_the_re_pin_button_in_page_words(
    app: App, operator_browser: TestClient, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, "pbx4", sshd, host_key=sshd.host_key_line, verify=False)
    with app.db.session() as session:  # the server was reinstalled: another host key
        row = session.scalars(select(Target).where(Target.name == "pbx4")).one()
        row.port = sshd_other_host_key.port

    shown = flash_after(operator_browser, post(operator_browser, "/targets/pbx4/pair"))

    assert "Not paired: host key mismatch" in shown
    assert "Use “Re-pin host key” on the page of pbx4" in shown
    assert_page_wording(shown)


@pytest.mark.sshd
def test_re_pinning_on_the_page_shows_both_fingerprints_then_pins_the_shown_key(
    app: App, operator_browser: TestClient, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, "pbx4", sshd, host_key=sshd.host_key_line, verify=False)
    with app.db.session() as session:
        row = session.scalars(select(Target).where(Target.name == "pbx4")).one()
        row.port = sshd_other_host_key.port

    check = post(operator_browser, "/targets/pbx4/repin/check", trust_on_first_use="1")
    assert check.status_code == 200, check.text
    assert sshd.host_key_fingerprint in check.text
    assert sshd_other_host_key.host_key_fingerprint in check.text
    assert target_reads.show_target(app, ADMIN, "pbx4")[0].host_key == sshd.host_key_line

    pinned = post(
        operator_browser,
        "/targets/pbx4/repin",
        new_key=sshd_other_host_key.host_key_line,
        old_fingerprint=sshd.host_key_fingerprint,
        trust_on_first_use="1",
    )

    assert f"Pinned host key {sshd_other_host_key.host_key_fingerprint}" in flash_after(
        operator_browser, pinned
    )
    repinned = target_reads.show_target(app, ADMIN, "pbx4")[0]
    assert repinned.host_key == sshd_other_host_key.host_key_line


@sqlite_only
def test_a_missing_host_key_is_worded_for_the_form(
    operator_browser: TestClient, sshd: SshServer
) -> None:
    response = post(
        operator_browser,
        "/targets/new",
        name="pbx1",
        kind="ssh",
        host=sshd.host,
        port=str(sshd.port),
        user=sshd.user,
        private_key=sshd.client_private_key,
        labels="",
        notes="",
    )

    assert response.status_code == 422
    text = html.unescape(response.text)
    assert "Paste the server's host key" in text
    assert "tick “trust the key the server offers now”" in text
    assert_page_wording(text)


@sqlite_only
def test_a_second_target_on_the_same_server_is_refused_with_the_checkbox_named(
    app: App, operator_browser: TestClient, sshd: SshServer
) -> None:
    add_ssh(app, "pbx1", sshd, host_key=sshd.host_key_line, verify=False)
    fields = {
        "name": "pbx5",
        "kind": "ssh",
        "host": sshd.host,
        "port": str(sshd.port),
        "user": sshd.user,
        "private_key": sshd.client_private_key,
        "host_key": sshd.host_key_line,
        "labels": "",
        "notes": "",
    }

    refused = post(operator_browser, "/targets/new", **fields)
    accepted = post(operator_browser, "/targets/new", **fields, allow_same_host="1")

    assert refused.status_code == 422
    text = html.unescape(refused.text)
    assert "target pbx1 already uses" in text
    assert "Tick “Same server as another target, on purpose”" in text
    assert_page_wording(text)
    assert accepted.status_code == 303, accepted.text


def test_pause_and_resume_from_the_target_page_keep_the_job_flags(
    app: App, operator_browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "reload", JobSpec("* * * * *", "echo reload"), bulk=True)
    jobs.add_job(app, ADMIN, "status", JobSpec("* * * * *", "echo status"), bulk=True)
    jobs.set_enabled(app, ADMIN, "status", False, target="box")

    paused = flash_after(
        operator_browser, post(operator_browser, "/targets/box/pause", reason="new disk")
    )
    resumed = flash_after(operator_browser, post(operator_browser, "/targets/box/resume"))

    assert "Paused: new disk" in paused and "Resume box" in paused
    assert "Resumed target box" in resumed and "Pause for maintenance" in resumed
    _, assignments = target_reads.show_target(app, ADMIN, "box")
    assert {a.job.name: a.enabled for a in assignments} == {"reload": True, "status": False}


def test_removing_a_target_with_individual_jobs_asks_for_the_checkbox(
    app: App, operator_browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("pbx4", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "backup", JobSpec("0 3 * * *", "backup"), target="pbx4")

    confirm = operator_browser.get("/targets/pbx4/delete")
    refused = flash_after(operator_browser, post(operator_browser, "/targets/pbx4/delete"))
    removed = flash_after(
        operator_browser, post(operator_browser, "/targets/pbx4/delete", with_jobs="1")
    )

    assert confirm.status_code == 200
    assert 'name="with_jobs"' in confirm.text and ">backup</a>" in confirm.text
    assert "Tick “Also remove its individual jobs”" in refused
    assert_page_wording(refused)
    assert "Removed target pbx4 with 1 individual job." in removed
    assert jobs.list_jobs(app, ADMIN) == []


def test_an_operator_is_not_offered_a_local_target_and_posting_one_is_403(
    app: App, operator_browser: TestClient
) -> None:
    form = operator_browser.get("/targets/new")
    response = post(operator_browser, "/targets/new", name="here", kind="local", labels="")

    assert form.status_code == 200
    assert 'value="local"' not in form.text
    assert "Only an admin may add a local target" in form.text
    assert response.status_code == 403
    assert target_reads.list_targets(app, ADMIN) == []


@sqlite_only
def test_with_local_targets_disabled_the_form_says_so_and_the_page_warns(
    database_url: str, tmp_path: Path, clock: FakeClock, app: App
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("here", TargetKind.LOCAL))
    locked = App.open(
        make_settings(tmp_path / "locked", database_url, allow_local_targets=False), clock=clock
    )
    try:
        with new_client(locked) as client:
            log_in(client, "admin")
            form = client.get("/targets/new")
            shown = client.get("/targets/here")
    finally:
        locked.close()

    assert 'value="local"' not in form.text
    assert "Local targets (this machine) are disabled on this server." in form.text
    assert "Local targets are disabled on this server" in html.unescape(shown.text)


@sqlite_only
@pytest.mark.sshd
def test_the_form_adds_a_target_behind_a_jump_host_and_the_pages_show_the_path(
    app: App, operator_browser: TestClient, sshd: SshServer, bastion: SshServer
) -> None:
    targets.add_target(
        app, ADMIN, bastion.spec("b1", kind=TargetKind.JUMP), trust_on_first_use=True
    )
    form = operator_browser.get("/targets/new")
    saved = post(
        operator_browser,
        "/targets/new",
        name="t42",
        kind="ssh",
        host=sshd.host,
        port=str(sshd.port),
        user=sshd.user,
        private_key=sshd.client_private_key,
        trust_on_first_use="1",
        via="b1",
        labels="",
        notes="",
    )

    assert 'name="via"' in form.text and 'value="jump"' in form.text
    shown = flash_after(operator_browser, saved)
    assert 'via <a href="/targets/b1">b1</a>' in shown
    assert "via b1" in operator_browser.get("/targets").text
    assert target_reads.show_target(app, ADMIN, "t42")[0].via == "b1"


@sqlite_only
@pytest.mark.sshd
def test_a_via_that_does_not_exist_comes_back_under_its_field(
    app: App, operator_browser: TestClient, sshd: SshServer
) -> None:
    response = post(
        operator_browser,
        "/targets/new",
        name="t42",
        kind="ssh",
        host=sshd.host,
        port=str(sshd.port),
        user=sshd.user,
        private_key=sshd.client_private_key,
        via="nowhere",
        labels="",
        notes="",
    )

    assert response.status_code == 422
    assert 'id="via-error"' in response.text and "no target named nowhere" in response.text
    assert 'value="nowhere"' in response.text
