"""The host trust page (/targets/trust) through the real app: each target's trust (pinned,
CA-trusted and from where, not yet trusted), the host CAs by label, and the import form
(operator's ``target.pair``, the CSRF token, audited; a dry run changes nothing; a
conflict is reported and keeps the pinned key)."""

from __future__ import annotations

import html
from collections.abc import Iterator

import asyncssh
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetSpec
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.trust import trust_states
from fleetcron.services.targets.trust_rules import add_trust_rule, trust_rules
from fleetcron.store.schema import AuditEvent
from integration.web.conftest import csrf_token_of, log_in, new_client, sqlite_only

OPERATOR = Actor("olivia", "operator")


def _public(key: asyncssh.SSHKey) -> str:
    return str(key.export_public_key().decode().strip())


KEY_A, KEY_B, KEY_C, CA = (_public(asyncssh.generate_private_key("ssh-ed25519")) for _ in range(4))
PRIVATE_KEY = asyncssh.generate_private_key("ssh-ed25519").export_private_key()


@pytest.fixture
def fleet(app: App) -> None:
    """a1 (no key), a2 (KEY_B pinned), p1 (site=paris: a label's CA), own (its own CA)."""

    def add(
        name: str,
        host: str,
        *,
        host_key: str | None = None,
        host_ca: str | None = None,
        labels: tuple[str, ...] = (),
    ) -> None:
        spec = TargetSpec(
            name,
            host=host,
            user="root",
            private_key=PRIVATE_KEY,
            host_key=host_key,
            host_ca=host_ca,
            labels=list(labels),
        )
        targets.add_target(app, OPERATOR, spec, verify=False)

    add("a1", "10.0.0.1")
    add("a2", "10.0.0.2", host_key=KEY_B)
    add("p1", "10.0.0.3", labels=("site=paris",))
    add("own", "10.0.0.4", host_ca=CA)
    add_trust_rule(app, OPERATOR, "site=paris", CA)


@pytest.fixture
def viewer_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "viewer")
        yield client


def rows(page: str) -> str:
    return html.unescape(page)


def test_the_page_shows_each_targets_trust_and_where_a_ca_comes_from(
    fleet: None, viewer_browser: TestClient
) -> None:
    page = viewer_browser.get("/targets/trust")

    assert page.status_code == 200, page.text
    shown = rows(page.text)
    assert "1 pinned · 2 CA-trusted · 1 not yet trusted" in shown
    assert "from label site=paris" in shown and "from the target" in shown
    assert "<code>site=paris</code>" in shown  # the label rule's row
    assert 'id="trust-import"' not in shown  # a viewer has no import form
    assert 'id="trust-ca-form"' not in shown and "Remove the host CA" not in shown
    target_page = rows(viewer_browser.get("/targets/p1").text)
    assert "by a host CA, from label site=paris" in target_page
    assert "by a host CA, from the target" in rows(viewer_browser.get("/targets/own").text)


def test_an_import_dry_run_then_for_real_pins_and_reports_the_conflict(
    app: App, fleet: None, browser: TestClient
) -> None:
    pasted = f"10.0.0.1 {KEY_A}\n10.0.0.2 {KEY_C}\n"
    dry = browser.post(
        "/targets/trust",
        data={"known_hosts": pasted, "dry_run": "1", "csrf_token": csrf_token_of(browser)},
    )
    assert dry.status_code == 200, dry.text
    assert "What the import would do (nothing was changed)" in dry.text
    assert "conflict: 1" in dry.text and "pinned: 1" in dry.text
    assert html.escape(pasted, quote=False).strip() in dry.text  # kept for the real run
    assert {s.name: s.state for s in trust_states(app, OPERATOR)}["a1"] == "not yet trusted"

    done = browser.post(
        "/targets/trust", data={"known_hosts": pasted, "csrf_token": csrf_token_of(browser)}
    )

    assert done.status_code == 200, done.text
    assert "Import done" in done.text and 'badge-warn">conflict' in done.text
    states = {s.name: (s.state, s.fingerprint) for s in trust_states(app, OPERATOR)}
    assert states["a1"][0] == "pinned"
    assert states["a2"] == ("pinned", fingerprint(KEY_B))  # the conflict kept its key
    with app.db.read() as session:
        actions = [
            (e.action, e.actor, e.target_name)
            for e in session.scalars(
                select(AuditEvent)
                .where(AuditEvent.action.in_(("target.trust_import", "target.pin_imported")))
                .order_by(AuditEvent.id)
            )
        ]
    assert actions == [
        ("target.trust_import", "olivia", None),  # the dry run
        ("target.pin_imported", "olivia", "a1"),
        ("target.trust_import", "olivia", None),
    ]


