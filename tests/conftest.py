"""Root test configuration: fixtures for real PostgreSQL and OpenSSH live in tests/fixtures.

``make test`` runs the suite in two parts at the same time (see the Makefile): the ``serial``
tests (the fault scenarios, which wait out real claim deadlines and lease timeouts) in one
process of their own, and beside them everything else on several pytest-xdist workers
(``--dist loadgroup``) at a lower CPU priority, so that the scenarios' processes get the CPU
whenever they wake. A plain ``pytest`` still runs it all in one process. Every worker has
its own session fixtures (PostgreSQL cluster, sshd, zygote, Chromium) on free loopback ports
and its own temporary directory.
"""

import os
import signal
import threading
from typing import Any

import pytest
from _pytest.fixtures import FixtureDef, SubRequest

from fleetcron import heap

pytest_plugins = [
    "fixtures.postgres",
    "fixtures.sshd",
    "fixtures.app",
    "fixtures.cluster",
    "fixtures.pg_pair",
    "fixtures.package_scope",
]

#: Directories whose tests are all timing-sensitive: marked ``serial``.
SERIAL_DIRECTORIES = ("/tests/fault/",)
#: Fixture scopes wider than a test and narrower than the session: the tests sharing such a
#: fixture go to one worker together, so that it is set up once, not once per worker.
_SHARED_SCOPES = {"class", "module", "package"}

#: ``--quick`` (``make quick``): the fixtures that start a real server or browser. Tests that
#: need one are deselected (and counted in the summary); a test that still reaches one (through
#: ``request.getfixturevalue``) fails, so the quick run never claims more than it ran.
HEAVY_FIXTURES = frozenset(
    {"postgres_server", "pg_pair_servers", "sshd", "browser", "playwright_driver", "lab"}
)
HEAVY_MARKERS = frozenset({"postgres", "sshd", "serial", "wheel", "slow"})
#: Parameter values that select a real server: ``database_url[postgres]``, executors' ``ssh``.
HEAVY_PARAMS = frozenset({"postgres", "ssh"})


#: The skips that are honest on a machine set up by scripts/system-deps.sh and run as root
#: (CI's): a skip for any other reason means a test that should run here did not, and with
#: ``CI`` or ``STRICT_SKIPS`` set the run fails (``pytest_sessionfinish``). Reason -> why allowed.
ALLOWED_SKIPS = {
    "runs_fts is SQLite's": "the full-text index exists on SQLite only: nothing to test on "
    "PostgreSQL",
}
_SKIPPED: list[tuple[str, str]] = []


def strict_skips() -> bool:
    """Whether a skip outside :data:`ALLOWED_SKIPS` fails the run: in CI, or when asked."""
    return any(
        os.environ.get(name, "").lower() in {"1", "true", "yes"} for name in ("CI", "STRICT_SKIPS")
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _SKIPPED.append((report.nodeid, reason.removeprefix("Skipped: ")))


def _unexplained_skips() -> list[tuple[str, str]]:
    return [(nodeid, reason) for nodeid, reason in _SKIPPED if reason not in ALLOWED_SKIPS]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or not strict_skips():
        return
    if _unexplained_skips() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        help="the edit loop (make quick): leave out every test that needs PostgreSQL, sshd, "
        "a browser or real deadlines, and fail a test that reaches one anyway",
    )


def _needs_heavy(item: pytest.Item) -> bool:
    if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if any(item.get_closest_marker(name) for name in HEAVY_MARKERS):
        return True
    callspec = getattr(item, "callspec", None)
    values = callspec.params.values() if callspec is not None else ()
    return any(isinstance(value, str) and value in HEAVY_PARAMS for value in values)


