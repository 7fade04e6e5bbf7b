"""The suite's own layout: pytest imports test modules by their basename (the test
directories are not packages), so two test files with one name stop the whole collection."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_file_name() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(TESTS)))

    clashes = {name: where for name, where in places.items() if len(where) > 1}

    assert clashes == {}
