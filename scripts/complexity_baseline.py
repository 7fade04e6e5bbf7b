"""Complexity held by lint: ruff's complexity rules against a baseline that only shrinks.

`make lint` runs this script. It runs ruff with the complexity rules (`RULES`; their
thresholds are in pyproject.toml) over the project and compares each violation, keyed by
(rule, file, function) and never by line, with `lint-baseline.json`, the exceptions the code
held when the rules came in. It fails

- on a violation the baseline does not hold (new code, or a function that grew past a
  threshold): split the function, or group its parameters, until ruff is satisfied;
- when a baselined function got worse than the measure recorded for it;
- when a baseline entry no longer occurs, or occurs with a lower measure: the function was
  improved, so its entry is removed or lowered with `python scripts/complexity_baseline.py
  --prune`, which never adds or raises an entry. So the baseline only shrinks.

A function moved or renamed without becoming more complex shows as one new violation and one
entry gone: move its entry by hand (same rule and measure, new file or name) in the same
commit.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "lint-baseline.json"

RULES = {
    "C901": "too complex (McCabe)",
    "PLR0912": "too many branches",
    "PLR0913": "too many arguments",
    "PLR0915": "too many statements",
    "PLR0917": "too many positional arguments",
}

HOW_TO_FIX = {
    "C901": "split it into functions that each do one thing",
    "PLR0912": "split it, or replace a chain of branches by a table",
    "PLR0913": "group the parameters that belong together into a value object",
    "PLR0915": "split it into functions that each do one thing",
    "PLR0917": "make the parameters after the first few keyword-only (`*,`)",
}

_MEASURE = re.compile(r"\((\d+) > \d+\)")
_PRUNE = "run `python scripts/complexity_baseline.py --prune`"


@dataclass(frozen=True, order=True)
class Key:
    """One exception: a rule broken by one function of one file (no line number)."""

    rule: str
    file: str
    function: str

    def __str__(self) -> str:
        return f"{self.rule} {self.file}::{self.function}"


Violations = Counter[tuple[Key, int]]
"""Violations as (key, measure), counted: a baseline, or what ruff found."""


@dataclass(frozen=True)
class Report:
    new: list[tuple[Key, int]]
    worse: list[tuple[Key, int, int]]
    gone: list[Key]
    better: list[tuple[Key, int, int]]

    @property
    def ok(self) -> bool:
        return not (self.new or self.worse or self.gone or self.better)

    def lines(self) -> Iterator[str]:
        for key, measure in self.new:
            yield (
                f"new: {key} ({RULES[key.rule]}: {measure}): {HOW_TO_FIX[key.rule]}; "
                "the baseline takes no new entries"
            )
        for key, recorded, measure in self.worse:
            yield (
                f"worse: {key} ({RULES[key.rule]}: {measure}, recorded {recorded}): "
                f"{HOW_TO_FIX[key.rule]}"
            )
        for key in self.gone:
            yield f"gone: {key} no longer occurs: {_PRUNE}"
        for key, recorded, measure in self.better:
            yield f"better: {key} is {measure}, recorded {recorded}: {_PRUNE}"


def _functions(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each function's `def` line and qualified name (`Class.method`, `outer.inner`)."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield child.lineno, name
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    return walk(tree, "")


def _ruff(root: Path, paths: Sequence[str]) -> list[dict[str, object]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--exit-zero",
            "--output-format",
            "json",
            "--select",
            ",".join(RULES),
            *paths,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[dict[str, object]] = json.loads(done.stdout)
    return found


def measure(root: Path, paths: Sequence[str] = (".",)) -> Violations:
    """Every violation of `RULES` under `paths`, as (key, measure), counted."""
    names: dict[Path, dict[int, str]] = {}
    found: Violations = Counter()
    for item in _ruff(root, paths):
        path = Path(str(item["filename"]))
        location = item["location"]
        assert isinstance(location, dict)
        if path not in names:
            names[path] = dict(_functions(ast.parse(path.read_text(encoding="utf-8"))))
        rule = str(item["code"])
        function = names[path].get(int(location["row"]), f"<line {location['row']}>")
        value = _MEASURE.search(str(item["message"]))
        key = Key(rule, path.relative_to(root).as_posix(), function)
        found[(key, int(value.group(1)) if value else 0)] += 1
    return found


def load(path: Path) -> Violations:
    entries = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    return Counter(
        (Key(entry["rule"], entry["file"], entry["function"]), int(entry["measure"]))
        for entry in entries
    )


def save(path: Path, baseline: Violations) -> None:
    entries = [
        {"rule": key.rule, "file": key.file, "function": key.function, "measure": value}
        for (key, value) in sorted(baseline.elements())
    ]
    lines = ",\n ".join(json.dumps(entry) for entry in entries)
    path.write_text(f"[\n {lines}\n]\n" if entries else "[]\n", encoding="utf-8")


def _by_key(items: Iterable[tuple[Key, int]]) -> dict[Key, list[int]]:
    grouped: dict[Key, list[int]] = {}
    for key, value in items:
        grouped.setdefault(key, []).append(value)
    for values in grouped.values():
        values.sort(reverse=True)
    return grouped


def compare(found: Violations, baseline: Violations) -> Report:
    """What `found` has beyond `baseline`, and what `baseline` holds that is no longer so.

    A key that occurs several times (two functions of one name in one file) is paired
    largest measure with largest measure.
    """
    now, then = _by_key(found.elements()), _by_key(baseline.elements())
    new: list[tuple[Key, int]] = []
    worse: list[tuple[Key, int, int]] = []
    gone: list[Key] = []
    better: list[tuple[Key, int, int]] = []
    for key in sorted(now.keys() | then.keys()):
        measures, recorded = now.get(key, []), then.get(key, [])
        for value, limit in zip(measures, recorded, strict=False):
            if value > limit:
                worse.append((key, limit, value))
            elif value < limit:
                better.append((key, limit, value))
        new.extend((key, value) for value in measures[len(recorded) :])
        gone.extend(key for _ in recorded[len(measures) :])
    return Report(new=new, worse=worse, gone=gone, better=better)


def prune(found: Violations, baseline: Violations) -> Violations:
    """The baseline without its entries gone and with improved measures lowered; never more."""
    report = compare(found, baseline)
    kept = baseline.copy()
    for key in report.gone:
        worst = max(value for (k, value) in kept.elements() if k == key)
        kept[(key, worst)] -= 1
    for key, recorded, value in report.better:
        kept[(key, recorded)] -= 1
        kept[(key, value)] += 1
    return +kept


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument(
        "--prune",
        action="store_true",
        help="remove the entries that no longer occur and lower improved measures",
    )
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    baseline_path = root / BASELINE
    found, baseline = measure(root), load(baseline_path)
    if args.prune:
        save(baseline_path, prune(found, baseline))
        baseline = load(baseline_path)
    report = compare(found, baseline)
    for line in report.lines():
        print(line, file=sys.stderr)
    if not report.ok:
        print(
            f"complexity: {len(report.new) + len(report.worse)} new or worse, "
            f"{len(report.gone) + len(report.better)} to prune from {BASELINE}",
            file=sys.stderr,
        )
        return 1
    per_rule = Counter(key.rule for key, _ in baseline.elements())
    summary = ", ".join(f"{rule} {per_rule[rule]}" for rule in RULES)
    print(f"complexity: nothing beyond {BASELINE} ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
