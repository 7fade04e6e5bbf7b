"""Each target's own local time: the zone an assignment runs in, and reading the zone a
server reports (the parser on captured outputs, and the detection command run for real
under ``sh`` with stand-in ``timedatectl`` programs)."""

from __future__ import annotations

import os
import stat
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetcron.core.target_zones import (
    DETECT_COMMAND,
    TARGET_LOCAL,
    assignment_schedule,
    effective_zone,
    parse_detected_zone,
    validate_job_timezone,
    validate_target_timezone,
)
from fleetcron.errors import InvalidInput

# -- the parser, on outputs captured from real servers -----------------------------------


@pytest.mark.parametrize(
    ("output", "zone", "how"),
    [
        ("timedatectl:Europe/Berlin\n", "Europe/Berlin", "timedatectl"),
        ("etc_timezone:Etc/UTC\n", "Etc/UTC", "/etc/timezone"),
        ("etc_timezone:  America/New_York  \n", "America/New_York", "/etc/timezone"),
        ("localtime:/usr/share/zoneinfo/Asia/Tokyo\n", "Asia/Tokyo", "/etc/localtime"),
        ("localtime:../usr/share/zoneinfo/UTC\n", "UTC", "/etc/localtime"),
        ("\n\ntimedatectl:Asia/Kolkata\n", "Asia/Kolkata", "timedatectl"),
    ],
)
def test_a_reported_zone_is_read_with_its_source(output: str, zone: str, how: str) -> None:
    assert parse_detected_zone(output) == (zone, how)


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("none:\n", "no zone reported"),
        ("", "no zone reported"),
        ("bash: timedatectl: command not found\n", "no zone reported"),
        ("timedatectl:Mars/Olympus_Mons\n", "timedatectl reported 'Mars/Olympus_Mons'"),
        ("etc_timezone:../../etc/passwd\n", "is not a known time zone"),
        ("localtime:/etc/localtime.bak\n", "not a zoneinfo file"),
    ],
)
def test_no_zone_is_taken_from_an_answer_that_is_not_one(output: str, reason: str) -> None:
    found, said = parse_detected_zone(output)
    assert found is None
    assert reason in said


# -- the detection command, run by sh -----------------------------------------------------


def _fake_timedatectl(tmp_path: Path, script: str) -> dict[str, str]:
    """A PATH whose first ``timedatectl`` is ``script``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    prog = bindir / "timedatectl"
    prog.write_text("#!/bin/sh\n" + script)
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def _detect(env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["sh", "-c", DETECT_COMMAND], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def test_the_command_takes_timedatectl_first(tmp_path: Path) -> None:
    env = _fake_timedatectl(
        tmp_path, '[ "$*" = "show -p Timezone --value" ] && echo America/Chicago\n'
    )
    assert parse_detected_zone(_detect(env)) == ("America/Chicago", "timedatectl")


def test_the_command_falls_back_when_timedatectl_fails_or_says_nothing(tmp_path: Path) -> None:
    """Without systemd (as in this container) ``timedatectl`` fails: the next source
    answers. The expected value is what this machine's files say."""
    env = _fake_timedatectl(
        tmp_path, "echo 'System has not been booted with systemd' >&2\nexit 1\n"
    )
    output = _detect(env)
    assert not output.startswith("timedatectl:")
    if Path("/etc/timezone").is_file() and Path("/etc/timezone").read_text().strip():
        expected = Path("/etc/timezone").read_text().split()[0]
        assert parse_detected_zone(output) == (expected, "/etc/timezone")
    else:
        link = os.readlink("/etc/localtime")
        assert parse_detected_zone(output)[0] == link.rsplit("zoneinfo/", 1)[1]


# -- job zones and the zone an assignment runs in --------------------------------------


def test_a_job_zone_is_an_iana_name_or_target() -> None:
    assert validate_job_timezone(TARGET_LOCAL) == "target"
    assert validate_job_timezone("Europe/Berlin") == "Europe/Berlin"
    with pytest.raises(InvalidInput) as info:
        validate_job_timezone("Mars/Olympus")
    assert info.value.field == "timezone" and info.value.value == "Mars/Olympus"
    assert "'Mars/Olympus' is not a known time zone" in info.value.message
    assert '"target"' in (info.value.allowed or "")


def test_a_target_zone_is_never_the_word_target() -> None:
    assert validate_target_timezone("Asia/Tokyo") == "Asia/Tokyo"
    with pytest.raises(InvalidInput) as info:
        validate_target_timezone("target")
    assert info.value.field == "timezone" and info.value.value == "target"


def test_the_effective_zone() -> None:
    assert effective_zone("target", "Asia/Tokyo", "UTC") == "Asia/Tokyo"
    assert effective_zone("target", None, "Europe/Paris") == "Europe/Paris"
    # A job in a fixed zone keeps it whatever the target's zone.
    assert effective_zone("America/New_York", "Asia/Tokyo", "UTC") == "America/New_York"


AFTER = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # the day before Europe's spring forward


@pytest.mark.parametrize(
    ("target_zone", "expected"),
    [
        # 02:00 does not exist in Berlin on 2026-03-29: it fires once, at 03:00 CEST.
        ("Europe/Berlin", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
        # New York is already on EDT (since 8 March): 02:00 EDT.
        ("America/New_York", datetime(2026, 3, 29, 6, 0, tzinfo=UTC)),
        # Tokyo has no DST: 02:00 JST on the 29th is the 28th, 17:00 UTC.
        ("Asia/Tokyo", datetime(2026, 3, 28, 17, 0, tzinfo=UTC)),
        # No zone: the default zone (here UTC).
        (None, datetime(2026, 3, 29, 2, 0, tzinfo=UTC)),
    ],
)
def test_a_target_local_job_fires_at_each_targets_wall_time_across_a_dst_change(
    target_zone: str | None, expected: datetime
) -> None:
    fire = assignment_schedule("0 2 * * *", TARGET_LOCAL, target_zone, "UTC").next_after(AFTER)
    assert fire == expected


def test_a_fixed_zone_job_ignores_the_target_zone() -> None:
    """Negative control: the same targets, a job in Europe/Berlin, one instant for all."""
    fires = {
        assignment_schedule("0 2 * * *", "Europe/Berlin", zone, "UTC").next_after(AFTER)
        for zone in ("Europe/Berlin", "America/New_York", "Asia/Tokyo", None)
    }
    assert fires == {datetime(2026, 3, 29, 1, 0, tzinfo=UTC)}


def test_fall_back_runs_once_in_the_target_zone() -> None:
    """New York falls back on 2026-11-01: 01:30 happens twice, the job fires once."""
    schedule = assignment_schedule("30 1 * * *", TARGET_LOCAL, "America/New_York", "UTC")
    # (Compared in UTC: Python never finds an ambiguous wall time equal across zones.)
    first = schedule.next_after(datetime(2026, 11, 1, 0, 0, tzinfo=UTC)).astimezone(UTC)
    second = schedule.next_after(first).astimezone(UTC)
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    assert second == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)  # next day, 01:30 EST
