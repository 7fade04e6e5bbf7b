"""A running command asks the API whether its claim is still live, on a real PostgreSQL.

The scheduler's environment for a claimed run carries ``FLEETCRON_CLAIM_SECRET`` and
``FLEETCRON_CLAIM_URL``; ``GET /api/v1/claims/{token}`` answers ``live`` while the
claim is, and 410 Gone with ``superseded`` once another node took over, ``expired`` past
its deadline, ``finished`` once the run was recorded; it refuses a request without the
run's secret or with another run's, and a forged token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from urllib.parse import quote, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, approve
from fleetcron.app import SYSTEM
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.scheduler.run_request import ClaimAsking, run_environment
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.claims import secrets_key
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as target_edit
from fleetcron.store.run_dispatch import Dispatch
from fleetcron.store.runs import RunStore
from fleetcron.web.api.claims import SECRET_HEADER
from fleetcron.web.app import create_app

pytestmark = pytest.mark.postgres

MakeNode = Callable[[str], ClusterNode]
ENDPOINT = "http://alpha.example:8080"


@pytest.fixture
def alpha_and_beta(migrated: str, make_node: MakeNode) -> tuple[ClusterNode, ClusterNode]:
    a, b = make_node("alpha"), make_node("beta")
    approve(a)
    approve(b)
    for name in ("busy", "idle"):
        target_edit.add_target(a.app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(a.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    return a, b


@pytest.fixture
def client(alpha_and_beta: tuple[ClusterNode, ClusterNode]) -> Iterator[TestClient]:
    with TestClient(create_app(alpha_and_beta[0].app), raise_server_exceptions=False) as c:
        yield c


def claimed(a: ClusterNode, clock: FakeClock) -> dict[str, dict[str, str]]:
    """alpha claims the 09:01 slot on both targets and finishes ``idle``: each run's
    environment, by target."""
    clock.advance(seconds=31)
    store = RunStore(a.app.db, node=a.node_id, guard=a.node.guard())
    dispatches: list[Dispatch] = store.claim_due(clock.now).dispatches
    asking = ClaimAsking(secrets_key(a.app), ENDPOINT)
    env = {d.target_name: run_environment(d, "alpha", asking) for d in dispatches}
    now = a.app.now()
    idle = next(d for d in dispatches if d.target_name == "idle")
    result = ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)
    assert store.finish([(idle.run_id, result)]) == []
    return env


def ask(client: TestClient, env: dict[str, str], secret: str | None = None) -> tuple[int, str]:
    headers = {SECRET_HEADER: secret if secret is not None else env["FLEETCRON_CLAIM_SECRET"]}
    response = client.get(urlsplit(env["FLEETCRON_CLAIM_URL"]).path, headers=headers)
    body = response.json()
    return response.status_code, str(body.get("state") or body.get("error", {}).get("code"))


def test_a_run_learns_its_claim_is_live_then_superseded_by_a_takeover(
    alpha_and_beta: tuple[ClusterNode, ClusterNode], client: TestClient, clock: FakeClock
) -> None:
    a, b = alpha_and_beta
    env = claimed(a, clock)
    busy, idle = env["busy"], env["idle"]
    # <shard>:<generation>:<claim>
    assert re.fullmatch(
        rf"{ENDPOINT}/api/v1/claims/[0-9]+%3A1%3A[0-9]+", busy["FLEETCRON_CLAIM_URL"]
    )

    assert ask(client, busy) == (200, "live")
    # A command started before shards asks with <generation>:<claim>: still answered.
    before_shards = (
        busy["FLEETCRON_CLAIM_URL"].split("/claims/")[0]
        + "/claims/"
        + quote(busy["FLEETCRON_FENCING_TOKEN"].split(":", 1)[1])
    )
    assert ask(client, {**busy, "FLEETCRON_CLAIM_URL": before_shards}) == (200, "live")
    assert ask(client, idle) == (410, "finished")
    cluster.takeover(b.app, SYSTEM, b.node, ENDPOINT, confirm_fenced=True)
    assert ask(client, busy) == (410, "superseded")


def test_a_claim_past_its_deadline_is_expired(
    alpha_and_beta: tuple[ClusterNode, ClusterNode], client: TestClient, clock: FakeClock
) -> None:
    a, _ = alpha_and_beta
    busy = claimed(a, clock)["busy"]
    assert ask(client, busy) == (200, "live")
    with a.app.db.session() as session:
        session.execute(text("UPDATE execution_claims SET deadline_at = now() - interval '1s'"))
    assert ask(client, busy) == (410, "expired")


def test_only_the_runs_own_secret_opens_its_claim(
    alpha_and_beta: tuple[ClusterNode, ClusterNode], client: TestClient, clock: FakeClock
) -> None:
    a, _ = alpha_and_beta
    env = claimed(a, clock)
    busy, idle = env["busy"], env["idle"]
    path = urlsplit(busy["FLEETCRON_CLAIM_URL"]).path

    assert client.get(path).status_code == 401
    assert ask(client, busy, idle["FLEETCRON_CLAIM_SECRET"])[0] == 401
    assert ask(client, busy, "0" * 64)[0] == 401
    assert client.get("/api/v1/claims/not-a-token").status_code == 422
    # The control: the same request with the run's own secret is answered.
    assert ask(client, busy) == (200, "live")


def test_a_forged_token_learns_nothing_about_other_claims(
    alpha_and_beta: tuple[ClusterNode, ClusterNode], client: TestClient, clock: FakeClock
) -> None:
    """A token naming another run's claim, a claim that does not exist, or the run's own
    claim under another generation: refused alike, with no state in the answer."""
    a, _ = alpha_and_beta
    env = claimed(a, clock)
    busy, idle = env["busy"], env["idle"]
    shard, generation, busy_claim = busy["FLEETCRON_FENCING_TOKEN"].split(":")
    idle_claim = idle["FLEETCRON_FENCING_TOKEN"].split(":")[2]
    headers = {SECRET_HEADER: busy["FLEETCRON_CLAIM_SECRET"]}
    answers = {
        name: client.get(f"/api/v1/claims/{token}", headers=headers)
        for name, token in {
            "another run's claim": f"{shard}:{generation}:{idle_claim}",
            "a claim that does not exist": f"{shard}:{generation}:{int(busy_claim) + 1000}",
            "its own claim, another generation": f"{shard}:{int(generation) + 1}:{busy_claim}",
        }.items()
    }
    codes = {name: response.status_code for name, response in answers.items()}
    # Another claim (existing or not) is refused before the database is read: one answer.
    assert codes == {
        "another run's claim": 401,
        "a claim that does not exist": 401,
        "its own claim, another generation": 404,
    }
    for response in answers.values():
        body = response.json()
        assert "state" not in body and "deadline_at" not in body, body
    # The control: the run's own token is answered, with its state.
    assert ask(client, busy) == (200, "live")

