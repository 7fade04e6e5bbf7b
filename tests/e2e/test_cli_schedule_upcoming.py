"""`fleetcron schedule upcoming` through the console script, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from e2e.conftest import Fleet, FleetTemplates, assert_refused
from fixtures.postgres import PostgresServer


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path, fleet_templates: FleetTemplates
) -> Iterator[tuple[Fleet, dict[str, str]]]:
    """Local targets box1 and box2 (box2 paused); the bulk job every30 (every 30 minutes,
    disabled on box1) and the individual job daily on box1."""
    server: PostgresServer | None = None
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
    yield fleet_templates.copy("upcoming", SETUP, tmp_path, server)


#: Set up once per worker and backend, copied for each test.
SETUP = (
    "init",
    "target add box1 --local",
    "target add box2 --local",
    "job add every30 --bulk --schedule '*/30 * * * *' --command 'echo 30' "
    "--disabled-on box1 --tz UTC",
    "job add daily --target box1 --schedule '0 2 * * *' --command 'echo d' --tz Asia/Tokyo",
    "target pause box2 --reason 'disk swap'",
)


def test_upcoming_lists_each_fire_in_the_window_with_its_target_counts(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    out = the_fleet.json("schedule upcoming --hours 2 --job every30 --json", **env)

    fires = out["fires"]
    assert [f["job"] for f in fires] == ["every30"] * 4
    assert {(f["state"], f["targets"]["paused"], f["targets"]["disabled"]) for f in fires} == {
        ("paused", 1, 1)
    }
    start, until = (datetime.fromisoformat(out[k]) for k in ("from", "until"))
    assert until - start == timedelta(hours=2)
    assert all(start < datetime.fromisoformat(f["at"]) <= until for f in fires)


def test_upcoming_filters_by_job_and_target(fleet: tuple[Fleet, dict[str, str]]) -> None:
    the_fleet, env = fleet

    daily = the_fleet.json("schedule upcoming --job daily --json", **env)["fires"]
    # every30 only: daily (02:00 Tokyo, 17:00 UTC) is in the next hour from 16:00 UTC on.
    on_box1 = the_fleet.json(
        "schedule upcoming --target box1 --job every30 --hours 1 --json", **env
    )["fires"]

    assert [(f["job"], f["zone"], f["state"]) for f in daily] == [("daily", "Asia/Tokyo", "fires")]
    assert datetime.fromisoformat(daily[0]["at"]).strftime("%H:%M") == "02:00"
    assert on_box1 and {f["state"] for f in on_box1} == {"disabled"}


def test_upcoming_prints_a_table_for_people(fleet: tuple[Fleet, dict[str, str]]) -> None:
    the_fleet, env = fleet

    table = the_fleet.ok("schedule upcoming --job daily", **env)

    assert "daily" in table and "Asia/Tokyo" in table and "fires" in table


def test_upcoming_refuses_a_window_out_of_range_and_an_unknown_job(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    refused = the_fleet.run("schedule upcoming --hours 1000", **env)
    assert refused.returncode == 2 and "--hours" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert_refused(the_fleet.run("schedule upcoming --job nope", **env), "job nope does not exist")
