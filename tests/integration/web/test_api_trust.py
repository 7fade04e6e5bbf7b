"""/api/v1/targets/trust (how each host is trusted) and /api/v1/targets/trust/import (pin
many host keys from a known_hosts text), as ``fleetcron target trust list|import`` do:
the same service, permissions (``target.read``, ``target.pair``) and audit."""

from __future__ import annotations

import asyncssh
from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import App
from fleetcron.store.schema import AuditEvent
from integration.web.conftest import API, error_of, sqlite_only

Headers = dict[str, str]


def _public(key: asyncssh.SSHKey) -> str:
    return key.export_public_key().decode().strip()


#: Two hosts' keys (ssh-keyscan style): one for a target, one for none.
KEY_A = _public(asyncssh.generate_private_key("ssh-ed25519"))
KEY_B = _public(asyncssh.generate_private_key("ssh-ed25519"))
#: The targets' client key (never used: they are added without a check).
PRIVATE_KEY = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()


def add_unpinned(client: TestClient, headers: Headers, name: str, host: str) -> None:
    body = {
        "name": name,
        "kind": "ssh",
        "host": host,
        "port": 22,
        "user": "root",
        "private_key": PRIVATE_KEY,
        "verify": False,
    }
    response = client.post(f"{API}/targets", json=body, headers=headers)
    assert response.status_code == 201, response.text


def states(client: TestClient, headers: Headers) -> dict[str, str]:
    response = client.get(f"{API}/targets/trust", headers=headers)
    assert response.status_code == 200, response.text
    return {s["name"]: s["state"] for s in response.json()}


def test_an_import_pins_the_file_keys_for_the_targets_without_one_and_is_audited(
    app: App, client: TestClient, as_operator: Headers, as_viewer: Headers
) -> None:
    add_unpinned(client, as_operator, "a1", "10.0.0.1")
    add_unpinned(client, as_operator, "a2", "10.0.0.2")
    text = f"10.0.0.1 {KEY_A}\n10.0.0.9 {KEY_B}\nnot a key line\n"
    assert states(client, as_viewer) == {"a1": "not yet trusted", "a2": "not yet trusted"}

    dry = client.post(
        f"{API}/targets/trust/import", json={"text": text, "dry_run": True}, headers=as_operator
    )
    assert dry.status_code == 200, dry.text
    assert dry.json()["counts"]["pinned"] == 1
    assert states(client, as_viewer)["a1"] == "not yet trusted"  # a dry run changes nothing

    done = client.post(f"{API}/targets/trust/import", json={"text": text}, headers=as_operator)
    assert done.status_code == 200, done.text
    body = done.json()
    assert (body["dry_run"], body["entries"], body["bad_lines"]) == (False, 2, [3])
    assert {o["name"]: o["outcome"] for o in body["outcomes"]} == {
        "a1": "pinned",
        "a2": "not in file",
    }
    assert states(client, as_viewer) == {"a1": "pinned", "a2": "not yet trusted"}
    with app.db.read() as session:
        actions = [
            (e.action, e.actor, e.target_name)
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.action.like("target.%")).order_by(AuditEvent.id)
            )
            if e.action in ("target.trust_import", "target.pin_imported")
        ]
    assert actions == [
        ("target.trust_import", "olivia", None),
        ("target.pin_imported", "olivia", "a1"),
        ("target.trust_import", "olivia", None),
    ]


@sqlite_only
def test_a_viewer_may_list_but_not_import(
    client: TestClient, as_operator: Headers, as_viewer: Headers
) -> None:
    add_unpinned(client, as_operator, "a1", "10.0.0.1")
    refused = client.post(
        f"{API}/targets/trust/import", json={"text": f"10.0.0.1 {KEY_A}\n"}, headers=as_viewer
    )
    assert refused.status_code == 403, refused.text
    assert states(client, as_viewer) == {"a1": "not yet trusted"}
    # Control: the same request by an operator pins it.
    allowed = client.post(
        f"{API}/targets/trust/import", json={"text": f"10.0.0.1 {KEY_A}\n"}, headers=as_operator
    )
    assert allowed.status_code == 200, allowed.text
    assert states(client, as_viewer) == {"a1": "pinned"}


