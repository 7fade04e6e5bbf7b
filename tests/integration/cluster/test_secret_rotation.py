"""The coordination secret in the shared database: creation, rotation and its 24 h grace.

Nodes share one real PostgreSQL and one master key. Signed requests go to the real web
application in process (``TestClient``); the fixture clock starts at 2026-03-02 09:00:30 UTC
and every node reads it, so moving it moves the whole cluster.
"""

from __future__ import annotations

import base64
import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from fixtures.app import FakeClock, make_settings
from fixtures.cluster import ClusterNode
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.coordination.peer import CHALLENGE_PATH, CHALLENGE_PURPOSE
from fleetcron.coordination.secrets import current_and_accepted
from fleetcron.coordination.signing import key_id, sign
from fleetcron.errors import CoordinationError, PermissionDenied, SecretError
from fleetcron.services.cluster.secrets import ensure_secret, rotate_secret
from fleetcron.store.schema import AuditEvent, ClusterSecret
from fleetcron.web.app import create_app

pytestmark = pytest.mark.postgres

MakeNode = Callable[[str], ClusterNode]
ADMIN = Actor("admin", "admin")
OPERATOR = Actor("olivia", "operator")


@pytest.fixture
def alpha(make_node: MakeNode) -> ClusterNode:
    return make_node("alpha")


@pytest.fixture
def client(alpha: ClusterNode) -> Iterator[TestClient]:
    """The web application of node alpha, in process."""
    with TestClient(create_app(alpha.app), raise_server_exceptions=False) as the_client:
        yield the_client


def challenge_with(client: TestClient, secret: bytes, clock: FakeClock) -> Any:
    envelope = sign(
        secret, CHALLENGE_PURPOSE, {"endpoint": "http://alpha.example:8080"}, now=clock.now
    )
    return client.post(CHALLENGE_PATH, json=envelope)


def secret_count(app: App) -> int:
    with app.db.read() as session:
        return session.scalar(select(func.count(ClusterSecret.id))) or 0


def audit(app: App, action: str) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
            )
        )


# --- the first secret ---------------------------------------------------------------------


def test_the_first_secret_is_created_once_and_shared_by_every_node(
    make_node: MakeNode,
) -> None:
    a, b = make_node("alpha"), make_node("beta")

    created = [ensure_secret(a.app, SYSTEM), ensure_secret(b.app, SYSTEM)]

    assert created == [True, False]
    assert current_and_accepted(a.app) == current_and_accepted(b.app)
    assert len(current_and_accepted(a.app)[0]) == 32
    [event] = audit(a.app, "cluster.create_secret")
    assert event.detail == {"key_id": key_id(current_and_accepted(a.app)[0])}


