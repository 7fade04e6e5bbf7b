"""`fleetcron target add/edit --timezone`, `job add --tz target` and `job show --json`
through the console script, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Fleet, FleetTemplates, assert_refused, succeeded
from fixtures.postgres import PostgresServer

ZONES = {"berlin": "Europe/Berlin", "newyork": "America/New_York", "tokyo": "Asia/Tokyo"}


@pytest.fixture(params=["sqlite", "postgres"])
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path, fleet_templates: FleetTemplates
) -> Iterator[tuple[Fleet, dict[str, str]]]:
    """Three local targets in three zones set by the operator, and the bulk job
    ``nightly`` at 02:00 in each target's own zone (set up once per worker and backend,
    copied for each test)."""
    server: PostgresServer | None = None
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
    the_fleet, env = fleet_templates.copy("zones", SETUP, tmp_path, server)
    for name, zone in ZONES.items():
        out = succeeded(the_fleet.ran(f"target add {name} --local --timezone {zone}"))
        assert f"time zone {zone} (set by an operator)\n" in out
    yield the_fleet, env


SETUP = (
    "init",
    *(f"target add {name} --local --timezone {zone}" for name, zone in ZONES.items()),
    "job add nightly --bulk --schedule '0 2 * * *' --tz target --command 'echo hi'",
)


def test_job_show_gives_each_targets_next_fire_in_its_own_zone(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    shown = the_fleet.json("job show nightly --json", **env)

    assert shown["timezone"] == "target"
    by_target = {a["target"]: a for a in shown["assignments"]}
    assert {t: a["timezone"] for t, a in by_target.items()} == ZONES
    for target, a in by_target.items():
        # 02:00 wall time in the target's zone, whatever the date and the offset.
        assert a["next_fire_local"][11:19] == "02:00:00", (target, a)
    instants = {a["next_fire_at"] for a in by_target.values()}
    assert len(instants) == 3  # three zones, three different instants
    table = the_fleet.ok("job show nightly", **env)
    assert all(zone in table for zone in ZONES.values())


def test_the_zone_is_shown_in_the_list_and_on_the_target(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    listed = {t["name"]: t for t in the_fleet.json("target list --json", **env)}
    assert {n: (t["timezone"], t["timezone_source"]) for n, t in listed.items()} == {
        n: (z, "operator") for n, z in ZONES.items()
    }
    assert "Asia/Tokyo" in the_fleet.ok("target list", **env)
    shown = the_fleet.ok("target show tokyo", **env)
    assert "Asia/Tokyo (operator)" in shown
    assert "+09:00" in shown  # the job's next fire as Tokyo's wall time


def test_editing_the_zone_moves_the_next_fire(fleet: tuple[Fleet, dict[str, str]]) -> None:
    the_fleet, env = fleet

    out = the_fleet.ok("target edit tokyo --timezone Asia/Kolkata", **env)

    assert "target tokyo changed: timezone" in out
    shown = the_fleet.json("job show nightly --json", **env)
    tokyo = next(a for a in shown["assignments"] if a["target"] == "tokyo")
    assert tokyo["timezone"] == "Asia/Kolkata"
    assert tokyo["next_fire_local"].endswith("02:00:00+05:30")


def test_clearing_the_zone_falls_back_to_the_default(fleet: tuple[Fleet, dict[str, str]]) -> None:
    the_fleet, env = fleet

    the_fleet.ok("target edit tokyo --timezone ''", **env)

    shown = the_fleet.ok("target show tokyo", **env)
    assert "unknown (jobs in the target zone use the default, UTC)" in shown
    job = the_fleet.json("job show nightly --json", **env)
    tokyo = next(a for a in job["assignments"] if a["target"] == "tokyo")
    assert (tokyo["timezone"], tokyo["next_fire_local"][11:]) == ("UTC", "02:00:00+00:00")


def test_an_unknown_zone_is_refused_with_exit_2_naming_the_value(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet

    assert_refused(
        the_fleet.run("target add paris --local --timezone Europe/Pariss", **env),
        "timezone",
        "'Europe/Pariss' is not a known time zone",
    )
    assert_refused(
        the_fleet.run("target edit tokyo --timezone Asia/Tokio", **env),
        "'Asia/Tokio' is not a known time zone",
    )
    assert_refused(
        the_fleet.run("target edit tokyo --timezone target", **env),
        "'target' is not a known time zone",
    )
    assert_refused(
        the_fleet.run(
            "job add bad --bulk --schedule '0 2 * * *' --tz targets --command 'echo x'", **env
        ),
        "'targets' is not a known time zone",
        '"target"',
    )
    assert "paris" not in the_fleet.ok("target list", **env)


def test_the_help_of_job_add_names_the_target_zone(fleet: tuple[Fleet, dict[str, str]]) -> None:
    the_fleet, env = fleet

    helped = " ".join(the_fleet.ok("job add --help", **env).split())  # unwrapped
    assert 'IANA time zone, or "target": each target\'s own' in helped


def test_detect_zone_shows_what_would_change_and_refuses_bad_input(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    """Local targets read the zone of this machine; an operator's zone is kept by --all."""
    the_fleet, env = fleet

    swept = the_fleet.ok("target detect-zone --all", **env)
    assert "kept: set by an operator" in swept or "unchanged" in swept
    assert dict(ZONES) == {
        t["name"]: t["timezone"] for t in the_fleet.json("target list --json", **env)
    }  # nothing written without --apply
    assert_refused(the_fleet.run("target detect-zone", **env), "name one or more targets")
    assert_refused(the_fleet.run("target detect-zone nope", **env), "target nope does not exist")


def test_an_unknown_zone_gets_a_suggestion_on_every_option_spelling(
    fleet: tuple[Fleet, dict[str, str]],
) -> None:
    the_fleet, env = fleet
    assert_refused(
        the_fleet.run("target edit tokyo --timezone europe/warsaw", **env),
        "did you mean Europe/Warsaw?",
    )
    for flag in ("--timezone", "--tz"):
        assert_refused(
            the_fleet.run(f"job edit nightly {flag} Europe/Warsow", **env),
            "did you mean Europe/Warsaw?",
        )
