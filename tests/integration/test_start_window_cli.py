"""The start window in the CLI: `schedule upcoming` has the one *starts between* column (the
first and last start of each fire, as its JSON gives them from ``core/start_window.py``), and
`job show` gives each target's start in the whole window, spread offset plus jitter."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from cli_env import point_the_cli_at
from fleetcron.app import SYSTEM, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.start_window import start_window
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Target

NAMES = ("east", "west", "north")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_cli_shows_the_start_window_as_the_rule_gives_it(
    app: App, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in NAMES:
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec("0 * * * *", "echo w", timezone="UTC", spread_s=120, jitter_s=30)
    jobs.add_job(app, SYSTEM, "windowed", spec, bulk=True)
    jobs.add_job(app, SYSTEM, "plain", JobSpec("0 * * * *", "echo p", timezone="UTC"), bulk=True)
    point_the_cli_at(app, monkeypatch)
    monkeypatch.setenv("COLUMNS", "250")

    def run(*args: str) -> str:
        assert run_cli(cli, list(args)) == 0
        return capsys.readouterr().out

    fires = json.loads(run("schedule", "upcoming", "--hours", "3", "--job", "windowed", "--json"))
    table = run("schedule", "upcoming", "--hours", "3", "--job", "windowed")
    assert "starts between" in table and "spread" not in table
    for fire in fires["fires"]:
        first, last = (datetime.fromisoformat(fire["starts"][k]) for k in ("first", "last"))
        assert first < last
        assert f"{first:%H:%M:%S}-{last:%H:%M:%S}" in table
    # The control: a job without a window has nothing in the column.
    plain = run("schedule", "upcoming", "--hours", "3", "--job", "plain")
    assert "starts between" in plain and ":00-" not in plain

    shown = run("job", "show", "windowed")
    assert "starts after (s)" in shown
    job = jobs.show_job(app, SYSTEM, "windowed")
    with app.db.read() as session:
        ids = {t.name: t.id for t in session.query(Target)}
    for name in NAMES:
        window = start_window(job.id, ids[name], spread_s=120, jitter_s=30)
        assert window.jitter_offset_s > 0  # the whole window, not the spread offset alone
        assert f"{window.delay_s:.3f}" in shown, name
