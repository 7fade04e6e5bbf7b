"""`fleetcron runs list` says what a pending row waits for, as the runs page does, on
SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

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

ADMIN = Actor("admin", "admin")


def test_a_pending_row_says_it_waits_for_its_turn(
    app: App, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("alpha", "bravo"):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "wave", JobSpec("* * * * *", "true", batch="1"), bulk=True)
    jobs.add_job(app, ADMIN, "plain", JobSpec("* * * * *", "false"), bulk=True)
    clock.advance(minutes=1)
    RunStore(app.db, node="test", clock=clock).claim_due(clock.now)
    point_the_cli_at(app, monkeypatch)

    assert run_cli(cli, ["runs", "list", "--job", "wave"]) == 0
    wave = capsys.readouterr().out
    assert run_cli(cli, ["runs", "list", "--job", "plain"]) == 0
    plain = capsys.readouterr().out

    assert wave.count("pending: waits for its turn in the rollout") == 2
    assert "waits for its turn" not in plain  # negative control: queued rows of no rollout
