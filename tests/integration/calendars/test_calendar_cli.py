"""`fleetcron calendar ...` and the calendar options of `cron next` through the real
click groups: calendars added by hand and imported from an .ics file, shown, refused
when in use; bad input exits 2 naming the field, with nothing saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.calendar_cmd import calendar
from fleetcron.cli.cron_cmd import cron
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import CalendarRow, Job

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

HOLIDAYS_ICS = b"""BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VEVENT\r
UID:1\r
SUMMARY:Christmas\r
DTSTART;VALUE=DATE:20301224\r
DTEND;VALUE=DATE:20301227\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:2\r
SUMMARY:New Year\r
DTSTART;VALUE=DATE:20310101\r
END:VEVENT\r
END:VCALENDAR\r
"""


@pytest.fixture(autouse=True)
def environment(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)
    admin = Actor("admin", "admin")
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL))
    jobs.add_job(app, admin, "backup", JobSpec("0 2 * * *", "backup"), target="web1")


def run(capsys: pytest.CaptureFixture[str], group: object, *args: str) -> tuple[int, str, str]:
    code = run_cli(group, list(args))  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    return code, out, err


def calendars(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(CalendarRow)) or 0)


@pytest.fixture
def ics(tmp_path: Path) -> Path:
    path = tmp_path / "holidays.ics"
    path.write_bytes(HOLIDAYS_ICS)
    return path


def test_business_days_from_an_ics_file_shape_cron_next(
    app: App, capsys: pytest.CaptureFixture[str], ics: Path
) -> None:
    code, out, err = run(capsys, calendar, "import", "holidays", str(ics))
    assert (code, out.strip()) == (0, "calendar holidays imported: 4 date(s)"), err
    code, out, _ = run(
        capsys, calendar, "add", "business-days", "--weekdays", "mon-fri", "--except", "holidays"
    )
    assert (code, out.strip()) == (
        0,
        "calendar business-days added: 0 date(s), mon,tue,wed,thu,fri except holidays",
    )

    code, out, err = run(
        capsys,
        cron,
        "next",
        "0 2 * * *",
        "--from",
        "2030-12-23T00:00:00+00:00",
        "--timezone",
        "UTC",
        "--run-only-on",
        "business-days",
        "-n",
        "3",
    )
    assert code == 0, err
    # Mon 23rd; 24-26 are holidays; then Fri 27th and Mon 30th.
    assert out.split() == [
        "2030-12-23T02:00:00+00:00",
        "2030-12-27T02:00:00+00:00",
        "2030-12-30T02:00:00+00:00",
    ]
    code, out, _ = run(
        capsys,
        cron,
        "next",
        "0 2 * * *",
        "--from",
        "2030-12-01T00:00:00+00:00",
        "--timezone",
        "UTC",
        "--run-only-on",
        "business-days:last",
        "-n",
        "2",
    )
    assert out.split() == ["2030-12-31T02:00:00+00:00", "2031-01-31T02:00:00+00:00"]


def test_a_calendar_a_job_names_cannot_be_removed(
    app: App, capsys: pytest.CaptureFixture[str], ics: Path
) -> None:
    run(capsys, calendar, "import", "holidays", str(ics))
    jobs.edit_job(app, Actor("admin", "admin"), "backup", never_on="holidays")

    code, _, err = run(capsys, calendar, "remove", "holidays")
    assert code == 2 and "still used by job backup" in err
    [listed] = json.loads(run(capsys, calendar, "list", "--json")[1])
    assert listed["used_by"] == ["job backup"]

    jobs.edit_job(app, Actor("admin", "admin"), "backup", never_on="")
    assert run(capsys, calendar, "remove", "holidays")[0] == 0
    assert calendars(app) == 0


def test_a_job_naming_an_unknown_calendar_is_refused(app: App) -> None:
    from fleetcron.errors import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        jobs.edit_job(app, Actor("admin", "admin"), "backup", run_only_on="nosuch:last")
    assert caught.value.field == "run_only_on"
    with app.db.read() as session:
        assert session.scalar(select(Job.run_only_on)) == ""


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["add", "Bad Name", "--date", "2030-01-01"], "name"),
        (["add", "x", "--date", "2030-13-01"], "dates"),
        (["add", "x"], "dates"),
        (["add", "x", "--weekdays", "funday"], "weekdays"),
        (["add", "x", "--weekdays", "mon-fri", "--except", "nosuch"], "except"),
    ],
)
def test_a_bad_calendar_exits_2_naming_the_field(
    app: App, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    code, _, err = run(capsys, calendar, *args)
    assert code == 2, err
    assert field in err
    assert calendars(app) == 0


def test_a_file_that_does_not_parse_is_refused_naming_file(
    app: App, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.ics"
    broken.write_bytes(HOLIDAYS_ICS.replace(b"BEGIN:VEVENT", b"BEGIN:VEVENT\r\nDTSTART:garbage", 1))
    code, _, err = run(capsys, calendar, "import", "holidays", str(broken))
    assert code == 2 and "file:" in err, err
    code, _, err = run(capsys, calendar, "import", "holidays", str(tmp_path / "missing.ics"))
    assert code == 2 and "file" in err
    assert calendars(app) == 0
