"""The suite is honest by default: a warning fails the test that raised it, and in CI (``CI``
or ``STRICT_SKIPS`` set) a skip whose reason is not in ``ALLOWED_SKIPS`` fails the run.

Each test runs pytest on a probe file in a copy of the suite's configuration
(``pyproject.toml``, ``tests/conftest.py``, ``tests/waiting.py`` and ``tests/fixtures``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: Each test starts pytest a few times (a few seconds each): not in ``make quick``.
pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[2]
PROBE = """
import warnings

import pytest


def test_skipped_for_no_allowed_reason():
    pytest.skip("the server was too slow to start")


def test_skipped_for_an_allowed_reason():
    pytest.skip("runs_fts is SQLite's")


def test_warns():
    warnings.warn("old call", DeprecationWarning)


def test_passes():
    assert True
"""


#: Installed pytest plugins the probe's four plain tests never use: those of the property
#: and API schema tests (Hypothesis, Schemathesis). Importing them was 2.2 of each run's
#: 3.8 CPU-s; whether a skip or a warning fails a run is the suite's own configuration.
_UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:schemathesis")


def _run_probe(tmp_path: Path, *tests: str, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copytree(CHECKOUT / "tests" / "fixtures", tmp_path / "tests" / "fixtures")
    shutil.copy2(CHECKOUT / "pyproject.toml", tmp_path / "pyproject.toml")
    for name in ("conftest.py", "waiting.py"):
        shutil.copy2(CHECKOUT / "tests" / name, tmp_path / "tests" / name)
    (tmp_path / "tests" / "test_probe.py").write_text(PROBE)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"CI", "STRICT_SKIPS"} and not key.startswith("PYTEST")
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *_UNUSED_PLUGINS,
            *(f"tests/test_probe.py::{name}" for name in tests),
        ],
        cwd=tmp_path,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_in_ci_a_skip_without_an_allowed_reason_fails_the_run_and_is_named(
    tmp_path: Path,
) -> None:
    result = _run_probe(
        tmp_path,
        "test_skipped_for_no_allowed_reason",
        "test_skipped_for_an_allowed_reason",
        CI="true",
    )
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "skips that are not allowed here" in result.stdout
    assert "the server was too slow to start" in result.stdout
    assert "test_skipped_for_an_allowed_reason: " not in result.stdout


def test_negative_control_an_allowed_skip_in_ci_and_any_skip_outside_it_pass(
    tmp_path: Path,
) -> None:
    allowed = _run_probe(tmp_path / "ci", "test_skipped_for_an_allowed_reason", CI="true")
    assert allowed.returncode == pytest.ExitCode.OK, allowed.stdout
    local = _run_probe(tmp_path / "local", "test_skipped_for_no_allowed_reason")
    assert local.returncode == pytest.ExitCode.OK, local.stdout


def test_a_warning_fails_the_test_that_raised_it(tmp_path: Path) -> None:
    result = _run_probe(tmp_path, "test_warns", "test_passes")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "1 failed, 1 passed" in result.stdout
    assert "DeprecationWarning: old call" in result.stdout