def _deselect_heavy(config: pytest.Config, items: list[pytest.Item]) -> None:
    heavy = [item for item in items if _needs_heavy(item)]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if not _needs_heavy(item)]
    config.stash[_QUICK_DESELECTED] = len(heavy)
    if hasattr(config, "workeroutput"):  # an xdist worker: its controller prints the count
        config.workeroutput["quick_deselected"] = len(heavy)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller of a parallel ``--quick`` run takes the count its workers left out
    (each collects the same tests)."""
    output = getattr(node, "workeroutput", {})
    if "quick_deselected" in output:
        node.config.stash[_QUICK_DESELECTED] = output["quick_deselected"]


_QUICK_DESELECTED = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: FixtureDef[object], request: SubRequest) -> None:
    if request.config.getoption("quick") and fixturedef.argname in HEAVY_FIXTURES:
        pytest.fail(
            f"--quick: {request.node.nodeid} needs {fixturedef.argname}; mark it (postgres, "
            "sshd or slow) so that the quick run leaves it out",
            pytrace=False,
        )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    unexplained = _unexplained_skips()
    if unexplained and strict_skips() and not hasattr(config, "workerinput"):
        terminalreporter.section("skips that are not allowed here", red=True)
        for nodeid, reason in unexplained:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line(
            "a test that should run on this machine was skipped: fix the cause, or add the "
            "reason to ALLOWED_SKIPS in tests/conftest.py with why it cannot run here"
        )
    deselected = config.stash.get(_QUICK_DESELECTED, None)
    if deselected is not None:
        terminalreporter.write_line(
            f"--quick: {deselected} tests that need PostgreSQL, sshd, a browser or real "
            "deadlines were left out; `make test` runs everything"
        )


def pytest_configure(config: pytest.Config) -> None:
    """``make test`` starts the fault scenarios in the background, beside the rest of the
    suite. A non-interactive shell starts a background command with SIGINT ignored, so a
    Ctrl-C would leave that pytest running, with its scheduler processes and servers. Python's
    handler is put back (in the controlling process, not in xdist workers, whose interrupts
    xdist manages): a Ctrl-C stops it as it stops a pytest in the foreground, fixtures torn
    down."""
    if (
        not hasattr(config, "workerinput")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Settle the heap as a serving process does (:func:`fleetcron.heap.settle`): the
    collected tests, the imported product and its fixtures' modules live as long as the
    process, and without it every full collection walked them again (the web tests spent 9%
    of their CPU in the collector, 3% after)."""
    heap.settle()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fault scenarios are marked ``serial``. Tests using a module-, class- or package-scoped
    fixture get an ``xdist_group`` of that module or package (browser tests: one group for
    the package, which shares one server and one Chromium), and the run is put in the order
    of :func:`_longest_first`.

    First of the hooks (``tryfirst``): pytest-xdist's worker reads the ``xdist_group``
    marks in its own ``pytest_collection_modifyitems`` (it appends ``@group`` to each node
    id, which is what ``--dist loadgroup`` schedules by), and a plugin registered after the
    conftests, as the worker is, runs before them otherwise: the groups given here were
    ignored, and every worker set up the module- and package-scoped fixtures again."""
    for item in items:
        path = str(item.path)
        if any(directory in path for directory in SERIAL_DIRECTORIES):
            item.add_marker(pytest.mark.serial)
        group = _shared_fixture_group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    items[:] = _longest_first(items)
    if config.getoption("quick"):
        _deselect_heavy(config, items)


#: Single tests that take tens of seconds each (the slowest of ``make test``, measured), by
#: node id prefix: handed out right after the groups, so that no worker starts one of them
#: when the others have run out of work. A stale entry costs nothing but that order.
LONG_TESTS = (
    "tests/integration/web/test_local_gate_sequences.py::",
    "tests/integration/web/test_schemathesis.py::",
    "tests/e2e/test_wheel_install.py::",
    "tests/integration/notify/test_incident_scenarios.py::",
    "tests/unit/test_suite_layout.py::test_the_quick_run_leaves_out",
    "tests/unit/test_honest_runs.py::",
    "tests/integration/scheduler/test_exactly_once.py::",
    "tests/integration/web/test_upcoming_api_pages.py::",
)


def _group_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def _longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order the workers get their work in (the Makefile passes
    ``--no-loadscope-reorder``, so pytest-xdist hands out its units, a group or a single
    test, in the order they first appear): the groups first, largest first (the browser
    tests, the largest, share one server and one Chromium), then :data:`LONG_TESTS`, then
    the rest as collected, ending with the unit tests, which are short and so even out the
    workers' last minute. A worker that took a long unit last would run it alone while the
    others had nothing left to do."""
    groups: dict[str, list[pytest.Item]] = {}
    long: list[pytest.Item] = []
    rest: list[pytest.Item] = []
    for item in items:
        group = _group_of(item)
        if group is not None:
            groups.setdefault(group, []).append(item)
        elif item.nodeid.startswith(LONG_TESTS):
            long.append(item)
        else:
            rest.append(item)
    largest = sorted(groups.values(), key=len, reverse=True)
    return [item for members in largest for item in members] + long + rest


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The module (or package, for a package-scoped fixture) whose wider-scoped fixture this
    test uses, or None when it only uses function- and session-scoped ones."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {
        definition.scope
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    }
    if not scopes & _SHARED_SCOPES:
        return None
    module = item.nodeid.split("::", 1)[0]
    if "package" in scopes:
        return module.rpartition("/")[0]
    return module
