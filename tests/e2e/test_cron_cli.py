"""`fleetcron cron check|next` through the installed console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FLEETCRON = str(Path(sys.executable).with_name("fleetcron"))


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "FLEETCRON_TIMEZONE"}
    environment.update(env or {})
    return subprocess.run(
        [FLEETCRON, "cron", *args], capture_output=True, text=True, env=environment, timeout=60
    )


def test_check_prints_the_normalized_form_and_a_description() -> None:
    result = run("check", "0 2 * * sun")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["0 2 * * 0", "At 02:00, only on Sunday"]


def test_check_notes_extensions_beyond_debian_cron() -> None:
    result = run("check", "0 0 L * *")
    assert result.returncode == 0
    assert "note: uses extensions beyond Debian cron: L" in result.stdout


def test_check_reports_a_bad_expression_on_stderr_with_exit_2() -> None:
    result = run("check", "60 * * * *")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: minute: 60 is out of range 0-59"
    assert "Traceback" not in result.stderr


def test_next_prints_fire_times_with_offsets_across_a_dst_jump() -> None:
    # New York springs forward 2026-03-08 02:00 -> 03:00
    result = run("next", "30 2 * * *", "--from", "2026-03-07T12:00", "--tz", "America/New_York",
                 "-n", "2")  # fmt: skip
    assert result.returncode == 0
    assert result.stdout.split() == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]


def test_next_prints_five_fire_times_by_default() -> None:
    result = run("next", "@hourly", "--from", "2026-01-01T00:00:00+00:00")
    assert result.stdout.split() == [f"2026-01-01T0{h}:00:00+00:00" for h in range(1, 6)]


def test_next_uses_the_configured_time_zone() -> None:
    result = run("next", "@daily", "--from", "2026-01-01T12:00", "-n", "1",
                 env={"FLEETCRON_TIMEZONE": "Europe/Berlin"})  # fmt: skip
    assert result.stdout.strip() == "2026-01-02T00:00:00+01:00"


def test_next_without_from_starts_now() -> None:
    result = run("next", "* * * * *", "-n", "1")
    assert result.returncode == 0
    assert result.stdout.strip().endswith(":00+00:00")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--tz", "Mars/Olympus"), "--timezone"),
        (("--from", "yesterday"), "--from"),
        (("-n", "0"), "-n"),
        (("-n", "many"), "-n"),
    ],
)
def test_next_rejects_bad_options_naming_them_with_exit_2(
    args: tuple[str, ...], option: str
) -> None:
    result = run("next", "* * * * *", *args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {option}:")
    assert args[1] in result.stderr
