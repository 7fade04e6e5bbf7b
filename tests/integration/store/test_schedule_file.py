"""Schedules as code on a real database (SQLite and PostgreSQL): apply, export, list."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from textwrap import dedent

import click
import pytest
from sqlalchemy import func, select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.cli.apply_cmd import apply, export, schedule
from fleetcron.cli.output import run_cli
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import PermissionDenied
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.schedule_file import apply_schedule, export_schedule, list_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Assignment, AuditEvent, Job

FLEET = dedent(
    """\
    version: 1
    jobs:
      - name: reload
        bulk: true
        selector: role=pbx
        disabled_on: [pbx3]
        schedule: "0 2 * * *"
        timezone: Europe/Berlin
        command: /usr/sbin/fwconsole reload
        notes: nightly reload
      - name: backup-acme
        target: acme-app1
        schedule: "30 3 * * 0"
        command: php artisan backup:run
        timeout: 3600
    """
)


@pytest.fixture
def fleet(app: App, admin: Actor) -> App:
    """pbx1-3 (role=pbx) and acme-app1, all paired local targets."""
    for name in ("pbx1", "pbx2", "pbx3"):
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL, labels=["role=pbx"]))
    targets.add_target(
        app, admin, TargetSpec("acme-app1", TargetKind.LOCAL, labels=["client=acme"])
    )
    return app


def assignments(app: App) -> dict[tuple[str, str], tuple[bool, datetime | None]]:
    """(job, target) -> (enabled, next fire), for every assignment."""
    with app.db.read() as session:
        rows = session.scalars(select(Assignment))
        return {(a.job.name, a.target.name): (a.enabled, a.next_fire_at) for a in rows}


def row_counts(app: App) -> tuple[int, int, int]:
    """How many jobs, assignments and audit events there are."""
    with app.db.read() as session:

        def count(table: type[Job | Assignment | AuditEvent]) -> int:
            return session.scalar(select(func.count()).select_from(table)) or 0

        return count(Job), count(Assignment), count(AuditEvent)


def audit_rows(app: App) -> list[tuple[str, str, str | None, bool]]:
    with app.db.read() as session:
        return [
            (e.actor, e.action, e.job_name, e.success)
            for e in session.scalars(select(AuditEvent).order_by(AuditEvent.id))
            if e.action.startswith(("job.", "schedule."))
        ]


def test_apply_creates_bulk_and_individual_jobs(fleet: App, operator: Actor) -> None:
    result = apply_schedule(fleet, operator, FLEET)

    assert result.applied
    assert [(c.kind, c.name) for c in result.plan.changes] == [
        ("create", "reload"),
        ("create", "backup-acme"),
    ]
    enabled = {pair: flag for pair, (flag, _) in assignments(fleet).items()}
    assert enabled == {
        ("reload", "pbx1"): True,
        ("reload", "pbx2"): True,
        ("reload", "pbx3"): False,
        ("backup-acme", "acme-app1"): True,
    }
    backup = jobs.show_job(fleet, operator, "backup-acme")
    assert (backup.timeout_s, backup.timezone, backup.created_by) == (3600, "UTC", "olivia")


def test_applying_the_same_file_twice_changes_nothing(fleet: App, operator: Actor) -> None:
    apply_schedule(fleet, operator, FLEET)
    before = (assignments(fleet), row_counts(fleet))

    again = apply_schedule(fleet, operator, FLEET)

    assert again.plan.empty and not again.applied
    assert (assignments(fleet), row_counts(fleet)) == before


def test_a_changed_schedule_reaches_every_target_of_a_bulk_job(
    fleet: App, operator: Actor, clock: FakeClock
) -> None:
    apply_schedule(fleet, operator, FLEET)
    clock.advance(hours=1)

    result = apply_schedule(fleet, operator, FLEET.replace('"0 2 * * *"', '"30 4 * * *"'))

    (change,) = result.plan.changes
    assert [(f.field, f.old, f.new) for f in change.fields] == [
        ("schedule", "0 2 * * *", "30 4 * * *")
    ]
    # The clock stands at 2026-03-02 10:00:30 UTC; 04:30 in Berlin (UTC+1) is 03:30 UTC.
    expected = datetime(2026, 3, 3, 3, 30, tzinfo=UTC)
    fires = {pair: fire for pair, (_, fire) in assignments(fleet).items() if pair[0] == "reload"}
    assert fires == {("reload", t): expected for t in ("pbx1", "pbx2", "pbx3")}


def test_disabled_on_pauses_and_resumes_targets(fleet: App, operator: Actor) -> None:
    apply_schedule(fleet, operator, FLEET)

    apply_schedule(fleet, operator, FLEET.replace("[pbx3]", "[pbx1]"))

    enabled = {t: flag for (j, t), (flag, _) in assignments(fleet).items() if j == "reload"}
    assert enabled == {"pbx1": False, "pbx2": True, "pbx3": True}


def test_an_individual_job_moves_to_another_target(fleet: App, operator: Actor) -> None:
    apply_schedule(fleet, operator, FLEET)

    apply_schedule(fleet, operator, FLEET.replace("target: acme-app1", "target: pbx2"))

    pairs = {pair for pair in assignments(fleet) if pair[0] == "backup-acme"}
    assert pairs == {("backup-acme", "pbx2")}
    assert jobs.show_job(fleet, operator, "backup-acme").target == "pbx2"


def test_prune_deletes_the_jobs_the_file_does_not_declare(fleet: App, operator: Actor) -> None:
    apply_schedule(fleet, operator, FLEET)
    jobs.add_job(fleet, operator, "by-hand", JobSpec("@daily", "uptime"), target="pbx1")
    only_reload = FLEET.split("  - name: backup-acme")[0]

    kept = apply_schedule(fleet, operator, only_reload)
    pruned = apply_schedule(fleet, operator, only_reload, prune=True)

    assert kept.plan.empty and kept.plan.kept == ("backup-acme", "by-hand")
    assert [(c.kind, c.name) for c in pruned.plan.changes] == [
        ("delete", "backup-acme"),
        ("delete", "by-hand"),
    ]
    assert [v.name for v in jobs.list_jobs(fleet, operator)] == ["reload"]


def test_a_dry_run_writes_nothing(fleet: App, operator: Actor) -> None:
    before = row_counts(fleet)

    result = apply_schedule(fleet, operator, FLEET, dry_run=True, prune=True)

    assert result.plan.count("create") == 2 and not result.applied
    assert row_counts(fleet) == before


def test_an_error_in_the_third_job_leaves_the_first_two_unapplied(
    fleet: App, operator: Actor
) -> None:
    third = '  - name: broken\n    target: pbx1\n    schedule: "60 * * * *"\n    command: x\n'
    before = row_counts(fleet)

    with pytest.raises(ScheduleFileError) as caught:
        apply_schedule(fleet, operator, FLEET + third, source="fleet.yaml")

    assert str(caught.value) == "fleet.yaml:18: jobs[2].schedule: minute: 60 is out of range 0-59"
    jobs_, assignments_, audit = row_counts(fleet)
    assert (jobs_, assignments_) == before[:2]
    # The refused attempt leaves its trace in the audit log, and nothing else.
    assert audit == before[2] + 1
    assert audit_rows(fleet)[-1] == ("olivia", "schedule.apply", None, False)


def test_an_unknown_target_is_an_error_naming_line_and_field(fleet: App, operator: Actor) -> None:
    text = FLEET.replace("target: acme-app1", "target: acme-app9").replace("[pbx3]", "[pbx9]")

    with pytest.raises(ScheduleFileError) as caught:
        apply_schedule(fleet, operator, text)

    assert [p.render("f") for p in caught.value.problems] == [
        "f:6: jobs[0].disabled_on: target pbx9 does not exist",
        "f:12: jobs[1].target: target acme-app9 does not exist (a schedule file refers to "
        "targets; add them with `fleetcron target add`)",
    ]
    assert jobs.list_jobs(fleet, operator) == []


def test_a_duplicate_registration_is_refused_naming_both_jobs_and_the_target(
    fleet: App, operator: Actor
) -> None:
    jobs.add_job(
        fleet,
        operator,
        "reload-acme",
        JobSpec("0 5 * * *", "php artisan backup:run  "),
        target="acme-app1",
    )

    with pytest.raises(ScheduleFileError) as caught:
        apply_schedule(fleet, operator, FLEET)

    assert str(caught.value) == (
        "schedule.yaml:14: jobs[1].command: duplicate registration: jobs backup-acme and "
        "reload-acme both run 'php artisan backup:run' on target acme-app1; remove one, "
        "or set allow_duplicate: true on one of them"
    )
    assert [v.name for v in jobs.list_jobs(fleet, operator)] == ["reload-acme"]


def test_a_duplicate_allowed_in_the_file_is_applied(fleet: App, operator: Actor) -> None:
    twice = FLEET + (
        "  - name: reload-pbx1-again\n"
        "    target: pbx1\n"
        '    schedule: "0 14 * * *"\n'
        "    command: /usr/sbin/fwconsole reload\n"
        "    allow_duplicate: true\n"
    )

    result = apply_schedule(fleet, operator, twice)

    assert result.plan.count("create") == 3


def test_export_round_trips(fleet: App, admin: Actor, operator: Actor) -> None:
    spec = JobSpec(
        "*/10 * * * *",
        "set -e\ncd /srv/app\n./housekeeping --all  ",
        timezone="America/New_York",
        notes="every ten minutes",
        timeout_s=120,
        overlap="forbid",
        catchup="latest",
        jitter_s=30,
        retries=2,
        retry_on=("failed", "timed_out"),
        retry_backoff_s=60,
    )
    jobs.add_job(fleet, operator, "housekeeping", spec, bulk=True, selector="role=pbx")
    jobs.set_enabled(fleet, operator, "housekeeping", False, target="pbx2")
    jobs.add_job(fleet, operator, "paused", JobSpec("@hourly", "true"), target="acme-app1")
    jobs.set_enabled(fleet, operator, "paused", False)
    targets.add_target(fleet, admin, TargetSpec("cold", TargetKind.LOCAL), verify=False)
    jobs.add_job(fleet, operator, "waiting", JobSpec("@daily", "true"), target="cold")
    # A duplicate made outside any file is exported as allowed, with a comment.
    jobs.add_job(fleet, operator, "all-uptime", JobSpec("@daily", "uptime"), bulk=True)
    jobs.add_job(fleet, operator, "pbx1-uptime", JobSpec("@weekly", "w"), target="pbx1")
    with fleet.db.session() as session:  # a duplicate from before the rule was enforced
        session.execute(update(Job).where(Job.name == "pbx1-uptime").values(command="uptime"))

    text = export_schedule(fleet, operator)
    result = apply_schedule(fleet, operator, text)

    # The only change: the duplicate made outside any file is now recorded as allowed.
    assert [(c.name, [f.field for f in c.fields]) for c in result.plan.changes] == [
        ("pbx1-uptime", ["allow_duplicate"])
    ]
    assert "# duplicate registration: job all-uptime runs the same command on pbx1" in text
    again = apply_schedule(fleet, operator, export_schedule(fleet, operator))
    assert again.plan.empty, again.plan


def test_schedule_list_shows_each_job_and_target_once(fleet: App, operator: Actor) -> None:
    apply_schedule(fleet, operator, FLEET)
    targets.add_target(
        fleet, Actor("admin", "admin"), TargetSpec("cold", TargetKind.LOCAL), verify=False
    )
    jobs.add_job(fleet, operator, "waiting", JobSpec("@daily", "true"), target="cold")

    entries = list_schedule(fleet, operator)

    pairs = [(e.job, e.target) for e in entries]
    assert pairs == [
        ("backup-acme", "acme-app1"),
        ("reload", "pbx1"),
        ("reload", "pbx2"),
        ("reload", "pbx3"),
        ("waiting", "cold"),
    ]
    paused = next(e for e in entries if e.target == "pbx3")
    assert (paused.enabled, paused.next_fire_at, paused.timezone) == (
        False,
        None,
        "Europe/Berlin",
    )
    assert entries[-1].paired is False


def test_each_change_is_audited_as_the_applying_user(fleet: App, operator: Actor) -> None:
    apply_schedule(fleet, operator, FLEET)
    apply_schedule(
        fleet,
        operator,
        FLEET.split("  - name: backup-acme")[0].replace("nightly reload", "nightly"),
        prune=True,
    )

    assert audit_rows(fleet) == [
        ("olivia", "job.add", "reload", True),
        ("olivia", "job.add", "backup-acme", True),
        ("olivia", "schedule.apply", None, True),
        ("olivia", "job.remove", "backup-acme", True),
        ("olivia", "job.edit", "reload", True),
        ("olivia", "schedule.apply", None, True),
    ]


def test_a_viewer_may_preview_but_not_apply(fleet: App, viewer: Actor) -> None:
    assert apply_schedule(fleet, viewer, FLEET, dry_run=True).plan.count("create") == 2

    with pytest.raises(PermissionDenied):
        apply_schedule(fleet, viewer, FLEET)

    assert jobs.list_jobs(fleet, viewer) == []


# --- the commands ------------------------------------------------------------------------


@pytest.fixture
def cli(fleet: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> click.Group:
    """The three commands in a group, on the fixture's database."""
    assert fleet.settings.database_url
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", fleet.settings.database_url)
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(tmp_path / "cli"))
    monkeypatch.setenv("FLEETCRON_LOCAL_JOB_ROLE", "operator")  # as in the fixture's settings
    group = click.Group("fleetcron")
    for command in (apply, export, schedule):
        group.add_command(command)
    return group


