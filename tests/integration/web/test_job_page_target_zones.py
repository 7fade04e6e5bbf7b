"""The job page, its targets API and ``job status`` give each target's next fire on the
target's own clock when the target has a zone (SQLite and PostgreSQL).

A job in the ``target`` zone fires at 02:00 on each target's wall clock; the fixture clock
starts at 2026-03-02 09:00:30 UTC, so the next fires are 02:00 of 2026-03-03 in Berlin
(01:00 UTC), New York (07:00 UTC) and Tokyo (2026-03-02 17:00 UTC), and a target without
a zone fires at 02:00 UTC (the default zone of the fixtures).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from cli_env import point_the_cli_at
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.fleet import job_page as job_fleet
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.fields import TargetChanges
from integration.web.conftest import API

Headers = dict[str, str]
JOB = "maintenance"
ZONES = {"berlin": "Europe/Berlin", "newyork": "America/New_York", "tokyo": "Asia/Tokyo"}
LOCAL_NEXT = {
    "berlin": "2026-03-03 02:00",
    "newyork": "2026-03-03 02:00",
    "tokyo": "2026-03-03 02:00",
}
UTC_NEXT = {
    "berlin": datetime(2026, 3, 3, 1, 0, tzinfo=UTC),
    "newyork": datetime(2026, 3, 3, 7, 0, tzinfo=UTC),
    "tokyo": datetime(2026, 3, 2, 17, 0, tzinfo=UTC),
    "nozone": datetime(2026, 3, 3, 2, 0, tzinfo=UTC),
}


@pytest.fixture
def fleet(app: App) -> None:
    for name, zone in ZONES.items():
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL, timezone=zone))
    # A local target takes this machine's zone at pairing; clearing it leaves none.
    targets.add_target(app, SYSTEM, TargetSpec("nozone", TargetKind.LOCAL))
    targets.edit_target(app, SYSTEM, "nozone", TargetChanges(timezone=""))
    jobs.add_job(
        app,
        SYSTEM,
        JOB,
        JobSpec(schedule="0 2 * * *", command="true", timezone="target"),
        bulk=True,
    )


def test_the_service_gives_each_target_its_zone_and_its_local_next_fire(
    app: App, viewer: Actor, fleet: None
) -> None:
    rows = {row.target: row for row in job_fleet.job_targets(app, viewer, JOB).items}

    assert {name: row.next_fire_at for name, row in rows.items()} == UTC_NEXT
    assert {name: row.timezone for name, row in rows.items()} == {**ZONES, "nozone": None}
    local = {
        name: row.next_fire_local.strftime("%Y-%m-%d %H:%M")
        for name, row in rows.items()
        if row.next_fire_local is not None
    }
    assert local == LOCAL_NEXT
    assert rows["nozone"].next_fire_local is None


def test_the_targets_api_and_job_status_show_the_local_next_fire(
    app: App, client: TestClient, as_viewer: Headers, fleet: None
) -> None:
    response = client.get(f"{API}/jobs/{JOB}/targets", headers=as_viewer)
    assert response.status_code == 200
    items = {item["target"]: item for item in response.json()["items"]}
    assert items["tokyo"]["timezone"] == "Asia/Tokyo"
    assert items["tokyo"]["next_fire_local"].startswith("2026-03-03T02:00:00+09:00")
    assert items["newyork"]["next_fire_local"].startswith("2026-03-03T02:00:00-05:00")
    assert items["nozone"]["next_fire_local"] is None


@pytest.fixture
def cli_env(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)


def test_job_status_prints_each_target_on_its_own_clock(
    fleet: None, cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(cli, ["job", "status", JOB, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["target"]: row for row in data["items"]}
    assert rows["berlin"]["next_fire_local"].startswith("2026-03-03T02:00:00+01:00")

    assert run_cli(cli, ["job", "status", JOB]) == 0
    table = capsys.readouterr().out
    for name, zone in ZONES.items():
        line = next(line for line in table.splitlines() if f" {name} " in line)
        assert f"{LOCAL_NEXT[name]} {zone}" in line
    nozone = next(line for line in table.splitlines() if " nozone " in line)
    assert "2026-03-03 02:00 UTC" in nozone


def test_the_job_page_shows_the_target_clock_with_its_zone(
    browser: TestClient, fleet: None
) -> None:
    page = browser.get(f"/jobs/{JOB}")
    assert page.status_code == 200
    for name, zone in ZONES.items():
        row = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*>{name}<(?:(?!</tr>).)*</tr>", page.text, re.S)
        assert row is not None, name
        assert LOCAL_NEXT[name] in row.group(0)
        assert zone in row.group(0)
