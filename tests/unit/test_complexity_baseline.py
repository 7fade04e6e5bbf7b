"""scripts/complexity_baseline.py, the check `make lint` runs: ruff's complexity rules with
the project's thresholds, and a baseline that only shrinks. Each test builds a small project
with the real pyproject.toml, so the thresholds are the real ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from complexity_baseline import BASELINE, ROOT, main

SIMPLE = """
def add(a: int, b: int) -> int:
    return a + b
"""

# Eleven ifs: McCabe complexity 12, over the threshold of 10.
TANGLED = (
    "def tangled(x: int) -> int:\n"
    + "".join(f"    if x == {n}:\n        return {n}\n" for n in range(11))
    + "    return -1\n"
)

# Six positional parameters, one over the threshold.
CROWDED = """
class Box:
    def crowded(self, a: int, b: int, c: int, d: int, e: int, f: int) -> int:
        return a + b + c + d + e + f
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "simple.py").write_text(SIMPLE)
    (tmp_path / BASELINE).write_text("[]\n")
    return tmp_path


def baseline(project: Path) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads((project / BASELINE).read_text())
    return entries


def entry(rule: str, file: str, function: str, measure: int) -> dict[str, object]:
    return {"rule": rule, "file": file, "function": function, "measure": measure}


def test_the_project_has_nothing_beyond_its_baseline() -> None:
    assert main(["--root", str(ROOT)]) == 0


def test_code_within_the_thresholds_passes(project: Path) -> None:
    assert main(["--root", str(project)]) == 0


def test_a_new_violation_fails_naming_it_and_how_to_fix_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "tangled.py").write_text(TANGLED)

    assert main(["--root", str(project)]) == 1
    err = capsys.readouterr().err
    assert "new: C901 src/tangled.py::tangled (too complex (McCabe): 12)" in err
    assert "split it into functions that each do one thing" in err


def test_a_method_is_named_with_its_class(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "box.py").write_text(CROWDED)

    assert main(["--root", str(project)]) == 1
    assert "new: PLR0917 src/box.py::Box.crowded" in capsys.readouterr().err


def test_a_violation_in_the_baseline_passes(project: Path) -> None:
    (project / "src" / "tangled.py").write_text(TANGLED)
    (project / BASELINE).write_text(json.dumps([entry("C901", "src/tangled.py", "tangled", 12)]))

    assert main(["--root", str(project)]) == 0


def test_the_baseline_ignores_line_numbers(project: Path) -> None:
    (project / "src" / "tangled.py").write_text("\n\n# moved down\n" + TANGLED)
    (project / BASELINE).write_text(json.dumps([entry("C901", "src/tangled.py", "tangled", 12)]))

    assert main(["--root", str(project)]) == 0


def test_a_baselined_function_may_not_get_worse(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "src" / "tangled.py").write_text(TANGLED)
    (project / BASELINE).write_text(json.dumps([entry("C901", "src/tangled.py", "tangled", 11)]))

    assert main(["--root", str(project)]) == 1
    assert "worse: C901 src/tangled.py::tangled" in capsys.readouterr().err


def test_an_entry_that_no_longer_occurs_fails_until_pruned(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / BASELINE).write_text(json.dumps([entry("C901", "src/simple.py", "add", 12)]))

    assert main(["--root", str(project)]) == 1
    assert "gone: C901 src/simple.py::add no longer occurs" in capsys.readouterr().err

    assert main(["--root", str(project), "--prune"]) == 0
    assert baseline(project) == []


def test_pruning_lowers_an_improved_measure_and_adds_nothing(project: Path) -> None:
    (project / "src" / "tangled.py").write_text(TANGLED)
    (project / "src" / "box.py").write_text(CROWDED)
    (project / BASELINE).write_text(json.dumps([entry("C901", "src/tangled.py", "tangled", 15)]))

    assert main(["--root", str(project)]) == 1
    assert main(["--root", str(project), "--prune"]) == 1  # the new PLR0917 stays a failure

    assert baseline(project) == [entry("C901", "src/tangled.py", "tangled", 12)]
