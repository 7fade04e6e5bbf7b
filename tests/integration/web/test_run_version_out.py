"""The version of the job's definition a run ran, as the API and the CLI give it (the run
page links to it already), on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from cli_env import point_the_cli_at
from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Run
from integration.web.conftest import API

ADMIN = Actor("admin", "admin")


@pytest.fixture
def two_runs(app: App, clock: FakeClock) -> list[int]:
    """A run of version 1 of job tick, then one of version 2."""
    targets.add_target(app, ADMIN, TargetSpec("pbx1", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "tick", JobSpec("* * * * *", "true"), target="pbx1")
    store = RunStore(app.db, node="test", clock=clock)
    clock.advance(minutes=1)
    store.claim_due(clock.now)
    jobs.edit_job(app, ADMIN, "tick", command="echo changed")
    clock.advance(minutes=1)
    store.claim_due(clock.now)
    with app.db.read() as session:
        return list(session.scalars(select(Run.id).order_by(Run.scheduled_for)))


def test_the_api_gives_the_version_a_run_ran(
    client: TestClient, as_viewer: dict[str, str], two_runs: list[int]
) -> None:
    found = [client.get(f"{API}/runs/{run_id}", headers=as_viewer) for run_id in two_runs]

    assert [r.status_code for r in found] == [200, 200]
    assert [r.json()["job_version"] for r in found] == [1, 2]
    listed = client.get(f"{API}/runs", params={"job": "tick"}, headers=as_viewer).json()
    assert sorted(item["job_version"] for item in listed["items"]) == [1, 2]


def test_runs_show_gives_the_version_a_run_ran(
    app: App,
    two_runs: list[int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_the_cli_at(app, monkeypatch)

    shown = []
    for run_id in two_runs:
        assert run_cli(cli, ["runs", "show", str(run_id), "--json"]) == 0
        shown.append(json.loads(capsys.readouterr().out)["job_version"])
    assert run_cli(cli, ["runs", "show", str(two_runs[1])]) == 0

    assert shown == [1, 2]
    assert "job_version:   2" in capsys.readouterr().out
