"""/api/v1/targets on SQLite and PostgreSQL: add, pair against a real sshd, label, unpair,
delete, and the errors of each."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fixtures.app import FakeClock, make_settings
from fixtures.sshd import SshServer
from fleetcron.app import Actor, App
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from integration.web.conftest import API, bearer, error_of, new_client, sqlite_only, token_for

Headers = dict[str, str]


def ssh_body(name: str, server: SshServer, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "kind": "ssh",
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "private_key": server.client_private_key,
        **extra,
    }


def test_adding_a_local_target_answers_201_with_the_target_paired(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    response = client.post(
        f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin
    )

    assert response.status_code == 201, response.text
    target = response.json()["target"]
    assert (target["name"], target["kind"], target["paired"]) == ("box", "local", True)


@sqlite_only
def test_an_added_target_is_listed_and_shown(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)

    listed = client.get(f"{API}/targets", headers=as_operator).json()
    shown = client.get(f"{API}/targets/box", headers=as_operator).json()

    assert [t["name"] for t in listed] == ["box"]
    assert shown["kind"] == "local"


@pytest.mark.sshd
def test_an_ssh_target_added_without_verify_stays_unpaired_and_has_no_host_key(
    client: TestClient, as_operator: Headers, sshd: SshServer
) -> None:
    response = client.post(
        f"{API}/targets", json=ssh_body("pbx1", sshd, verify=False), headers=as_operator
    )

    assert response.status_code == 201, response.text
    target = response.json()["target"]
    assert target["paired"] is False
    assert target["host_key"] is None
    assert (target["host"], target["port"], target["user"]) == (sshd.host, sshd.port, sshd.user)


@pytest.mark.sshd
def test_pairing_with_trust_on_first_use_pins_the_host_key_the_server_offers(
    client: TestClient, as_operator: Headers, sshd: SshServer
) -> None:
    client.post(f"{API}/targets", json=ssh_body("pbx1", sshd, verify=False), headers=as_operator)

    response = client.post(
        f"{API}/targets/pbx1/pair", json={"trust_on_first_use": True}, headers=as_operator
    )

    assert response.status_code == 200, response.text
    paired = response.json()
    assert paired["trusted_on_first_use"] is True
    assert paired["host_key_fingerprint"] == sshd.host_key_fingerprint
    assert paired["target"]["paired"] is True
    assert paired["target"]["host_key"] == sshd.host_key_line
    shown = client.get(f"{API}/targets/pbx1", headers=as_operator).json()
    assert shown["host_key_fingerprint"] == sshd.host_key_fingerprint


@sqlite_only
@pytest.mark.sshd
def test_no_answer_about_a_target_includes_its_private_key(
    client: TestClient, as_operator: Headers, sshd: SshServer
) -> None:
    added = client.post(
        f"{API}/targets", json=ssh_body("pbx1", sshd, verify=False), headers=as_operator
    )
    listed = client.get(f"{API}/targets", headers=as_operator)
    shown = client.get(f"{API}/targets/pbx1", headers=as_operator)

    # The body of the key (not its BEGIN/END armour) is what must never leave the server.
    key_material = sshd.client_private_key.splitlines()[1]
    for response in (added, listed, shown):
        assert response.status_code in (200, 201)
        assert key_material not in response.text
        assert "private_key" not in response.text


def test_labels_are_set_and_an_empty_value_removes_one(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local", "labels": {"env": "prod", "role": "pbx"}},
        headers=as_admin,
    )

    response = client.post(
        f"{API}/targets/box/labels",
        json={"labels": {"role": "", "site": "fra"}},
        headers=as_operator,
    )

    assert response.status_code == 200, response.text
    assert response.json()["labels"] == {"env": "prod", "site": "fra"}


def test_a_new_label_extends_a_matching_bulk_job_to_the_target(
    client: TestClient, as_operator: Headers, as_admin: Headers, app: App, operator: Actor
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)
    spec = JobSpec("0 3 * * *", "true")
    jobs.add_job(app, operator, "backup", spec, bulk=True, selector="env=prod")
    assert client.get(f"{API}/jobs/backup", headers=as_operator).json()["total"] == 0

    client.post(f"{API}/targets/box/labels", json={"labels": {"env": "prod"}}, headers=as_operator)

    assert client.get(f"{API}/jobs/backup", headers=as_operator).json()["total"] == 1


def test_adding_a_target_reports_the_bulk_jobs_it_joined(
    client: TestClient, as_operator: Headers, as_admin: Headers, app: App, operator: Actor
) -> None:
    jobs.add_job(app, operator, "backup", JobSpec("0 3 * * *", "true"), bulk=True)

    response = client.post(
        f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin
    )

    assert response.json()["extended_jobs"] == ["backup"]


def test_unpairing_removes_the_targets_assignments_and_keeps_the_target(
    client: TestClient, as_operator: Headers, as_admin: Headers, app: App, operator: Actor
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)
    jobs.add_job(app, operator, "backup", JobSpec("0 3 * * *", "true"), bulk=True)

    response = client.post(f"{API}/targets/box/unpair", headers=as_operator)

    assert response.status_code == 200, response.text
    assert response.json()["paired"] is False
    assert response.json()["unpaired_at"] is not None
    assert client.get(f"{API}/jobs/backup", headers=as_operator).json()["total"] == 0


def test_deleting_a_target_answers_204_and_then_404(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)

    deleted = client.delete(f"{API}/targets/box", headers=as_operator)
    shown = client.get(f"{API}/targets/box", headers=as_operator)

    assert deleted.status_code == 204
    assert deleted.content == b""
    assert shown.status_code == 404
    assert error_of(shown)["code"] == "not_found"


def test_a_target_with_individual_jobs_cannot_be_deleted(
    client: TestClient, as_operator: Headers, as_admin: Headers, app: App, operator: Actor
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)
    jobs.add_job(app, operator, "hello", JobSpec("* * * * *", "true"), target="box")

    response = client.delete(f"{API}/targets/box", headers=as_operator)

    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["field"]) == ("conflict", "with_jobs")
    assert client.get(f"{API}/targets/box", headers=as_operator).status_code == 200


def test_a_duplicate_target_name_is_a_conflict_naming_the_field(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)

    response = client.post(
        f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin
    )

    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["field"]) == ("conflict", "name")


@sqlite_only
def test_an_invalid_label_is_refused_naming_the_labels_field(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    response = client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local", "labels": {"env": "two words"}},
        headers=as_admin,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "labels"


@sqlite_only
def test_an_invalid_target_name_is_refused_naming_the_field(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    response = client.post(
        f"{API}/targets", json={"name": "Bad Name", "kind": "local"}, headers=as_admin
    )

    assert response.status_code == 422
    error = error_of(response)
    assert (error["code"], error["field"]) == ("invalid", "name")


@sqlite_only
def test_an_ssh_target_without_a_host_is_refused_naming_the_host_field(
    client: TestClient, as_operator: Headers
) -> None:
    response = client.post(
        f"{API}/targets",
        json={"name": "pbx1", "kind": "ssh", "user": "root", "private_key": "x"},
        headers=as_operator,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "host"


@sqlite_only
def test_a_local_target_with_a_host_is_refused(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    response = client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local", "host": "db1.example.net"},
        headers=as_admin,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "kind"


@sqlite_only
def test_an_unusable_private_key_is_refused_naming_the_private_key_field(
    client: TestClient, as_operator: Headers
) -> None:
    response = client.post(
        f"{API}/targets",
        json={
            "name": "pbx1",
            "host": "127.0.0.1",
            "user": "root",
            "private_key": "not a key",
            "verify": False,
        },
        headers=as_operator,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "private_key"


@sqlite_only
def test_pairing_a_local_target_that_does_not_exist_is_404(
    client: TestClient, as_operator: Headers
) -> None:
    response = client.post(f"{API}/targets/nowhere/pair", json={}, headers=as_operator)

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


@sqlite_only
@pytest.mark.sshd
def test_pairing_without_a_host_key_or_trust_on_first_use_is_refused_naming_host_key(
    client: TestClient, as_operator: Headers, sshd: SshServer
) -> None:
    client.post(f"{API}/targets", json=ssh_body("pbx1", sshd, verify=False), headers=as_operator)

    response = client.post(f"{API}/targets/pbx1/pair", json={}, headers=as_operator)

    assert response.status_code == 422
    assert error_of(response)["field"] == "host_key"


@pytest.mark.sshd
def test_a_failed_pairing_leaves_the_target_unpaired(
    client: TestClient, as_operator: Headers, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    body = ssh_body("pbx1", sshd, host_key=sshd_other_host_key.host_key_line, verify=False)
    client.post(f"{API}/targets", json=body, headers=as_operator)

    client.post(f"{API}/targets/pbx1/pair", json={}, headers=as_operator)

    assert client.get(f"{API}/targets/pbx1", headers=as_operator).json()["paired"] is False


@sqlite_only
@pytest.mark.sshd
def test_a_host_key_mismatch_at_pairing_is_a_conflict(
    client: TestClient, as_operator: Headers, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    body = ssh_body("pbx1", sshd, host_key=sshd_other_host_key.host_key_line, verify=False)
    client.post(f"{API}/targets", json=body, headers=as_operator)

    response = client.post(f"{API}/targets/pbx1/pair", json={}, headers=as_operator)

    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "host_key_mismatch"
    assert sshd.host_key_fingerprint in str(error["message"])


@sqlite_only
@pytest.mark.sshd
def test_an_unreachable_target_at_pairing_is_a_bad_gateway(
    client: TestClient, as_operator: Headers, as_admin: Headers, sshd: SshServer
) -> None:
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    body = ssh_body("pbx1", sshd, port=1, verify=False)
    client.post(f"{API}/targets", json=body, headers=as_operator)

    # An admin sees the cause (an operator a coarse answer: test_pairing_errors.py).
    response = client.post(
        f"{API}/targets/pbx1/pair", json={"trust_on_first_use": True}, headers=as_admin
    )

    assert response.status_code == 502
    error = error_of(response)
    assert error["code"] == "target_unreachable"
    assert "refused" in str(error["message"])


# -- the target lifecycle: edit, re-pin, pause, removal with jobs, same host, local ------


def add_local(client: TestClient, headers: Headers, name: str = "box") -> None:
    response = client.post(f"{API}/targets", json={"name": name, "kind": "local"}, headers=headers)
    assert response.status_code == 201, response.text


def test_a_patch_replaces_labels_and_notes_and_says_what_changed(
    client: TestClient, as_admin: Headers, as_operator: Headers
) -> None:
    add_local(client, as_admin)

    response = client.patch(
        f"{API}/targets/box",
        json={"labels": {"site": "fra"}, "notes": "rack 4"},
        headers=as_operator,
    )

    assert response.status_code == 200, response.text
    edited = response.json()
    assert sorted(edited["changed"]) == ["labels", "notes"]
    assert (edited["target"]["labels"], edited["target"]["notes"]) == ({"site": "fra"}, "rack 4")


@sqlite_only
def test_a_patch_with_a_bad_port_is_refused_naming_the_field(
    client: TestClient, as_operator: Headers
) -> None:
    response = client.patch(f"{API}/targets/box", json={"port": 0}, headers=as_operator)

    assert response.status_code == 422
    assert error_of(response)["field"] == "port"


@pytest.mark.sshd
def test_a_patch_to_a_server_with_another_host_key_is_a_conflict_and_changes_nothing(
    client: TestClient, as_operator: Headers, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    client.post(
        f"{API}/targets", json=ssh_body("pbx1", sshd, trust_on_first_use=True), headers=as_operator
    )

    response = client.patch(
        f"{API}/targets/pbx1", json={"port": sshd_other_host_key.port}, headers=as_operator
    )

    assert response.status_code == 409, response.text
    assert error_of(response)["code"] == "host_key_mismatch"
    assert client.get(f"{API}/targets/pbx1", headers=as_operator).json()["port"] == sshd.port
    unchecked = client.patch(
        f"{API}/targets/pbx1",
        json={"port": sshd_other_host_key.port, "verify": False},
        headers=as_operator,
    ).json()
    assert (unchecked["unpaired"], unchecked["target"]["paired"]) == (True, False)


@pytest.mark.sshd
def test_a_repin_shows_both_fingerprints_on_a_dry_run_and_pins_only_the_expected_key(
    client: TestClient, as_operator: Headers, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    body = ssh_body("pbx4", sshd, host_key=sshd.host_key_line, verify=False)
    client.post(f"{API}/targets", json=body, headers=as_operator)
    client.patch(  # the address now answers with another key: a reinstalled server
        f"{API}/targets/pbx4", json={"port": sshd_other_host_key.port}, headers=as_operator
    )

    dry = client.post(
        f"{API}/targets/pbx4/repin",
        json={"trust_on_first_use": True, "dry_run": True},
        headers=as_operator,
    ).json()
    wrong = client.post(
        f"{API}/targets/pbx4/repin",
        json={"trust_on_first_use": True, "expected_fingerprint": sshd.host_key_fingerprint},
        headers=as_operator,
    )
    pinned = client.post(
        f"{API}/targets/pbx4/repin",
        json={"trust_on_first_use": True, "expected_fingerprint": dry["new_fingerprint"]},
        headers=as_operator,
    )

    assert (dry["old_fingerprint"], dry["new_fingerprint"], dry["pinned"]) == (
        sshd.host_key_fingerprint,
        sshd_other_host_key.host_key_fingerprint,
        False,
    )
    assert wrong.status_code == 409 and error_of(wrong)["field"] == "expected_fingerprint"
    assert pinned.status_code == 200, pinned.text
    shown = client.get(f"{API}/targets/pbx4", headers=as_operator).json()
    assert shown["host_key_fingerprint"] == sshd_other_host_key.host_key_fingerprint


def test_pause_and_resume_show_in_the_target_and_a_viewer_may_not_pause(
    client: TestClient, as_admin: Headers, as_operator: Headers, as_viewer: Headers
) -> None:
    add_local(client, as_admin)

    refused = client.post(f"{API}/targets/box/pause", json={}, headers=as_viewer)
    paused = client.post(
        f"{API}/targets/box/pause", json={"reason": "new disk"}, headers=as_operator
    ).json()
    resumed = client.post(f"{API}/targets/box/resume", headers=as_operator).json()

    assert refused.status_code == 403
    assert (paused["paused"], paused["paused_reason"], paused["paused_by"]) == (
        True,
        "new disk",
        "olivia",
    )
    assert (resumed["paused"], resumed["paused_reason"]) == (False, None)


def test_a_target_is_deleted_with_its_individual_jobs_when_asked(
    client: TestClient, as_admin: Headers, as_operator: Headers, app: App, operator: Actor
) -> None:
    add_local(client, as_admin)
    jobs.add_job(app, operator, "hello", JobSpec("* * * * *", "true"), target="box")

    response = client.delete(f"{API}/targets/box?with_jobs=true", headers=as_operator)

    assert response.status_code == 204
    assert client.get(f"{API}/jobs/hello", headers=as_operator).status_code == 404


@sqlite_only
def test_a_second_target_on_the_same_host_is_a_conflict_unless_allowed(
    client: TestClient, as_operator: Headers, sshd: SshServer
) -> None:
    client.post(f"{API}/targets", json=ssh_body("pbx1", sshd, verify=False), headers=as_operator)

    refused = client.post(
        f"{API}/targets", json=ssh_body("pbx5", sshd, verify=False), headers=as_operator
    )
    allowed = client.post(
        f"{API}/targets",
        json=ssh_body("pbx5", sshd, verify=False, allow_same_host=True),
        headers=as_operator,
    )

    assert refused.status_code == 409
    assert error_of(refused)["field"] == "host"
    assert "pbx1" in str(error_of(refused)["message"])
    assert allowed.status_code == 201, allowed.text


def test_an_operator_gets_403_for_a_local_target_and_an_admin_gets_it(
    client: TestClient, as_operator: Headers, as_admin: Headers
) -> None:
    refused = client.post(
        f"{API}/targets", json={"name": "here", "kind": "local"}, headers=as_operator
    )

    assert refused.status_code == 403
    assert "only an admin may add one" in str(error_of(refused)["message"])
    assert client.get(f"{API}/targets", headers=as_operator).json() == []
    add_local(client, as_admin, "here")


@sqlite_only
def test_with_local_targets_disabled_an_admin_gets_422_naming_the_kind(
    database_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    locked = App.open(
        make_settings(tmp_path / "locked", database_url, allow_local_targets=False), clock=clock
    )
    try:
        with new_client(locked) as client:
            response = client.post(
                f"{API}/targets",
                json={"name": "here", "kind": "local"},
                headers=bearer(token_for(locked, "admin")),
            )
    finally:
        locked.close()

    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "kind"
    assert "FLEETCRON_ALLOW_LOCAL_TARGETS" in str(error["message"])


@pytest.mark.sshd
def test_a_target_is_added_behind_a_jump_host_and_shows_it(
    client: TestClient, as_operator: Headers, sshd: SshServer, bastion: SshServer
) -> None:
    jump = ssh_body("b1", bastion, kind="jump", trust_on_first_use=True)
    assert client.post(f"{API}/targets", json=jump, headers=as_operator).status_code == 201
    body = ssh_body("t42", sshd, via="b1", trust_on_first_use=True)
    response = client.post(f"{API}/targets", json=body, headers=as_operator)

    assert response.status_code == 201, response.text
    target = response.json()["target"]
    assert (target["via"], target["paired"]) == ("b1", True)
    assert client.get(f"{API}/targets/b1", headers=as_operator).json()["via"] is None


@sqlite_only
@pytest.mark.sshd
def test_a_via_that_is_not_a_jump_host_is_a_422_naming_the_field(
    client: TestClient, as_operator: Headers, as_admin: Headers, sshd: SshServer
) -> None:
    client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)
    body = ssh_body("t1", sshd, via="box", verify=False)
    response = client.post(f"{API}/targets", json=body, headers=as_operator)

    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "via"
    assert "target box is of kind local, not jump" in response.text
    assert client.get(f"{API}/targets/t1", headers=as_operator).status_code == 404
