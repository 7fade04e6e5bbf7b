"""The host trust page in real Chromium: an operator pastes ssh-keyscan lines, sees what a
dry run would do (nothing changed), imports them for real and sees the target pinned and
a conflict reported for the target whose different key stays pinned; a viewer sees the
list but no form. The server is shared: the targets and addresses are this test's own."""

from __future__ import annotations

import uuid

import asyncssh
from live_web import ADMIN, LiveServer, OpenPage, problems_of
from playwright.sync_api import expect

from fleetcron.core.targets import TargetSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.trust import trust_states


def _public() -> str:
    return str(asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip())


def test_an_operator_imports_keys_after_a_dry_run_and_sees_the_conflict(
    open_page: OpenPage, server: LiveServer
) -> None:
    tag = uuid.uuid4().hex[:6]
    net = f"10.{int(tag[:2], 16)}.{int(tag[2:4], 16)}"
    fresh, pinned = f"trust-new-{tag}", f"trust-old-{tag}"
    key = asyncssh.generate_private_key("ssh-ed25519").export_private_key()
    for name, last, host_key in ((fresh, 1, None), (pinned, 2, _public())):
        spec = TargetSpec(
            name, host=f"{net}.{last}", user="root", private_key=key, host_key=host_key
        )
        targets.add_target(server.app, ADMIN, spec, verify=False)
    page = open_page("olivia")
    page.goto(server.at("/targets/trust"))
    page.get_by_label("known_hosts or ssh-keyscan output").fill(
        f"{net}.1 {_public()}\n{net}.2 {_public()}\n"
    )
    page.get_by_role("button", name="Import").click()

    report = page.locator("#import-report")
    expect(report).to_contain_text("nothing was changed")
    expect(report.locator("tr", has_text=pinned)).to_contain_text("conflict")
    states = {s.name: s.state for s in trust_states(server.app, ADMIN)}
    assert states[fresh] == "not yet trusted"

    page.get_by_label("Dry run").uncheck()
    page.get_by_role("button", name="Import").click()

    expect(page.locator("#import-report")).to_contain_text("Import done")
    row = page.locator("table.trust tbody tr", has_text=fresh)
    expect(row).to_contain_text("pinned")
    states = {s.name: s.state for s in trust_states(server.app, ADMIN)}
    assert (states[fresh], states[pinned]) == ("pinned", "pinned")
    assert problems_of(page) == []


def test_a_viewer_sees_the_trust_list_but_no_import_form(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("victor")
    page.goto(server.at("/targets/trust"))
    expect(page.get_by_role("heading", name="Host trust")).to_be_visible()
    expect(page.locator("#trust-import")).to_have_count(0)
    operator = open_page("olivia")  # control: the operator's page has it
    operator.goto(server.at("/targets/trust"))
    expect(operator.locator("#trust-import")).to_have_count(1)