@sqlite_only
def test_bad_input_is_a_4xx_naming_the_field(client: TestClient, as_operator: Headers) -> None:
    missing = client.post(f"{API}/targets/trust/import", json={}, headers=as_operator)
    empty = client.post(f"{API}/targets/trust/import", json={"text": ""}, headers=as_operator)
    typo = client.post(
        f"{API}/targets/trust/import", json={"text": "x", "dryrun": True}, headers=as_operator
    )
    for response in (missing, empty):
        assert response.status_code == 422, response.text
        assert error_of(response)["field"] == "text"
    assert typo.status_code == 422 and error_of(typo)["field"] == "dryrun"


@sqlite_only
def test_a_target_may_not_be_named_trust(client: TestClient, as_operator: Headers) -> None:
    body = {"name": "trust", "kind": "ssh", "host": "10.0.0.1", "user": "root", "verify": False}
    refused = client.post(
        f"{API}/targets", json={**body, "private_key": PRIVATE_KEY}, headers=as_operator
    )
    assert refused.status_code == 422, refused.text
    assert error_of(refused)["field"] == "name"
    # Control: another name is taken.
    add_unpinned(client, as_operator, "trusty", "10.0.0.1")


def add_labelled(client: TestClient, headers: Headers, name: str, site: str, host: str) -> None:
    body = {
        "name": name,
        "kind": "ssh",
        "host": host,
        "port": 22,
        "user": "root",
        "private_key": PRIVATE_KEY,
        "labels": {"site": site},
        "verify": False,
    }
    response = client.post(f"{API}/targets", json=body, headers=headers)
    assert response.status_code == 201, response.text


def test_a_host_ca_attached_to_a_label_trusts_its_targets_and_the_list_says_from_where(
    app: App, client: TestClient, as_operator: Headers, as_viewer: Headers
) -> None:
    add_labelled(client, as_operator, "p1", "paris", "10.0.1.1")
    add_labelled(client, as_operator, "l1", "lyon", "10.0.1.2")

    added = client.post(
        f"{API}/targets/trust/cas", json={"label": "site=paris", "ca": KEY_A}, headers=as_operator
    )

    assert added.status_code == 201, added.text
    assert (added.json()["label"], added.json()["targets"]) == ("site=paris", ["p1"])
    listed = client.get(f"{API}/targets/trust", headers=as_viewer).json()
    assert {s["name"]: (s["state"], s["ca_from"]) for s in listed} == {
        "l1": ("not yet trusted", None),
        "p1": ("CA-trusted", "label site=paris"),
    }
    cas = client.get(f"{API}/targets/trust/cas", headers=as_viewer).json()
    assert [(c["label"], c["targets"]) for c in cas] == [("site=paris", ["p1"])]
    shown = client.get(f"{API}/targets/p1", headers=as_viewer).json()
    assert shown["host_ca"] == KEY_A

    removed = client.delete(
        f"{API}/targets/trust/cas", params={"label": "site=paris"}, headers=as_operator
    )
    assert removed.status_code == 200 and removed.json() == ["p1"]
    assert states(client, as_viewer)["p1"] == "not yet trusted"
    with app.db.read() as session:
        actions = [
            e.action
            for e in session.scalars(
                select(AuditEvent).where(AuditEvent.action.like("target.trust_ca%"))
            )
        ]
    assert actions == ["target.trust_ca_add", "target.trust_ca_remove"]


@sqlite_only
def test_a_bad_ca_or_label_is_a_422_naming_the_field_and_a_viewer_is_refused(
    client: TestClient, as_operator: Headers, as_viewer: Headers
) -> None:
    url = f"{API}/targets/trust/cas"
    bad_ca = client.post(url, json={"label": "site=paris", "ca": "nope"}, headers=as_operator)
    bad_label = client.post(url, json={"label": "paris", "ca": KEY_A}, headers=as_operator)
    viewer = client.post(url, json={"label": "site=paris", "ca": KEY_A}, headers=as_viewer)
    assert bad_ca.status_code == 422 and error_of(bad_ca)["field"] == "ca"
    assert bad_label.status_code == 422 and error_of(bad_label)["field"] == "label"
    assert "paris" in str(error_of(bad_label)["message"])
    assert viewer.status_code == 403
    assert client.get(url, headers=as_viewer).json() == []  # nothing saved