def test_the_commands_apply_export_and_list(
    cli: click.Group, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "schedule.yaml"
    path.write_text(FLEET)

    assert run_cli(cli, ["apply", str(path), "--as", "olivia"]) == 0
    first = capsys.readouterr().out
    assert run_cli(cli, ["apply", str(path)]) == 0
    second = capsys.readouterr().out
    assert run_cli(cli, ["export", "--output", str(tmp_path / "out.yaml")]) == 0
    assert run_cli(cli, ["apply", str(tmp_path / "out.yaml"), "--dry-run"]) == 0
    round_trip = capsys.readouterr().out
    assert run_cli(cli, ["schedule", "list", "--json"]) == 0

    assert first.splitlines()[0] == "+ job reload (bulk, selector role=pbx)"
    assert first.splitlines()[-1] == "applied"
    assert second == round_trip == "no changes\n"
    assert len(json.loads(capsys.readouterr().out)) == 4


def test_a_bad_file_exits_2_with_line_and_field(
    cli: click.Group, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "schedule.yaml"
    path.write_text(FLEET.replace("timeout: 3600", "timeout: soon"))

    assert run_cli(cli, ["apply", str(path)]) == 2

    assert capsys.readouterr().err == (
        f"error: {path}:15: jobs[1].timeout: expected an integer, got a string 'soon'\n"
    )