def test_two_nodes_creating_the_first_secret_at_once_create_one(make_node: MakeNode) -> None:
    nodes = [make_node("alpha"), make_node("beta"), make_node("gamma")]
    start = threading.Barrier(len(nodes))
    results: list[bool] = []

    def create(node: ClusterNode) -> None:
        start.wait()
        results.append(ensure_secret(node.app, SYSTEM))

    threads = [threading.Thread(target=create, args=(n,)) for n in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [False, False, True]
    assert secret_count(nodes[0].app) == 1


def test_without_a_secret_a_node_refuses_every_challenge(
    alpha: ClusterNode, client: TestClient, clock: FakeClock
) -> None:
    with pytest.raises(CoordinationError, match="no coordination secret yet"):
        current_and_accepted(alpha.app)

    answer = challenge_with(client, secrets.token_bytes(32), clock)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthenticated"
    assert "no coordination secret yet" in answer.json()["error"]["message"]


def test_a_node_with_another_master_key_cannot_read_the_secret(
    alpha: ClusterNode, migrated: str, tmp_path: Path, clock: FakeClock
) -> None:
    ensure_secret(alpha.app, SYSTEM)
    machine_id = tmp_path / "stranger.machine-id"
    machine_id.write_text(secrets.token_hex(16) + "\n")
    stranger = App.open(
        make_settings(  # a fresh master key
            tmp_path / "stranger",
            migrated,
            cluster=True,
            endpoint="http://stranger.example:8080",
            machine_id_file=machine_id,
        ),
        clock=clock,
    )
    try:
        with pytest.raises(SecretError, match="cannot be decrypted with this master key"):
            current_and_accepted(stranger)
    finally:
        stranger.close()


# --- rotation -------------------------------------------------------------------------------


def test_after_a_rotation_the_new_secret_signs_and_the_previous_is_still_accepted(
    alpha: ClusterNode, clock: FakeClock
) -> None:
    ensure_secret(alpha.app, SYSTEM)
    old, _ = current_and_accepted(alpha.app)

    rotation = rotate_secret(alpha.app, ADMIN)

    new, accepted = current_and_accepted(alpha.app)
    assert accepted == [new, old] and new != old
    assert (rotation.key_id, rotation.previous_key_id) == (key_id(new), key_id(old))
    assert rotation.previous_accepted_until == clock.now + timedelta(hours=24)
    [event] = audit(alpha.app, "cluster.rotate_secret")
    assert event.success and event.actor == "admin"
    assert event.detail["key_id"] == key_id(new)
    assert event.detail["previous_key_id"] == key_id(old)


def test_a_message_signed_with_the_previous_secret_is_accepted_within_24_hours(
    alpha: ClusterNode, client: TestClient, clock: FakeClock
) -> None:
    ensure_secret(alpha.app, SYSTEM)
    old, _ = current_and_accepted(alpha.app)
    rotate_secret(alpha.app, ADMIN)
    clock.advance(hours=23, minutes=59)

    answer = challenge_with(client, old, clock)

    assert answer.status_code == 200
    # The answer is signed with the new secret.
    assert answer.json()["key_id"] == key_id(current_and_accepted(alpha.app)[0])


def test_a_message_signed_with_the_previous_secret_is_refused_24_hours_after_the_rotation(
    alpha: ClusterNode, client: TestClient, clock: FakeClock
) -> None:
    ensure_secret(alpha.app, SYSTEM)
    old, _ = current_and_accepted(alpha.app)
    rotate_secret(alpha.app, ADMIN)
    clock.advance(hours=24)

    answer = challenge_with(client, old, clock)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthenticated"
    assert f"unknown key id '{key_id(old)}'" in answer.json()["error"]["message"]
    assert current_and_accepted(alpha.app)[1] == [current_and_accepted(alpha.app)[0]]


def test_a_second_rotation_drops_the_oldest_secret_at_once(
    alpha: ClusterNode, client: TestClient, clock: FakeClock
) -> None:
    ensure_secret(alpha.app, SYSTEM)
    oldest, _ = current_and_accepted(alpha.app)
    rotate_secret(alpha.app, ADMIN)
    middle, _ = current_and_accepted(alpha.app)
    clock.advance(minutes=5)
    rotate_secret(alpha.app, ADMIN)

    newest, accepted = current_and_accepted(alpha.app)

    assert accepted == [newest, middle]
    assert challenge_with(client, oldest, clock).status_code == 401
    assert challenge_with(client, middle, clock).status_code == 200


def test_a_rotation_on_one_node_is_in_use_on_every_node(make_node: MakeNode) -> None:
    a, b = make_node("alpha"), make_node("beta")
    ensure_secret(a.app, SYSTEM)

    rotate_secret(b.app, ADMIN)

    assert current_and_accepted(a.app) == current_and_accepted(b.app)
    assert len(current_and_accepted(a.app)[1]) == 2


def test_only_an_admin_may_rotate_the_secret(alpha: ClusterNode) -> None:
    ensure_secret(alpha.app, SYSTEM)

    with pytest.raises(PermissionDenied):
        rotate_secret(alpha.app, OPERATOR)

    assert secret_count(alpha.app) == 1
    [event] = audit(alpha.app, "cluster.rotate_secret")
    assert (event.success, event.actor) == (False, "olivia")


# --- the secret stays secret -----------------------------------------------------------------


def spellings(secret: bytes) -> list[str]:
    """Ways a secret could be written out by mistake."""
    return [
        secret.hex(),
        secret.hex().upper(),
        base64.b64encode(secret).decode(),
        base64.urlsafe_b64encode(secret).rstrip(b"=").decode(),
        repr(secret),
    ]


def test_the_secret_never_appears_in_the_audit_log_the_logs_or_a_repr(
    alpha: ClusterNode,
    client: TestClient,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    ensure_secret(alpha.app, SYSTEM)
    first, _ = current_and_accepted(alpha.app)
    rotation = rotate_secret(alpha.app, ADMIN)
    with pytest.raises(PermissionDenied):
        rotate_secret(alpha.app, OPERATOR)
    answer = challenge_with(client, first, clock)
    refused = challenge_with(client, secrets.token_bytes(32), clock)
    current, accepted = current_and_accepted(alpha.app)

    with alpha.app.db.read() as session:
        audit_text = "\n".join(
            str(tuple(row)) for row in session.execute(text("SELECT * FROM audit_events"))
        )
    shown = [audit_text, caplog.text, repr(rotation), answer.text, refused.text]
    assert audit_text.count("cluster.") >= 3  # the events are there, with their key ids
    for secret in accepted:
        for spelling in spellings(secret):
            assert not any(spelling in place for place in shown)
    assert key_id(current) in audit_text
