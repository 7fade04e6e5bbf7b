"""The systemd units in deploy/ are valid and hardened: ``systemd-analyze verify`` accepts
them and ``systemd-analyze security --offline=true`` rates their exposure "OK" (at most
2.0); their secrets come as credentials, read through the settings' ``*_FILE`` variables.

systemd-analyze comes with systemd (scripts/system-deps.sh installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcron.config import Settings
from fleetcron.config_sources import SECRET_FIELDS, env_variable, file_variable

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNITS = {"fleetcron.service": "serve", "fleetcron-scheduler.service": "scheduler"}
MAX_EXPOSURE = 2.0
HARDENING = (
    "User=fleetcron",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "SystemCallFilter=@system-service",
    "ReadWritePaths=/var/lib/fleetcron",
)


def analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail("systemd-analyze is not installed: run scripts/system-deps.sh")
    return found


def installed(unit: str, tmp_path: Path) -> Path:
    """The unit as installed, with ExecStart pointing at this fleetcron (verify checks
    that the program exists)."""
    fleetcron = Path(sys.executable).with_name("fleetcron")
    text = (DEPLOY / unit).read_text().replace("/usr/local/bin/fleetcron", str(fleetcron))
    path = tmp_path / unit
    path.write_text(text)
    return path


def exposure(path: Path) -> tuple[float, str]:
    result = subprocess.run(
        [analyze(), "security", "--offline=true", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", result.stdout)
    assert match, result.stdout + result.stderr
    return float(match[1]), match[2]


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_the_unit_verifies(unit: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [analyze(), "verify", str(installed(unit, tmp_path))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_the_unit_is_hardened_to_an_ok_exposure(unit: str, tmp_path: Path) -> None:
    text = (DEPLOY / unit).read_text()
    lines = set(text.splitlines())
    assert [line for line in HARDENING if line not in lines] == []
    assert f"ExecStart=/usr/local/bin/fleetcron {UNITS[unit]}" in text
    score, rating = exposure(installed(unit, tmp_path))
    assert score <= MAX_EXPOSURE and rating == "OK", (score, rating)


def test_an_unhardened_unit_is_rated_exposed(tmp_path: Path) -> None:
    """Negative control: the score is read from the tool, and a plain unit fails it."""
    path = tmp_path / "plain.service"
    path.write_text(f"[Service]\nExecStart={Path(sys.executable)} -c pass\n")
    score, rating = exposure(path)
    assert score > MAX_EXPOSURE and rating != "OK", (score, rating)


def credentials(text: str) -> dict[str, str]:
    """Each ``Environment=VAR=%d/ID`` of the unit with its credential id."""
    return dict(re.findall(r"^Environment=(FLEETCRON_\w+_FILE)=%d/(\S+)$", text, re.M))


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_every_credential_is_loaded_and_read_through_a_setting(unit: str) -> None:
    text = (DEPLOY / unit).read_text()
    # The drop-in lines the unit suggests in comments count too.
    uncommented = re.sub(r"^#\s+", "", text, flags=re.M)
    read = credentials(uncommented)
    loaded = set(re.findall(r"^LoadCredential=([\w.]+):/etc/fleetcron/\S+$", uncommented, re.M))
    known = {file_variable(name) for name in SECRET_FIELDS} | {
        env_variable("master_key_file")
    }

    assert read["FLEETCRON_MASTER_KEY_FILE"] == "master.key"
    assert "FLEETCRON_MASTER_KEY_FILE" in credentials(text)  # not only in a comment
    assert set(read.values()) == loaded
    assert set(read) <= known, set(read) - known
    assert "master_key_file" in Settings.model_fields