@sqlite_only
def test_the_import_needs_the_csrf_token_and_the_operator_role(
    app: App, fleet: None, browser: TestClient, viewer_browser: TestClient
) -> None:
    data = {"known_hosts": f"10.0.0.1 {KEY_A}\n"}
    without = browser.post("/targets/trust", data=data)
    as_viewer = viewer_browser.post(
        "/targets/trust", data={**data, "csrf_token": csrf_token_of(viewer_browser)}
    )
    assert (without.status_code, as_viewer.status_code) == (403, 403)
    assert {s.name: s.state for s in trust_states(app, OPERATOR)}["a1"] == "not yet trusted"
    # Control: the operator's form with its token pins it.
    with_token = browser.post("/targets/trust", data={**data, "csrf_token": csrf_token_of(browser)})
    assert with_token.status_code == 200, with_token.text
    assert {s.name: s.state for s in trust_states(app, OPERATOR)}["a1"] == "pinned"


@sqlite_only
def test_an_empty_import_is_refused_naming_the_field(fleet: None, browser: TestClient) -> None:
    refused = browser.post(
        "/targets/trust", data={"known_hosts": " ", "csrf_token": csrf_token_of(browser)}
    )
    assert refused.status_code == 422
    assert "known_hosts: nothing to import" in refused.text


def test_the_edit_form_leaves_a_labels_ca_alone(app: App, fleet: None, browser: TestClient) -> None:
    """The form shows only the target's own CA; saving it with the field empty keeps the
    label's CA (the control: a CA typed in becomes the target's own, which wins)."""
    form = browser.get("/targets/p1/edit")
    assert form.status_code == 200
    assert CA not in form.text and 'id="host_ca-label"' in form.text
    fields = {
        "kind": "ssh",
        "host": "10.0.0.3",
        "port": "22",
        "user": "root",
        "labels": "site=paris",
        "notes": "edited",
        "host_ca": "",
        "no_verify": "1",
    }
    saved = browser.post("/targets/p1/edit", data={**fields, "csrf_token": csrf_token_of(browser)})
    assert saved.status_code == 303, saved.text
    states = {s.name: (s.state, s.ca_from) for s in trust_states(app, OPERATOR)}
    assert states["p1"] == ("CA-trusted", "label site=paris")
    with app.db.read() as session:
        edit = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "target.edit").order_by(AuditEvent.id)
        ).all()[-1]
    assert edit.detail["changed"] == ["notes"]  # not the CA: nothing to check or unpair

    own = browser.post(
        "/targets/p1/edit",
        data={**fields, "host_ca": KEY_C, "csrf_token": csrf_token_of(browser)},
    )
    assert own.status_code == 303, own.text
    states = {s.name: (s.state, s.ca_from) for s in trust_states(app, OPERATOR)}
    assert states["p1"] == ("CA-trusted", "target")


def test_an_operator_attaches_and_removes_a_labels_ca_through_the_page(
    app: App, fleet: None, browser: TestClient
) -> None:
    refused = browser.post(
        "/targets/trust/cas",
        data={"label": "site=lyon", "ca": "not a key", "csrf_token": csrf_token_of(browser)},
    )
    assert refused.status_code == 422
    assert "ca: " in html.unescape(refused.text) and 'id="ca-key"' in refused.text
    assert "not a key" in refused.text  # what was typed is kept
    assert len(trust_rules(app, OPERATOR)) == 1  # nothing saved: site=paris only

    added = browser.post(
        "/targets/trust/cas",
        data={"label": "site=paris,rack=r1", "ca": KEY_A, "csrf_token": csrf_token_of(browser)},
        follow_redirects=True,
    )
    assert added.status_code == 200
    assert "Host CA attached to rack=r1,site=paris" in html.unescape(added.text)
    removed = browser.post(
        "/targets/trust/cas/remove",
        data={"label": "site=paris", "csrf_token": csrf_token_of(browser)},
        follow_redirects=True,
    )
    assert "Host CA of site=paris removed: 1 target(s)" in html.unescape(removed.text)
    assert [r.selector for r in trust_rules(app, OPERATOR)] == ["rack=r1,site=paris"]
    assert {s.name: s.state for s in trust_states(app, OPERATOR)}["p1"] == "not yet trusted"
    without = browser.post("/targets/trust/cas/remove", data={"label": "rack=r1,site=paris"})
    assert without.status_code == 403  # the CSRF token is needed
