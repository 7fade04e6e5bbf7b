"""`fleetcron health` through the real click group, on a migrated SQLite database.

The CLI is a thin adapter over ``services.health`` (tested on both databases), so these run
on SQLite only. The command reads its database from the environment and the real clock, so
the jobs are paused after their runs are recorded: their next slots, in the fixture's past,
would otherwise be reported late.
"""

from __future__ import annotations

import json

import pytest

from cli_env import point_the_cli_at
from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.reach import Reach
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.ssh_probe import ProbeResult
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.reach import record_probes
from integration.monitoring.test_health_by_cause import REFUSED, every_minute_on, record_slot
from integration.test_backup import ssh_private_key

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

NAMES = [f"job{i}" for i in range(1, 6)]


@pytest.fixture(autouse=True)
def environment(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)
    monkeypatch.setenv("COLUMNS", "250")  # one table row per line, whatever rich assumes


@pytest.fixture
def fleet(app: App, clock: FakeClock) -> None:
    """pbx: 5 jobs refused twice (an outage); box: one job whose command exits 1."""
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    every_minute_on(app, "pbx", *NAMES)
    jobs.add_job(app, SYSTEM, "broken", JobSpec("* * * * *", "exit 1"), target="box")
    outcomes = {"broken": ("failed", None, 0), **{n: ("connect_error", REFUSED, 0) for n in NAMES}}
    clock.advance(seconds=31)
    record_slot(app, clock, outcomes)
    clock.advance(minutes=1)
    record_slot(app, clock, outcomes)
    for name in [*NAMES, "broken"]:
        jobs.set_enabled(app, SYSTEM, name, False)


def health(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit code and stdout; the command raises SystemExit(1) when something needs attention
    (the console script's exit status)."""
    try:
        code = run_cli(cli, ["health", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, _ = capsys.readouterr()
    return code, out


def test_the_text_view_has_one_line_per_unreachable_target_and_per_command_failure(
    fleet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = health(capsys)

    assert code == 1
    assert "2 problem(s) (6 job × target)" in out
    [pbx] = [line for line in out.splitlines() if "unreachable" in line]
    assert "pbx" in pbx and "5 job(s)" in pbx and REFUSED in pbx
    assert "2026-03-02 09:01:01" in pbx  # the outage began with the first refusal
    [box] = [line for line in out.splitlines() if "broken" in line]
    assert "failing" in box and "last run failed (exit 1); 2 failure(s) in a row" in box
    assert sum("job3" in line for line in out.splitlines()) == 1  # named in pbx's line only


def test_json_keeps_every_job_and_target_and_adds_the_grouping(
    fleet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = health(capsys, "--json")

    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    assert sorted((p["job"], p["target"], p["status"]) for p in data["problems"]) == sorted(
        [("broken", "box", "failed"), *((n, "pbx", "connect_error") for n in NAMES)]
    )
    for problem in data["problems"]:
        assert problem["since"] == "2026-03-02T09:01:01+00:00"
        assert problem["last_failure_at"].startswith("2026-03-02T09:02:01")
        assert problem["failures"] == 2
    assert [(g["kind"], g["target"], g["job"], g["jobs"]) for g in data["grouped"]] == [
        ("unreachable", "pbx", None, NAMES),
        ("failing", "box", "broken", ["broken"]),
    ]
    assert data["grouped"][0]["error"] == REFUSED


def test_the_exit_code_is_zero_when_nothing_fails(
    app: App, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    every_minute_on(app, "pbx", "fine")
    clock.advance(seconds=31)
    record_slot(app, clock, {"fine": ("connect_error", REFUSED, 0)})
    clock.advance(minutes=1)
    record_slot(app, clock, {"fine": ("succeeded", None, 0)})  # reached again: recovered
    jobs.set_enabled(app, SYSTEM, "fine", False)

    code, out = health(capsys)

    assert (code, out) == (
        0,
        "ok: nothing failing, late or stuck, no host unreachable (0 failure(s) in 24 h)\n",
    )


def test_per_target_health_of_a_job_says_since_when_it_fails(
    fleet: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = health(capsys, "--job", "job1", "--json")

    assert code == 1
    [row] = json.loads(out)
    assert (row["target"], row["last_status"], row["consecutive_failures"]) == (
        "pbx",
        "connect_error",
        2,
    )
    assert row["failing_since"] == "2026-03-02T09:01:01+00:00"


def test_a_host_the_probe_found_down_makes_the_exit_code_one(
    app: App, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing failing, late or stuck, but the newest probe of an SSH target was refused:
    health lists the host and exits 1; once a probe reaches it, 0 again (the control)."""
    added = targets.add_target(
        app,
        SYSTEM,
        TargetSpec(
            "db1",
            host="192.0.2.10",
            user="ops",
            private_key=ssh_private_key(),
            host_key="ssh-ed25519 "
            "AAAAC3NzaC1lZDI1NTE5AAAAIHkCY9H2yZ1aBeq1Gx7pCD3uNcD9S7i2nV3Cz7pZr5xJ",
        ),
        verify=False,
    )
    refused = ProbeResult(added.target.id, Reach.REFUSED, "connection refused: db1:22", 0.01)
    record_probes(app, [refused], clock.now)

    code, out = health(capsys)

    assert code == 1
    assert "1 host(s) a new connection cannot reach" in out
    assert "db1" in out and "refused" in out and "connection refused: db1:22" in out

    record_probes(app, [ProbeResult(added.target.id, Reach.REACHABLE, None, 0.01)], clock.now)
    assert health(capsys)[0] == 0
