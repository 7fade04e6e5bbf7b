"""The shards and members as the API, the cluster page, the metrics and the CLI show them,
on a standalone node (SQLite: one shard; PostgreSQL: the default 64, all this node's). The
figures per shard on a 4-shard PostgreSQL cluster are tests/integration/cluster/
test_shard_view.py's."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from cli_env import run_in_process
from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, App
from fleetcron.coordination.shard_rows import DEFAULT_SHARDS
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import ShardPin
from integration.web.conftest import API, error_of, log_in, new_client


@pytest.fixture
def in_flight(app: App, clock: FakeClock) -> int:
    """Two targets and one run executing on box; box's shard."""
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "tick", JobSpec("* * * * *", "true"), target="box")
    clock.advance(seconds=31)
    [dispatch] = RunStore(app.db, node="standalone").claim_due(clock.now).dispatches
    return dispatch.shard


def shard_count_of(app: App) -> int:
    return 1 if app.db.dialect == "sqlite" else DEFAULT_SHARDS


def test_the_api_shows_every_shard_with_its_targets_and_the_run(
    app: App, in_flight: int, client: TestClient, as_viewer: dict[str, str]
) -> None:
    body = client.get(f"{API}/cluster/shards", headers=as_viewer).json()

    assert (body["count"], body["this_node"]) == (shard_count_of(app), None)
    assert [s["shard"] for s in body["shards"]] == list(range(shard_count_of(app)))
    assert sum(s["targets"] for s in body["shards"]) == 2
    assert {s["shard"]: s["running"] for s in body["shards"] if s["running"]} == {in_flight: 1}
    assert client.get(f"{API}/cluster/members", headers=as_viewer).json() == []


def test_the_api_refuses_a_caller_without_credentials(client: TestClient) -> None:
    answer = client.get(f"{API}/cluster/shards")

    assert answer.status_code == 401 and error_of(answer)["message"]


def test_the_cluster_page_has_a_row_per_shard_and_says_no_member_is_registered(
    in_flight: int, app: App
) -> None:
    with new_client(app) as browser:
        log_in(browser, "viewer")
        page = browser.get("/cluster").text

    assert page.count("<tr data-shard=") == shard_count_of(app)
    start = page.index(f'<tr data-shard="{in_flight}">')
    cells = page[start : page.index("</tr>", start)].split("<td>")[1:]
    # shard, owner, generation, lease, targets, running, waiting
    assert [c.split("</td>")[0] for c in cells][-2:] == ["1", "0"]
    assert 'data-empty="members"' in page


def test_the_metrics_show_each_shards_generation_runs_and_ownership(
    app: App, in_flight: int, client: TestClient
) -> None:
    scraped = client.get("/metrics").text

    assert f'fleetcron_shard_runs_in_flight{{shard="{in_flight}"}} 1.0' in scraped
    assert scraped.count("fleetcron_shard_runs_in_flight{") == shard_count_of(app)
    assert sum(" 1.0" in line for line in scraped.splitlines() if "runs_in_flight{" in line) == 1
    assert f'fleetcron_shard_owned{{shard="{in_flight}"}} 1.0' in scraped
    assert f'fleetcron_shard_generation{{shard="{in_flight}"}}' in scraped
    # One owner (no members placement): no shard is placed elsewhere.
    assert f'fleetcron_shard_misplaced{{shard="{in_flight}"}} 0.0' in scraped


def test_the_cli_prints_the_shards_as_a_table_and_as_json(
    in_flight: int, app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    table = run_in_process(app, monkeypatch, capsys, "cluster", "shards")
    as_json = run_in_process(app, monkeypatch, capsys, "cluster", "shards", "--json")
    listed = run_in_process(app, monkeypatch, capsys, "cluster", "members", "--json")

    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "shard" in line)
    assert "owner" in header and "targets" in header and "running" in header
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.stdout.splitlines()]
    [row] = [c for c in cells if c and c[0] == str(in_flight)]
    assert row[1] == "(none)" and row[5:] == ["1", "0", "", ""]  # no pin, no placement
    assert len([c for c in cells if c and c[0].isdigit()]) == shard_count_of(app)
    shards = json.loads(as_json.stdout)["shards"]
    assert {s["shard"]: s["running"] for s in shards if s["running"]} == {in_flight: 1}
    assert json.loads(listed.stdout) == []


def test_the_cluster_page_shows_a_pin_and_why_it_is_ignored(in_flight: int, app: App) -> None:
    """A pin written as ``cluster shard move`` writes it (tests/integration/cluster/
    test_shard_pins.py moves shards with it), here to a node the registry does not know."""
    with app.db.session() as session:
        session.add(ShardPin(shard=0, node_id="feedface", pinned_by="ops", pinned_at=app.now()))

    with new_client(app) as browser:
        log_in(browser, "viewer")
        page = browser.get("/cluster").text

    start = page.index('<tr data-shard="0">')
    row = page[start : page.index("</tr>", start)]
    assert 'data-pin="feedface"' in row
    assert "pin ignored: the node is not registered" in row
    assert page.count("data-pin=") == 1  # negative control: the other shards show none
