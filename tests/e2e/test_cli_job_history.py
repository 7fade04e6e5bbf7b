"""`fleetcron job history|diff|revert` through the console script, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Fleet, FleetTemplates, assert_refused
from fixtures.postgres import PostgresServer


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path, fleet_templates: FleetTemplates
) -> Iterator[tuple[Fleet, dict[str, str]]]:
    """An initialized data dir with a local target ``box`` and the job ``reload`` at its
    third version (schedule, then command changed); the environment every command needs."""
    server: PostgresServer | None = None
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
    yield fleet_templates.copy("history", SETUP, tmp_path, server)


#: Set up once per worker and backend, copied for each test.
SETUP = (
    "init",
    "target add box --local",
    "job add reload --target box --schedule '0 2 * * *' --command 'echo one'",
    "job edit reload --schedule '0 3 * * *'",
    "job edit reload --command 'echo two'",
)


def test_history_lists_every_version_newest_first_with_who_and_what(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    versions = the_fleet.json("job history reload --json", **env)

    assert [v["version"] for v in versions] == [3, 2, 1]
    assert [v["current"] for v in versions] == [True, False, False]
    assert versions[1]["summary"] == "schedule: 0 2 * * * -> 0 3 * * *"
    assert {v["source"] for v in versions} == {"cli"}
    assert {v["actor"] for v in versions} == {"admin"}
    table = the_fleet.ok("job history reload", **env)
    assert "3 (current)" in table and "created" in table


def test_diff_shows_the_old_and_the_new_value_of_each_changed_field(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    out = the_fleet.ok("job diff reload 1 3", **env)

    assert out.splitlines() == [
        "schedule:",
        "  - 0 2 * * *",
        "  + 0 3 * * *",
        "command:",
        "  - echo one",
        "  + echo two",
    ]
    assert the_fleet.ok("job diff reload 3", **env) == "no difference\n"


def test_revert_writes_a_new_version_with_the_old_definition(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    out = the_fleet.ok("job revert reload --to 1", **env)

    assert out.startswith("job reload is now at version 4 (the definition of version 1)")
    shown = the_fleet.json("job show reload --json", **env)
    assert (shown["schedule"], shown["command"]) == ("0 2 * * *", "echo one")
    assert the_fleet.ok("job diff reload 1 4", **env) == "no difference\n"
    events = the_fleet.json("audit list --action job.revert --json", **env)
    assert [(e["actor"], e["success"]) for e in events] == [("admin", True)]


def test_a_version_that_does_not_exist_is_refused_naming_the_ones_there_are(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    assert_refused(the_fleet.run("job diff reload 1 9", **env), "no version 9", "1 to 3")
    assert_refused(the_fleet.run("job revert reload --to 0", **env), "no version 0")
    assert_refused(the_fleet.run("job history nope", **env), "job nope does not exist")


def test_a_viewer_may_read_the_history_but_not_revert(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet
    the_fleet.ok("user add vera --role viewer", **env)

    assert the_fleet.json("job history reload --json --as vera", **env)[0]["version"] == 3
    refused = the_fleet.run("job revert reload --to 1 --as vera", **env)

    assert_refused(refused, "vera (viewer) may not revert jobs", "needs the operator role")
    assert the_fleet.json("job show reload --json", **env)["command"] == "echo two"
