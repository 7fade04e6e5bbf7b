"""Blackout windows declared in a schedule file (``blackouts:``), on SQLite and PostgreSQL:
applied in the jobs' transaction (a window may cover a job declared in the same file),
exported and applied again unchanged, changed by name, a bad window refused at its line
with nothing saved, each window audited as the CLI's are."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.cli.apply_cmd import apply, describe_plan, export
from fleetcron.cli.output import run_cli
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import PermissionDenied
from fleetcron.services import schedule_file
from fleetcron.services.blackouts.windows import list_blackouts
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Blackout, Job

FILE = """version: 1
jobs:
  - name: close-books
    target: web1
    schedule: "0 2 * * *"
    command: /usr/local/bin/close-books
blackouts:
  - name: patch-night
    reason: monthly patching
    selector: rack=r1
    zone: Europe/Warsaw
    weekly: sat 22:00
    duration: 2h
    until: "2027-03-31 00:00"
  - name: year-end
    reason: books closed
    job: close-books
    start: 2026-12-31 18:00
    end: 2027-01-01 06:00
"""


@pytest.fixture
def fleet(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL, labels=["rack=r1"]))


def counts(app: App) -> tuple[int, int]:
    """How many windows and jobs there are."""
    with app.db.read() as session:
        windows = session.scalar(select(func.count()).select_from(Blackout)) or 0
        jobs = session.scalar(select(func.count()).select_from(Job)) or 0
        return windows, jobs


def test_a_window_covers_a_job_declared_in_the_same_file(
    app: App, operator: Actor, fleet: None
) -> None:
    plan = schedule_file.apply_schedule(app, operator, FILE, dry_run=True).plan
    assert describe_plan(plan)[-3:-1] == [
        "+ blackout window patch-night",
        "+ blackout window year-end",
    ]
    assert counts(app) == (0, 0)

    schedule_file.apply_schedule(app, operator, FILE)

    views = {view.name: view for view in list_blackouts(app, operator)}
    assert views["year-end"].job == "close-books"
    assert (views["year-end"].start, views["year-end"].end) == (
        "2026-12-31T18:00:00",
        "2027-01-01T06:00:00",
    )
    patch = views["patch-night"]
    assert (patch.kind, patch.cron, patch.duration_s, patch.selector) == (
        "cron",
        "0 22 * * 6",
        7200,
        "rack=r1",
    )
    assert patch.until == datetime(2027, 3, 30, 22, 0, tzinfo=UTC)  # Warsaw midnight, CEST
    with app.db.read() as session:
        events = session.execute(
            select(AuditEvent.actor, AuditEvent.action, AuditEvent.detail["via"].as_string())
            .where(AuditEvent.action.like("blackout.%"))
            .order_by(AuditEvent.id)
        ).all()
    assert [tuple(e) for e in events] == [
        ("olivia", "blackout.add", "schedule.apply"),
        ("olivia", "blackout.add", "schedule.apply"),
    ]


def test_export_writes_the_windows_back_and_applying_it_changes_nothing(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)

    exported = schedule_file.export_schedule(app, operator)

    assert "blackouts:\n  - name: patch-night\n" in exported
    assert '    cron: "0 22 * * 6"\n    duration: 2h\n' in exported
    assert schedule_file.apply_schedule(app, operator, exported).plan.empty
    assert schedule_file.apply_schedule(app, operator, FILE).plan.empty


def test_a_changed_window_is_changed_in_place_and_audited(
    app: App, operator: Actor, fleet: None
) -> None:
    schedule_file.apply_schedule(app, operator, FILE)
    before = {view.name: view.id for view in list_blackouts(app, operator)}

    plan = schedule_file.apply_schedule(
        app, operator, FILE.replace("duration: 2h", "duration: 3h")
    ).plan

    assert describe_plan(plan) == ["~ blackout window patch-night (duration_s)"]
    after = {view.name: (view.id, view.duration_s) for view in list_blackouts(app, operator)}
    assert after["patch-night"] == (before["patch-night"], 10_800)
    assert counts(app) == (2, 1)


@pytest.mark.parametrize(
    ("broken", "where"),
    [
        (
            ("zone: Europe/Warsaw", "zone: Europe/Warsav"),
            "schedule.yaml:11: blackouts[0].zone: 'Europe/Warsav' is not a known time zone",
        ),
        (
            ("duration: 2h", "duration: 2 hours"),
            "schedule.yaml:13: blackouts[0].duration: '2 hours' is not a duration",
        ),
        (
            ("end: 2027-01-01 06:00", "end: 2026-12-31 06:00"),
            "schedule.yaml:19: blackouts[1].end: 2026-12-31T06:00:00 is not after the start",
        ),
        (
            ("job: close-books", "job: close-book"),
            "schedule.yaml:17: blackouts[1].job: job close-book does not exist",
        ),
        (
            ("    reason: books closed\n", ""),
            "schedule.yaml:15: blackouts[1]: missing required key reason",
        ),
    ],
)
def test_a_bad_window_is_refused_at_its_line_with_nothing_saved(
    app: App, operator: Actor, fleet: None, broken: tuple[str, str], where: str
) -> None:
    with pytest.raises(ScheduleFileError) as caught:
        schedule_file.apply_schedule(app, operator, FILE.replace(*broken))

    assert caught.value.problems[0].render("schedule.yaml").startswith(where)
    assert counts(app) == (0, 0)


def test_a_viewer_may_plan_windows_but_not_apply_them(app: App, viewer: Actor, fleet: None) -> None:
    assert len(schedule_file.apply_schedule(app, viewer, FILE, dry_run=True).plan.blackouts) == 2

    with pytest.raises(PermissionDenied):
        schedule_file.apply_schedule(app, viewer, FILE)
    assert counts(app) == (0, 0)


@pytest.fixture
def cli(app: App, fleet: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> click.Group:
    """``apply`` and ``export`` on the fixture's database (with the real clock)."""
    assert app.settings.database_url
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", app.settings.database_url)
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(tmp_path / "cli"))
    monkeypatch.setenv("FLEETCRON_LOCAL_JOB_ROLE", "operator")
    group = click.Group("fleetcron")
    for command in (apply, export):
        group.add_command(command)
    return group


def test_the_commands_apply_and_export_windows_and_refuse_a_bad_one(
    cli: click.Group, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = FILE.replace("2026-12-31", "2040-12-31").replace("2027-01-01", "2041-01-01")
    text = text.replace("2027-03-31", "2041-03-31")
    path = tmp_path / "schedule.yaml"
    path.write_text(text.replace("duration: 2h", "duration: 2 hours"))

    assert run_cli(cli, ["apply", str(path), "--as", "olivia"]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}:13: blackouts[0].duration: '2 hours' is not a duration "
        "(e.g. 90m, 2h, 1d12h)\n"
    )

    path.write_text(text)
    assert run_cli(cli, ["apply", str(path), "--as", "olivia"]) == 0
    applied = capsys.readouterr().out.splitlines()
    assert applied[-4:] == [
        "+ blackout window patch-night",
        "+ blackout window year-end",
        "1 to create, 0 to change, 0 to delete",
        "applied",
    ]
    assert run_cli(cli, ["export", "--output", str(tmp_path / "out.yaml")]) == 0
    assert run_cli(cli, ["apply", str(tmp_path / "out.yaml"), "--dry-run"]) == 0
    assert capsys.readouterr().out == "no changes\n"
