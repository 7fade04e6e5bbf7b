"""Health under a silence: the failure is still listed and still counts (``ok`` false,
``fleetcron health`` exits 1), marked silenced; the count of silenced problems is whole.
Real scheduler on a fake executor and a real database, fake clock ; the command
shows the same summary (the last test)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from cli_env import point_the_cli_at
from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.silences import SilenceSpec, add_silence
from fleetcron.services.health import report
from fleetcron.services.health.failures import GroupedProblem
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from integration.notify.scenario import FLEET, add_fleet, drive, failing

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


async def four_failing(
    app: App, operator: Actor, scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, FLEET[:4])
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = failing()
    await drive(app, scheduler, clock, minutes=2)


def marked(summary: report.HealthSummary) -> dict[str, bool]:
    return {g.target: g.silenced for g in summary.grouped if g.kind == "failing"}


async def test_a_silenced_failure_is_listed_marked_and_still_counts(
    app: App,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
) -> None:
    await four_failing(app, operator, fake_scheduler, fake, clock)
    add_silence(
        app, operator, SilenceSpec(job="backup", target="web01", duration_s=3600, reason="swap")
    )

    summary = report.summary(app, operator)
    assert marked(summary) == {"web00": False, "web01": True, "web02": False, "web03": False}
    assert [p.silenced for p in summary.problems if p.target == "web01"] == [True]
    assert (summary.silenced, summary.problem_count, summary.ok) == (1, 4, False)
    assert summary.as_dict()["silenced"] == 1

    # The JSON of `fleetcron health --json` and /api/v1/health carries the marks.
    body = summary.as_dict()
    assert body["ok"] is False
    assert [g["target"] for g in body["grouped"] if g["silenced"]] == ["web01"]


async def test_without_the_silence_nothing_is_marked(
    app: App,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
) -> None:
    # Negative control: the marks and the count come from the silence.
    await four_failing(app, operator, fake_scheduler, fake, clock)

    summary = report.summary(app, operator)
    assert marked(summary) == dict.fromkeys(FLEET[:4], False)
    assert summary.silenced == 0


def test_the_command_marks_a_silenced_line_and_exits_1(
    app: App, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    point_the_cli_at(app, monkeypatch)
    line = GroupedProblem("failing", "web01", "backup", ("backup",), None, "exit 3")
    found = report.HealthSummary(
        checked_at=datetime(2026, 3, 2, tzinfo=UTC),
        grouped=[replace(line, silenced=True), replace(line, target="web02")],
        groups=[report.Group("failing", 2, 2, 2, 0, None)],
        silenced=1,
    )
    monkeypatch.setattr(report, "summary", lambda *args, **kwargs: found)

    with pytest.raises(SystemExit) as exited:  # the console script's exit status
        run_cli(cli, ["health"])
    code = exited.value.code
    out = capsys.readouterr().out
    assert code == 1  # a silence mutes messages, not health
    assert "2 job × target; 1 silenced" in out
    assert ["web01" in row for row in out.splitlines() if "(silenced)" in row] == [True]
