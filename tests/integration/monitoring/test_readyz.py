"""/readyz says what a ready node is: the owner (it runs the jobs; a standalone node
always does) or a healthy standby; neither (the database down, no owner chosen) is 503
with the role null and the failing check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fixtures.app import make_settings
from fixtures.cluster import ClusterNode, approve
from fleetcron.app import SYSTEM, App
from fleetcron.services.cluster import status as cluster
from fleetcron.web.app import create_app

MakeNode = Callable[[str], ClusterNode]


def ready(app: App) -> tuple[int, dict[str, object]]:
    answer = TestClient(create_app(app)).get("/readyz")
    return answer.status_code, answer.json()


def test_a_standalone_node_is_ready_as_the_owner(app: App) -> None:
    code, body = ready(app)
    assert code == 200, body
    assert (body["ready"], body["role"], body["ownership"]) == (True, "owner", "standalone")


@pytest.fixture
def unreachable(tmp_path: Path) -> Iterator[App]:
    """An app whose PostgreSQL does not answer (nothing listens on port 1)."""
    settings = make_settings(tmp_path / "data", "postgresql+psycopg://fc@127.0.0.1:1/fc")
    app = App.open(settings)
    yield app
    app.close()


def test_with_the_database_down_the_node_is_neither_owner_nor_standby(unreachable: App) -> None:
    """Negative control for the test above: the same check answers 503, role null."""
    code, body = ready(unreachable)
    assert code == 503, body
    assert body["ready"] is False and body["role"] is None
    assert str(body["checks"]["database"]).startswith("unreachable")  # type: ignore[index]


@pytest.mark.postgres
def test_in_a_cluster_the_owner_and_the_standby_say_which_they_are(
    migrated: str, make_node: MakeNode
) -> None:
    alpha, beta = make_node("alpha"), make_node("beta")
    approve(alpha)
    approve(beta)
    before = ready(beta.app)
    cluster.request_transfer(alpha.app, SYSTEM, alpha.node_id)

    owner, standby = ready(alpha.app), ready(beta.app)

    # No owner chosen yet: not ready, neither role.
    assert before[0] == 503 and before[1]["role"] is None, before
    assert owner[0] == 200 and owner[1]["role"] == "owner", owner
    assert standby[0] == 200 and standby[1]["role"] == "standby", standby
    assert (owner[1]["ownership"], standby[1]["ownership"]) == ("owner", "standby")


def test_a_cluster_node_with_its_database_down_answers_503_not_500(tmp_path: Path) -> None:
    """In a cluster the ownership state is read from the database: its failure is a
    failing check, not an error."""
    machine_id = tmp_path / "machine-id"
    machine_id.write_text("0123456789abcdef0123456789abcdef\n")
    settings = make_settings(
        tmp_path / "data",
        "postgresql+psycopg://fc@127.0.0.1:1/fc",
        cluster=True,
        endpoint="http://alpha.example:8080",
        machine_id_file=machine_id,
    )
    app = App.open(settings)
    try:
        code, body = ready(app)
    finally:
        app.close()
    assert code == 503, body
    assert body["role"] is None
    assert str(body["ownership"]).startswith("unknown"), body
