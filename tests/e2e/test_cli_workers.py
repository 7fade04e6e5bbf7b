"""``--workers`` refused where it cannot work: a standalone (SQLite) installation runs one
scheduler process, and a count outside 1-1024 is not a count. Exit 2, the field, the
value and what is allowed; no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.conftest import Fleet, FleetTemplates, Zygote, describe

SETUP = ("init",)


@pytest.fixture
def fleet(tmp_path: Path, fleet_templates: FleetTemplates) -> Fleet:
    fleet, _env = fleet_templates.copy("workers", SETUP, tmp_path)
    return fleet


@pytest.mark.parametrize(
    "command", ["scheduler --workers 2", "serve --workers 3 --listen 127.0.0.1:1"]
)
def test_workers_on_a_standalone_installation_are_refused(fleet: Fleet, command: str) -> None:
    result = fleet.run(command)
    assert result.returncode == 2, describe(result)
    assert "workers:" in result.stderr and "FLEETCRON_CLUSTER=true" in result.stderr, describe(
        result
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["0", "-1", "two", "1025"])
def test_a_workers_count_that_is_not_one_is_refused(
    tmp_path: Path, zygote: Zygote, value: str
) -> None:
    result = Fleet(tmp_path, zygote).run(f"scheduler --workers {value}")
    assert result.returncode == 2, describe(result)
    assert "--workers" in result.stderr and value in result.stderr, describe(result)
    assert "Traceback" not in result.stderr
