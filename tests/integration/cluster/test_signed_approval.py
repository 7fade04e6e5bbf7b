"""Approving a node through a signed identity challenge to its real HTTP endpoint.

Every node shares one real PostgreSQL. The node being approved runs the real web
application under uvicorn on a free 127.0.0.1 port that is also its ``FLEETCRON_ENDPOINT``;
the approving node (``alpha``, from the cluster conftest) needs no server. All nodes use the
same :class:`FakeClock`, so signed timestamps agree.
"""

from __future__ import annotations

import dataclasses
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import func, select, update

from fixtures.app import FakeClock, make_settings
from fixtures.cluster import ClusterNode
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.coordination.identity import NodeIdentity
from fleetcron.coordination.nonces import DbNonceStore
from fleetcron.coordination.peer import CHALLENGE_PATH, CHALLENGE_PURPOSE, challenge
from fleetcron.coordination.secrets import current_and_accepted
from fleetcron.coordination.signing import MemoryNonceStore, sign
from fleetcron.errors import Conflict, CoordinationError, PermissionDenied
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.peers import approve_endpoint, node_reachability
from fleetcron.services.cluster.secrets import ensure_secret
from fleetcron.services.cluster.status import Node
from fleetcron.store.schema import AuditEvent, SeenNonce
from fleetcron.store.schema import ClusterNode as NodeRow
from fleetcron.web.api import cluster_peer
from fleetcron.web.app import create_app
from waiting import eventually

pytestmark = pytest.mark.postgres

MakeNode = Callable[[str], ClusterNode]
ADMIN = Actor("admin", "admin")
#: How long a request of the test waits for a node's answer. The node's server is a thread
#: of the test's own process, which ``make test`` runs at a lower priority on a loaded
#: machine: httpx's default of 5 s was once too short for it to read a request's body.
REQUEST_TIMEOUT_S = 30.0


def post(url: str, *, json: object) -> httpx.Response:
    """POST ``json`` to ``url``, waiting up to :data:`REQUEST_TIMEOUT_S` for the answer."""
    return httpx.post(url, json=json, timeout=REQUEST_TIMEOUT_S)


@dataclass
class Served:
    """A node whose web application answers on its real endpoint."""

    app: App
    node: Node
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def endpoint(self) -> str:
        return self.identity.endpoint

    @property
    def identity(self) -> NodeIdentity:
        return self.node.identity

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


Serve = Callable[..., Served]


@pytest.fixture
def serve(migrated: str, tmp_path: Path, clock: FakeClock, master_key: str) -> Iterator[Serve]:
    """Start a cluster node named ``name`` behind uvicorn; it announces itself unless told
    not to."""
    started: list[Served] = []

    def start(name: str, *, announce: bool = True) -> Served:
        machine_id_file = tmp_path / f"{name}.machine-id"
        if not machine_id_file.exists():
            machine_id_file.write_text(secrets.token_hex(16) + "\n")
        # Bound before the settings are made, its port is the endpoint; uvicorn listens on
        # it and closes it when it stops.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        settings = make_settings(
            tmp_path / name,
            migrated,
            cluster=True,
            endpoint=f"http://127.0.0.1:{sock.getsockname()[1]}",
            machine_id_file=machine_id_file,
            master_key=SecretStr(master_key),
        )
        app = App.open(settings, clock=clock)
        node = Node(app)
        if announce:
            cluster.announce(app, node)
        config = uvicorn.Config(create_app(app), log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        served = Served(app, node, server, thread)
        started.append(served)
        thread.start()

        def up() -> bool:
            assert thread.is_alive(), f"{name} did not start"
            return server.started

        eventually(up, 10, f"{name}'s web server to start", interval=0.01)
        return served

    yield start
    for served in started:
        served.stop()
        served.app.close()


@pytest.fixture
def alpha(make_node: MakeNode) -> ClusterNode:
    """The approving node: approved itself, with the cluster's first secret."""
    a = make_node("alpha")
    cluster.approve(a.app, SYSTEM, a.identity)
    ensure_secret(a.app, SYSTEM)
    return a


def row(app: App, node_id: str) -> NodeRow:
    with app.db.read() as session:
        found = session.scalar(select(NodeRow).where(NodeRow.node_id == node_id))
        assert found is not None
        return found


def audit(app: App, action: str) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
            )
        )


def signed_challenge(app: App, *, secret: bytes | None = None) -> dict[str, Any]:
    current, _ = current_and_accepted(app)
    return sign(secret or current, CHALLENGE_PURPOSE, {"endpoint": "http://x.test"}, now=app.now())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- approval ---------------------------------------------------------------------------


