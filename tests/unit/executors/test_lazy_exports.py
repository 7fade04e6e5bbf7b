"""``fleetcron.executors`` loads its names on first use: a command that never reaches a
target does not pay for the SSH client library at start-up."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import fleetcron.executors as executors

LOADS_SSH = "import sys, {module}; print('asyncssh' in sys.modules)"


def ssh_library_loaded_by(module: str) -> bool:
    result = subprocess.run(
        [sys.executable, "-c", LOADS_SSH.format(module=module)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.strip() == "True"


def test_a_command_that_lists_jobs_starts_without_the_ssh_library() -> None:
    assert not ssh_library_loaded_by("fleetcron.cli.job_cmd")
    # The control: the SSH executor's module does load it, so the check can fail.
    assert ssh_library_loaded_by("fleetcron.executors.ssh")


def test_every_exported_name_resolves_to_its_home_module() -> None:
    homes = executors._HOMES
    assert sorted(executors.__all__) == sorted(homes)
    for name, home in homes.items():
        module = importlib.import_module(f"fleetcron.executors.{home}")
        assert getattr(executors, name) is getattr(module, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = executors.no_such_thing
