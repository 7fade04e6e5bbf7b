"""The suite's own layout: pytest imports test modules by their basename (the test
directories are not packages), so two test files with one name stop the whole collection."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_file_name() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(TESTS)))

    clashes = {name: where for name, where in places.items() if len(where) > 1}

    assert clashes == {}


def test_the_quick_run_leaves_out_the_tests_that_need_a_real_server() -> None:
    """``make quick`` (``--quick``) collects none of the PostgreSQL fixture's own tests nor
    the PostgreSQL half of a test run on both databases; without ``--quick`` (the negative
    control) they are collected."""
    root = Path(__file__).resolve().parents[2]
    both = (
        "tests/integration/web/test_api_jobs.py::test_an_individual_job_has_exactly_its_one_target"
    )
    paths = ["tests/integration/test_postgres_fixture.py", both]

    def collected(*options: str) -> list[str]:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                *options,
                *paths,
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return [line for line in result.stdout.splitlines() if "::" in line]

    quick = collected("--quick")
    assert quick == [f"{both}[sqlite]"]
    everything = collected()
    assert f"{both}[postgres]" in everything
    assert any("test_postgres_fixture" in line for line in everything)
