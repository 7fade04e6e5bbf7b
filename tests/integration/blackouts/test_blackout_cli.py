"""`fleetcron blackout ...` through the real click group: windows added, listed, shown,
changed and lifted, audited with the author and reason; bad input exits 2 naming the
field, with nothing saved. The CLI reads the real clock, so the windows are in 2030."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.blackout_cmd import blackout
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Blackout

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

ONE_OFF = ["--start", "2030-03-02 22:00", "--end", "2030-03-03 02:00"]


@pytest.fixture(autouse=True)
def environment(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)
    admin = Actor("admin", "admin")
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL, labels=["rack=r12"]))
    jobs.add_job(app, admin, "backup", JobSpec("0 2 * * *", "backup"), target="web1")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run_cli(blackout, list(args))
    out, err = capsys.readouterr()
    return code, out, err


def windows(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(Blackout)) or 0)


def add(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run(capsys, "add", "--name", "patch", "--reason", "kernel", *args)


def test_a_window_is_added_listed_shown_and_lifted_with_its_audit(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = add(capsys, "--selector", "rack=r12", "--zone", "Europe/Warsaw", *ONE_OFF)
    assert code == 0, err
    assert out.startswith('blackout window #1 "patch" added: selector=rack=r12, ')
    assert "2030-03-02 22:00 to 2030-03-03 02:00 (Europe/Warsaw)" in out

    [listed] = json.loads(run(capsys, "list", "--json")[1])
    assert (listed["scope"], listed["reason"], listed["active"]) == (
        "selector=rack=r12",
        "kernel",
        True,
    )
    assert "2030-03-03 02:00" in run(capsys, "show", "1")[1]

    code, out, _ = run(capsys, "lift", "1", "--reason", "done early")
    assert (code, out.strip()) == (0, 'blackout window #1 "patch" lifted')
    assert json.loads(run(capsys, "list", "--json")[1]) == []
    [ended] = json.loads(run(capsys, "list", "--all", "--json")[1])
    assert ended["lifted_by"] == "admin" and ended["active"] is False

    with app.db.read() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action.like("blackout.%")).order_by(AuditEvent.id)
        ).all()
    assert [(e.action, e.actor, e.detail["reason"]) for e in events] == [
        ("blackout.add", "admin", "kernel"),
        ("blackout.lift", "admin", "done early"),
    ]


def test_a_weekly_window_and_an_overlap_note(app: App, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = add(capsys, "--job", "backup", "--weekly", "sat,sun 22:00", "--duration", "4h")
    assert code == 0 and "for 4:00:00 (UTC)" in out

    assert add(capsys, "--job", "backup", *ONE_OFF)[0] == 2  # the name is in use
    code, _, _ = run(capsys, "add", "--name", "a", "--reason", "r", "--job", "backup", *ONE_OFF)
    code, out, _ = run(
        capsys,
        "add",
        "--name",
        "b",
        "--reason",
        "r",
        "--job",
        "backup",
        "--start",
        "2030-03-03 01:00",
        "--duration",
        "2h",
    )
    assert code == 0 and "note: it overlaps window(s) #2" in out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--job", "nosuch", *ONE_OFF], "job"),
        (["--target", "nosuch", *ONE_OFF], "target"),
        (["--selector", "rack=r99", *ONE_OFF], "selector"),
        (["--job", "backup", "--zone", "Europe/Warsw", *ONE_OFF], "zone"),
        (["--job", "backup", "--start", "2030-03-03 02:00", "--end", "2030-03-02 22:00"], "end"),
        (["--job", "backup", "--start", "2026-03-01 02:00", "--end", "2026-03-01 03:00"], "end"),
        (["--job", "backup", "--start", "tonight", "--end", "2030-03-02 22:00"], "start"),
        (["--job", "backup", "--start", "2030-03-02 22:00"], "end"),
        (["--job", "backup", "--cron", "0 25 * * *", "--duration", "1h"], "hour"),
        (["--job", "backup", "--weekly", "caturday 22:00", "--duration", "1h"], "weekly"),
        (["--job", "backup", "--cron", "0 * * * *", "--duration", "1h"], "duration"),
        (["--job", "backup", "--cron", "0 * * * *"], "duration"),
        ([*ONE_OFF], "job"),
    ],
)
def test_a_bad_window_exits_2_naming_the_field(
    app: App, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    code, _, err = add(capsys, *args)

    assert code == 2, err
    assert field in err
    assert windows(app) == 0


def test_lifting_what_does_not_exist_or_has_ended_exits_2(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "lift", "42", "--reason", "x")
    assert code == 2 and "blackout window 42 does not exist" in err

    add(capsys, "--job", "backup", *ONE_OFF)
    run(capsys, "lift", "1", "--reason", "x")
    code, _, err = run(capsys, "lift", "1", "--reason", "again")
    assert code == 2 and "no longer in force" in err


def test_a_viewer_may_list_but_not_add(app: App, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = add(capsys, "--job", "backup", *ONE_OFF, "--as", "victor")
    assert code != 0 and "may not add blackout windows" in err
    assert windows(app) == 0
    assert run(capsys, "list", "--as", "victor")[0] == 0