def test_approving_a_candidate_through_its_endpoint_marks_it_approved(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    assert row(alpha.app, beta.identity.node_id).state == "candidate"

    approved = approve_endpoint(alpha.app, ADMIN, beta.endpoint + "/")

    assert (approved.node_id, approved.state) == (beta.identity.node_id, "approved")
    assert row(alpha.app, beta.identity.node_id).approved_by == "admin"
    [event] = audit(alpha.app, "cluster.approve")[-1:]
    assert event.success and event.detail["node"] == beta.identity.node_id


def test_an_endpoint_other_than_the_registered_one_is_kept_as_an_alias(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    alias = beta.endpoint.replace("127.0.0.1", "localhost")

    approve_endpoint(alpha.app, ADMIN, alias)

    record = row(alpha.app, beta.identity.node_id)
    assert (record.state, record.endpoint, record.aliases) == ("approved", beta.endpoint, [alias])


def test_a_node_answering_with_another_fingerprint_than_its_registration_is_refused(
    alpha: ClusterNode, serve: Serve
) -> None:
    # A disk clone: the host answering has the registered machine id, but the record was
    # made by the original, whose fingerprint differs.
    beta = serve("beta")
    with alpha.app.db.session() as session:
        session.execute(
            update(NodeRow)
            .where(NodeRow.node_id == beta.identity.node_id)
            .values(fingerprint="0" * 64)
        )

    with pytest.raises(Conflict, match="clone"):
        approve_endpoint(alpha.app, ADMIN, beta.endpoint)

    assert row(alpha.app, beta.identity.node_id).state == "candidate"


def test_a_node_that_has_not_announced_itself_is_refused(alpha: ClusterNode, serve: Serve) -> None:
    gamma = serve("gamma", announce=False)

    with pytest.raises(Conflict, match="has not announced itself"):
        approve_endpoint(alpha.app, ADMIN, gamma.endpoint)

    [event] = audit(alpha.app, "cluster.approve")[-1:]
    assert not event.success and "not announced" in event.detail["error"]


def test_a_node_on_another_database_cluster_is_refused(
    alpha: ClusterNode, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    class OnAnotherDatabase(Node):
        @cached_property
        def identity(self) -> NodeIdentity:
            return dataclasses.replace(Node(self.app).identity, db_system_id="7000000000000001")

    beta = serve("beta")
    monkeypatch.setattr(cluster_peer, "Node", OnAnotherDatabase)

    with pytest.raises(Conflict, match="must use the same PostgreSQL"):
        approve_endpoint(alpha.app, ADMIN, beta.endpoint)

    assert row(alpha.app, beta.identity.node_id).state == "candidate"


def test_an_unreachable_endpoint_is_refused_with_a_clear_message(alpha: ClusterNode) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"

    with pytest.raises(CoordinationError, match=f"node endpoint {endpoint} is unreachable"):
        approve_endpoint(alpha.app, ADMIN, endpoint)

    [event] = audit(alpha.app, "cluster.approve")[-1:]
    assert not event.success and event.detail["endpoint"] == endpoint


def test_only_an_admin_may_approve(alpha: ClusterNode, serve: Serve) -> None:
    beta = serve("beta")

    with pytest.raises(PermissionDenied):
        approve_endpoint(alpha.app, Actor("olivia", "operator"), beta.endpoint)

    assert row(alpha.app, beta.identity.node_id).state == "candidate"


def test_approval_creates_the_first_secret_when_there_is_none(
    make_node: MakeNode, serve: Serve
) -> None:
    a = make_node("alpha")
    beta = serve("beta")

    approve_endpoint(a.app, ADMIN, beta.endpoint)

    assert [e.actor for e in audit(a.app, "cluster.create_secret")] == ["admin"]
    assert row(a.app, beta.identity.node_id).state == "approved"


# --- the challenge on the wire ----------------------------------------------------------


def test_the_answer_is_the_nodes_identity_signed_and_bound_to_the_challenge(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    current, accepted = current_and_accepted(alpha.app)

    answered = challenge(
        beta.endpoint,
        secret=current,
        accepted=accepted,
        seen=MemoryNonceStore(),
        now=alpha.app.now(),
    )

    assert answered == beta.identity


def test_an_answer_signed_with_a_secret_the_challenger_does_not_accept_is_refused(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    current, _ = current_and_accepted(alpha.app)

    with pytest.raises(CoordinationError, match=r"gave no valid signed identity.*unknown key id"):
        challenge(
            beta.endpoint,
            secret=current,
            accepted=[secrets.token_bytes(32)],
            seen=MemoryNonceStore(),
            now=alpha.app.now(),
        )


def test_a_challenge_signed_with_a_wrong_secret_is_refused(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    envelope = signed_challenge(alpha.app, secret=secrets.token_bytes(32))

    answer = post(beta.endpoint + CHALLENGE_PATH, json=envelope)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthenticated"
    assert "unknown key id" in answer.json()["error"]["message"]


def test_the_client_reports_a_refused_challenge_with_the_nodes_reason(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    wrong = secrets.token_bytes(32)

    with pytest.raises(CoordinationError, match=r"refused the signed challenge: .*unknown key id"):
        challenge(
            beta.endpoint,
            secret=wrong,
            accepted=[wrong],
            seen=MemoryNonceStore(),
            now=alpha.app.now(),
        )


def test_an_unsigned_body_is_refused(alpha: ClusterNode, serve: Serve) -> None:
    beta = serve("beta")

    answer = post(beta.endpoint + CHALLENGE_PATH, json={"endpoint": beta.endpoint})

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthenticated"


def test_a_challenge_stamped_outside_the_clock_window_is_refused(
    alpha: ClusterNode, serve: Serve, clock: FakeClock
) -> None:
    beta = serve("beta")
    envelope = signed_challenge(alpha.app)
    clock.advance(seconds=61)

    answer = post(beta.endpoint + CHALLENGE_PATH, json=envelope)

    assert answer.status_code == 401
    assert "window" in answer.json()["error"]["message"]


# --- replays and the nonce store --------------------------------------------------------


def test_a_replayed_challenge_is_refused_the_second_time(alpha: ClusterNode, serve: Serve) -> None:
    beta = serve("beta")
    envelope = signed_challenge(alpha.app)

    first = post(beta.endpoint + CHALLENGE_PATH, json=envelope)
    second = post(beta.endpoint + CHALLENGE_PATH, json=envelope)

    assert first.status_code == 200
    assert second.status_code == 401
    assert second.json()["error"] == {
        "code": "unauthenticated",
        "message": "refused coordination message: nonce already seen: the message is a replay",
        "field": None,
    }


def test_a_challenge_accepted_by_one_node_is_refused_by_every_other(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta, gamma = serve("beta"), serve("gamma")
    envelope = signed_challenge(alpha.app)

    assert post(beta.endpoint + CHALLENGE_PATH, json=envelope).status_code == 200
    assert post(gamma.endpoint + CHALLENGE_PATH, json=envelope).status_code == 401


def test_the_nonce_store_accepts_a_nonce_once(alpha: ClusterNode, clock: FakeClock) -> None:
    store = DbNonceStore(alpha.app)

    assert store.remember("n" * 24, clock.now, clock.now) is True
    assert store.remember("n" * 24, clock.now, clock.now) is False
    assert DbNonceStore(alpha.app).remember("n" * 24, clock.now, clock.now) is False


def test_the_nonce_store_takes_nonces_longer_than_its_column(
    alpha: ClusterNode, clock: FakeClock
) -> None:
    store = DbNonceStore(alpha.app)

    assert store.remember("a" * 128, clock.now, clock.now) is True
    assert store.remember("a" * 128, clock.now, clock.now) is False


def test_the_nonce_store_forgets_nonces_older_than_twice_the_window(
    alpha: ClusterNode, clock: FakeClock
) -> None:
    store = DbNonceStore(alpha.app, timedelta(seconds=60))
    old, recent = clock.now, clock.now + timedelta(seconds=90)
    store.remember("old-nonce-0123456789", old, old)
    store.remember("recent-nonce-0123456", recent, recent)

    later = clock.advance(seconds=121)
    # A new store (a restarted node) prunes on its first message.
    DbNonceStore(alpha.app, timedelta(seconds=60)).remember("new-nonce-0123456789", later, later)

    with alpha.app.db.read() as session:
        assert session.scalar(select(func.count()).select_from(SeenNonce)) == 2


# --- the route ----------------------------------------------------------------------------


def test_a_node_not_in_cluster_mode_has_no_identity_route(
    migrated: str, tmp_path: Path, clock: FakeClock
) -> None:
    solo = App.open(make_settings(tmp_path / "solo", migrated), clock=clock)
    try:
        with TestClient(create_app(solo), raise_server_exceptions=False) as client:
            answer = client.post(CHALLENGE_PATH, json={})
    finally:
        solo.close()

    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"


def test_the_identity_route_is_marked_as_a_peer_route(alpha: ClusterNode) -> None:
    [dependant] = [
        route.dependant
        for route in iter_route_contexts(create_app(alpha.app).routes)
        if route.path == CHALLENGE_PATH and route.dependant is not None
    ]

    marks = [getattr(d.call, "peer", False) for d in dependant.dependencies]

    assert marks.count(True) == 1
    assert not any(getattr(d.call, "action", None) for d in dependant.dependencies)


# --- reachability -------------------------------------------------------------------------


def test_an_approved_node_that_answers_is_reachable_until_it_stops(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta = serve("beta")
    record = approve_endpoint(alpha.app, ADMIN, beta.endpoint)

    assert node_reachability(alpha.app, record) is True
    beta.stop()
    assert node_reachability(alpha.app, record) is False


def test_a_node_answering_as_another_node_is_not_reachable(
    alpha: ClusterNode, serve: Serve
) -> None:
    beta, gamma = serve("beta"), serve("gamma")
    record = approve_endpoint(alpha.app, ADMIN, beta.endpoint)

    record.endpoint = gamma.endpoint  # a detached copy: the database keeps beta's endpoint

    assert node_reachability(alpha.app, record) is False
