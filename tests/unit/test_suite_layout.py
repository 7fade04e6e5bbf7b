"""The suite's own layout: pytest imports test modules by their basename (the test
directories are not packages), so two test files with one name stop the whole collection;
and no module of the suite waits in a bare sleep loop (tests/waiting.py is the one place)."""

from __future__ import annotations

import ast
import re
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


#: Collects the paths given after ``--`` twice in one process, with ``--quick`` and without
#: (the interpreter's start and the plugins' imports, most of a collection's cost, paid once),
#: each run's lines after a line of its own. The plugins of the property and API schema
#: tests (Hypothesis, Schemathesis), which none of the collected tests is, stay out: their
#: imports were 2 of the run's 6 CPU-s.
_COLLECT_TWICE = """
import sys, pytest
UNUSED = ["-p", "no:hypothesispytest", "-p", "no:schemathesis"]
paths = sys.argv[sys.argv.index("--") + 1 :]
for options in (["--quick"], []):
    print("== collect", *options, flush=True)
    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *UNUSED, *options, *paths])
    sys.stdout.flush()
"""


def test_the_quick_run_leaves_out_the_tests_that_need_a_real_server() -> None:
    """``make quick`` (``--quick``) collects none of the PostgreSQL fixture's own tests nor
    the PostgreSQL half of a test run on both databases; without ``--quick`` (the negative
    control) they are collected."""
    root = Path(__file__).resolve().parents[2]
    both = (
        "tests/integration/web/test_api_jobs.py::test_an_individual_job_has_exactly_its_one_target"
    )
    paths = ["tests/integration/test_postgres_fixture.py", both]
    result = subprocess.run(
        [sys.executable, "-c", _COLLECT_TWICE, "--", *paths],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    runs = result.stdout.split("== collect")
    assert [run.splitlines()[0] for run in runs[1:]] == [" --quick", ""], result.stdout
    quick, everything = ([line for line in run.splitlines() if "::" in line] for run in runs[1:])

    assert quick == [f"{both}[sqlite]"]
    assert f"{both}[postgres]" in everything
    assert any("test_postgres_fixture" in line for line in everything)


#: A sleep inside a loop that is not a wait (a pace, a step of the event loop) says why on
#: its line: ``time.sleep(0.05)  # sleep-in-loop: <why>``.
SLEEP_IN_LOOP_MARKER = re.compile(r"#\s*sleep-in-loop:\s*\S")


def _is_sleep(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "sleep") or (
        isinstance(func, ast.Name) and func.id == "sleep"
    )


def _sleeps_in(loop: ast.AST) -> list[ast.Call]:
    """The sleep calls of a loop's own body and condition (not of functions defined in it)."""
    found: list[ast.Call] = []
    pending = list(ast.iter_child_nodes(loop))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Call) and _is_sleep(node):
            found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def sleep_loops(source: str, name: str) -> list[str]:
    """``name:line`` of every sleep inside a loop in ``source`` whose lines carry no
    explained ``sleep-in-loop:`` marker."""
    lines = source.splitlines()
    bad: set[int] = set()
    for loop in ast.walk(ast.parse(source)):
        if not isinstance(loop, ast.While | ast.For | ast.AsyncFor):
            continue
        for call in _sleeps_in(loop):
            text = lines[call.lineno - 1 : (call.end_lineno or call.lineno)]
            if not any(SLEEP_IN_LOOP_MARKER.search(line) for line in text):
                bad.add(call.lineno)
    return [f"{name}:{line}" for line in sorted(bad)]


def test_no_module_of_the_suite_sleeps_in_a_loop() -> None:
    """A polling wait is tests/waiting.py's eventually() (a deadline and a message), never a
    loop of fixed sleeps; a sleep in a loop that is not a wait says why on its line."""
    found = [
        where
        for path in sorted(TESTS.rglob("*.py"))
        if path != TESTS / "waiting.py"
        for where in sleep_loops(path.read_text(), str(path.relative_to(TESTS)))
    ]

    assert found == [], "use waiting.eventually(), or say `# sleep-in-loop: <why>`"


def test_the_sleep_loop_check_finds_the_loops_it_is_for() -> None:
    """Negative control: each form of a bare sleep loop is found; a marked one, a sleep
    outside a loop and a marker without a reason are told apart."""
    source = """
import asyncio, time
from time import sleep

def polls(ready):
    deadline = time.monotonic() + 5
    while not ready():
        assert time.monotonic() < deadline
        time.sleep(0.1)

async def polls_async(ready):
    for _ in range(50):
        if ready():
            break
        await asyncio.sleep(0.1)

def bare(ready):
    while not ready():
        sleep(0.1)

def marked(stop):
    while not stop.is_set():
        time.sleep(0.05)  # sleep-in-loop: a watcher's pace

def unexplained(stop):
    while not stop.is_set():
        time.sleep(0.05)  # sleep-in-loop:

def once():
    time.sleep(0.1)

def defined_in_a_loop():
    for delay in (1, 2):
        def later():
            time.sleep(delay)
"""

    assert sleep_loops(source, "sample.py") == [
        "sample.py:9",
        "sample.py:15",
        "sample.py:19",
        "sample.py:27",
    ]
