"""Pairing answers are no port scanner for operators, and private hosts can be refused.

An operator pairing a target that cannot be reached (or refuses the key) is told one coarse
sentence; the cause (connection refused, timed out, ...) goes to the scheduler's log and to
an admin's answer (``target.diagnose``). With ``ssh_refuse_private_hosts`` on, a target on
a loopback, link-local or private address is refused before any connection (field
``host``); off (the default), the same target is tried. Port 1 on loopback: nothing
listens, the connection is refused at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fixtures.sshd import SshServer
from fleetcron.app import App
from fleetcron.store.schema import AuditEvent
from integration.web.conftest import API, bearer, error_of, new_client, sqlite_only, token_for

pytestmark = [sqlite_only, pytest.mark.sshd]


def unreachable(sshd: SshServer, host: str = "127.0.0.1") -> dict[str, object]:
    return {
        "name": "pbx1",
        "kind": "ssh",
        "host": host,
        "port": 1,
        "user": sshd.user,
        "private_key": sshd.client_private_key,
        "verify": False,
    }


def pair(client: TestClient, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    response = client.post(
        f"{API}/targets/pbx1/pair", json={"trust_on_first_use": True}, headers=headers
    )
    return response.status_code, error_of(response)


def test_an_operator_gets_a_coarse_answer_and_the_cause_is_logged(
    app: App,
    client: TestClient,
    as_operator: dict[str, str],
    as_admin: dict[str, str],
    sshd: SshServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert client.post(f"{API}/targets", json=unreachable(sshd), headers=as_operator).is_success

    with caplog.at_level(logging.WARNING, logger="fleetcron.services.targets.pairing"):
        status, error = pair(client, as_operator)
    admin_status, admin_error = pair(client, as_admin)

    assert status == admin_status == 502
    assert error["message"] == (
        "could not reach or authenticate the target pbx1; an admin can see the cause in the "
        "scheduler's log"
    )
    # The control: the cause exists, and an admin is shown it.
    assert admin_error["message"] != error["message"]
    assert "refused" in str(admin_error["message"])
    [logged] = [r for r in caplog.records if getattr(r, "action", None) == "target.pair_failed"]
    assert "refused" in logged.getMessage() and "olivia" in logged.getMessage()
    with app.db.read() as session:
        [audited] = session.scalars(
            select(AuditEvent).where(
                AuditEvent.action == "target.pair", AuditEvent.actor == "olivia"
            )
        )
    assert "refused" not in str(audited.detail), audited.detail


@pytest.fixture
def refusing(database_url: str, tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    the_app = App.open(
        make_settings(tmp_path / "refusing", database_url, ssh_refuse_private_hosts=True),
        clock=clock,
    )
    yield the_app
    the_app.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "169.254.169.254", "10.1.2.3", "[::ffff:7f00:1]"])
def test_with_the_setting_on_a_private_host_is_refused_naming_the_host_field(
    refusing: App, sshd: SshServer, host: str
) -> None:
    oper = bearer(token_for(refusing, "operator"))
    with new_client(refusing) as client:
        body = unreachable(sshd, host.strip("[]"))
        assert client.post(f"{API}/targets", json=body, headers=oper).is_success
        status, error = pair(client, oper)

    assert status == 422, error
    assert error["field"] == "host"
    assert "ssh_refuse_private_hosts" in str(error["message"])


def test_with_the_setting_off_the_same_host_is_tried(
    client: TestClient, as_operator: dict[str, str], sshd: SshServer
) -> None:
    client.post(f"{API}/targets", json=unreachable(sshd), headers=as_operator)

    status, error = pair(client, as_operator)

    assert status == 502, error  # tried, and failed to connect: the default refuses nothing
