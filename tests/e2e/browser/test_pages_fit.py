"""What an operator sees on a laptop: the runs list fits 1366x768 and 1280x800 with long
names, commands and output (the output opens on demand); the dashboard's grid keeps one
shape at 1, 10 and 500 bulk jobs; the dashboard counts recent failures by job; and every
table of an empty installation says what to do next.

Each test runs against a server of its own (a fresh copy of the seeded database), so the
counts and the emptiness are its own; screenshots are kept under test-artifacts/screenshots/.
Every measurement has a negative control: the same measurement on the same page made to
overflow (the fitting rules taken away, or a wide element put in) reports it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live_web import (
    ADMIN,
    NODE,
    TICK_S,
    LiveServer,
    log_in,
    new_context,
    screenshot,
    watched,
)
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, expect

from fixtures.app import make_settings
from fleetcron.app import App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs.edit import JobSpec, add_job
from fleetcron.services.runs.reads import FINISHED_STATUSES, request_run
from fleetcron.services.runs.views import show_run
from fleetcron.services.targets.edit import add_target
from waiting import eventually

LAPTOPS = ({"width": 1366, "height": 768}, {"width": 1280, "height": 800})

#: How far the page and each box that scrolls sideways overflow (0: everything fits): the
#: document (scrollWidth beyond innerWidth) and every visible element whose content is
#: wider than its box (the table's wrapper scrolls instead of the page, which hides the
#: overflow from the first number but not from an operator).
OVERFLOW = """() => {
  const boxes = [];
  for (const el of document.querySelectorAll('main *')) {
    if (el.offsetParent === null) continue;
    const style = getComputedStyle(el);
    if (!['auto', 'scroll'].includes(style.overflowX)) continue;
    const over = el.scrollWidth - el.clientWidth;
    const inner = el.querySelector('table');
    const name = el.id || (inner && (inner.id || inner.className)) || el.className || el.tagName;
    if (over > 1) boxes.push({box: name, over});
  }
  return {
    page: document.documentElement.scrollWidth - window.innerWidth,
    boxes,
  };
}"""


def overflow(page: Page) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(OVERFLOW)
    return result


def fits(measured: dict[str, Any]) -> bool:
    return measured["page"] <= 0 and not measured["boxes"]


def own_server(template: Path, directory: Path, targets: tuple[str, ...]) -> LiveServer:
    shutil.copyfile(template, directory / "fleetcron.db")
    settings = make_settings(
        directory / "data", f"sqlite:///{directory / 'fleetcron.db'}", tick_s=TICK_S, node_name=NODE
    )
    app = App.open(settings)
    for name in targets:
        add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL, labels=["env=prod"]))
    return LiveServer.start(app)


def stopped(server: LiveServer) -> None:
    server.stop()
    server.app.close()


AdminPage = Callable[[LiveServer, dict[str, int]], Page]


@pytest.fixture(scope="module")
def laptop_context(browser: Browser) -> Iterator[BrowserContext]:
    """One context for this module's tests (each on a server of its own): a new context
    costs Chromium about 0.5 CPU-s, several times a new page in one."""
    context = new_context(browser)
    yield context
    context.close()


@pytest.fixture
def admin_page(laptop_context: BrowserContext) -> Iterator[AdminPage]:
    """``admin_page(server, viewport)``: a page of its own at that size (in the module's
    context, its cookies cleared first), logged in as admin; closed after the test."""
    pages: list[Page] = []

    def open_(server: LiveServer, viewport: dict[str, int]) -> Page:
        laptop_context.clear_cookies()
        page = watched(laptop_context.new_page())
        pages.append(page)
        page.set_viewport_size(ViewportSize(width=viewport["width"], height=viewport["height"]))
        log_in(page, server, "admin")
        return page

    yield open_
    for page in pages:
        page.close()
    laptop_context.clear_cookies()


def wait_finished(server: LiveServer, run_ids: list[int]) -> None:
    eventually(
        lambda: all(show_run(server.app, ADMIN, i).status in FINISHED_STATUSES for i in run_ids),
        30,
        f"runs {run_ids} to finish (is the scheduler running?)",
        interval=0.1,
    )


# -- the runs list on a laptop ----------------------------------------------------------------

#: Names at their limit (64), without a place to break.
LONG_TARGET = "edge-" + "x" * 59
LONG_JOB = "nightly-" + "archive" * 8
#: A command and output with 300-character words: a URL, a hash, a line of zeros.
LONG_URL = "https://artifacts.example.com/" + "a" * 300
COMMAND = (
    f"echo fetching {LONG_URL}; seq 1 400; printf '%0600d\\n' 0 >&2; "
    "echo 'error: checksum mismatch in /srv/archive/2026-12-05/part-0001.tar' >&2; exit 3"
)


@pytest.fixture(scope="module")
def laptop_server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    server = own_server(sqlite_template, tmp_path_factory.mktemp("laptop"), (LONG_TARGET, "db-1"))
    app = server.app
    add_job(app, ADMIN, LONG_JOB, JobSpec("0 3 1 1 *", COMMAND), bulk=True)
    add_job(app, ADMIN, "short", JobSpec("0 3 1 1 *", "echo ok"), bulk=True)
    runs = request_run(app, ADMIN, LONG_JOB) + request_run(app, ADMIN, "short")
    wait_finished(server, runs)
    yield server
    stopped(server)


@pytest.mark.parametrize("viewport", LAPTOPS, ids=lambda v: f"{v['width']}x{v['height']}")
def test_the_runs_list_fits_a_laptop_screen_with_long_names_commands_and_output(
    admin_page: AdminPage, laptop_server: LiveServer, viewport: dict[str, int]
) -> None:
    page = admin_page(laptop_server, viewport)
    page.goto(laptop_server.at("/runs"))
    rows = page.locator("table.runs tbody tr[data-run]")
    expect(rows).to_have_count(4)
    failed = page.locator(f'tr[data-status="failed"]:has-text("{LONG_TARGET}")')
    expect(failed).to_contain_text(LONG_JOB)

    closed = overflow(page)
    assert fits(closed), closed
    # The output is there on demand: one line that says what there is, the excerpt closed.
    summaries = page.locator("tr.run-output details.output > summary")
    expect(summaries).to_have_count(4)
    failing_output = page.locator(
        f'tr.run-output[data-output-of="{failed.get_attribute("data-run")}"]'
    )
    expect(failing_output.locator("summary")).to_contain_text("checksum mismatch")
    expect(failing_output.locator("pre").first).to_be_hidden()
    screenshot(page, f"runs-list-{viewport['width']}")

    for i in range(summaries.count()):
        summaries.nth(i).click()
    expect(failing_output.locator("pre").first).to_be_visible()
    expect(failing_output).to_contain_text(LONG_URL[:60])
    opened = overflow(page)
    assert fits(opened), opened
    screenshot(page, f"runs-list-{viewport['width']}-opened")

    # The other pages that show these names, commands and output fit too.
    for path in (f"/targets/{LONG_TARGET}", "/jobs", f"/jobs/{LONG_JOB}", "/", "/targets"):
        page.goto(laptop_server.at(path))
        for summary in page.locator("main details > summary").all():
            summary.click()
        assert fits(overflow(page)), (path, overflow(page))
    page.goto(laptop_server.at("/runs"))

    # Negative controls: the same list without its fitting rules (the table laid out by its
    # content, as before) overflows its box; and a wide element makes the page itself
    # overflow, which the first number sees.
    page.evaluate("document.querySelector('table.runs').classList.remove('runs-list')")
    unfitted = overflow(page)
    assert unfitted["boxes"], unfitted
    page.evaluate(
        """() => { const wide = document.createElement('div');
                   wide.style.width = '2000px'; wide.style.height = '1px';
                   document.querySelector('main').appendChild(wide); }"""
    )
    assert overflow(page)["page"] > 0
    print(f"runs list at {viewport}: fitted {opened}, unfitted {unfitted}")


# -- the dashboard's grid at 1, 10 and 500 bulk jobs ---------------------------------------------

GRID_TARGETS = ("pbx-01", "pbx-02", "pbx-03", "branch-office-" + "z" * 50)

GRID_SHAPE = """() => {
  const box = document.querySelector('#fleet-grid-box');
  const grid = document.querySelector('#fleet-grid');
  const counts = document.querySelector('#job-counts-box');
  const main = document.querySelector('main');
  const mainWidth = main.clientWidth - parseFloat(getComputedStyle(main).paddingLeft)
    - parseFloat(getComputedStyle(main).paddingRight);
  return {
    header: grid.querySelector('thead tr').getBoundingClientRect().height,
    cell: grid.querySelector('tbody td').getBoundingClientRect().width,
    row: grid.querySelector('tbody tr').getBoundingClientRect().height,
    boxWidth: box.getBoundingClientRect().width,
    mainWidth,
    countsHeight: counts.getBoundingClientRect().height,
    columns: grid.querySelectorAll('thead th.job').length,
    pageHeight: document.documentElement.scrollHeight,
  };
}"""


@pytest.fixture(scope="module")
def grid_server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    server = own_server(sqlite_template, tmp_path_factory.mktemp("grid"), GRID_TARGETS)
    yield server
    stopped(server)


def add_bulk_jobs(app: App, start: int, stop: int) -> None:
    for i in range(start, stop):
        # Every fifth name at the limit of 64 characters, the others short.
        name = f"job-{i:03d}" + ("-" + "n" * 56 if i % 5 == 0 else "")
        add_job(app, ADMIN, name, JobSpec("0 3 1 1 *", f"echo grid {i}"), bulk=True)


def test_the_dashboard_grid_keeps_its_shape_at_1_10_and_500_jobs(
    admin_page: AdminPage, grid_server: LiveServer
) -> None:
    page = admin_page(grid_server, LAPTOPS[0])
    shapes = {}
    for count, start in ((1, 0), (10, 1), (500, 10)):
        add_bulk_jobs(grid_server.app, start, count)
        page.goto(grid_server.at("/"))
        expect(page.locator("#fleet-grid")).to_be_visible()
        shape = page.evaluate(GRID_SHAPE)
        measured = overflow(page)
        shapes[count] = shape
        print(f"grid at {count} jobs: {shape}, overflow {measured}")
        screenshot(page, f"dashboard-grid-{count}-jobs")
        assert fits(measured), (count, measured)
        assert shape["boxWidth"] <= shape["mainWidth"] + 1, (count, shape)
        assert shape["columns"] == min(count, 12)
        # The list of bulk jobs scrolls in a box of bounded height (26rem).
        assert shape["countsHeight"] <= 26 * 15 + 2, (count, shape)
    # One shape: the same header height, cell and row size, however many jobs and however
    # long their names; 500 jobs make the page no taller than 10 do.
    assert len({(s["header"], s["cell"], s["row"]) for s in shapes.values()}) == 1, shapes
    assert shapes[500]["pageHeight"] <= shapes[10]["pageHeight"] + 60, shapes
    expect(page.locator("#job-counts-box tbody tr")).to_have_count(500)
    expect(page.locator("#fleet-grid-box + .pager")).to_contain_text("488 more bulk jobs")

    # Negative control: without the bounds (the names' full length, the table stretched
    # to its content) the header grows with the longest name and the list with the jobs.
    page.evaluate(
        """() => {
          for (const a of document.querySelectorAll('#fleet-grid th.job a'))
            a.style.maxHeight = 'none';
          document.querySelector('#fleet-grid th.job').style.height = 'auto';
          document.querySelector('#job-counts-box').style.maxHeight = 'none';
        }"""
    )
    unbounded = page.evaluate(GRID_SHAPE)
    print(f"grid at 500 jobs without its bounds: {unbounded}")
    assert unbounded["header"] > shapes[500]["header"] + 50, unbounded
    assert unbounded["countsHeight"] > 26 * 15 * 4, unbounded


# -- recent failures by job --------------------------------------------------------------------


@pytest.fixture(scope="module")
def failing_server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    server = own_server(
        sqlite_template, tmp_path_factory.mktemp("failing"), ("alpha", "bravo", "charlie")
    )
    yield server
    stopped(server)


def test_recent_failures_are_grouped_by_job_with_counts(
    admin_page: AdminPage, failing_server: LiveServer
) -> None:
    app = failing_server.app
    add_job(app, ADMIN, "disk-check", JobSpec("0 3 1 1 *", "exit 3"), bulk=True)
    add_job(app, ADMIN, "trunk-probe", JobSpec("0 3 1 1 *", "exit 2"), target="bravo")
    add_job(app, ADMIN, "healthy", JobSpec("0 3 1 1 *", "true"), bulk=True)
    runs: list[int] = []
    for _ in range(2):
        runs += request_run(app, ADMIN, "disk-check") + request_run(app, ADMIN, "healthy")
        wait_finished(failing_server, runs)
    runs += request_run(app, ADMIN, "trunk-probe", target="bravo")
    wait_finished(failing_server, runs)

    page = admin_page(failing_server, LAPTOPS[0])
    page.goto(failing_server.at("/"))
    table = page.locator("#failures-by-job")
    # Seven failed runs make two lines, one per job, the most recently failed first.
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(2)
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.job)") == [
        "trunk-probe",
        "disk-check",
    ]
    disk = table.locator('tr[data-job="disk-check"]')
    expect(disk).to_have_attribute("data-failures", "6")
    cells = disk.locator("td").all_inner_texts()
    assert cells[1] == "6" and cells[2] == "3", cells  # 6 failures on 3 targets
    expect(table.locator('tr[data-job="trunk-probe"]')).to_have_attribute("data-failures", "1")
    expect(table).not_to_contain_text("healthy")
    expect(page.locator("#failures-summary")).to_contain_text("7 failed runs in the last 24 h")
    screenshot(page, "dashboard-failures-by-job")


# -- empty states ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    server = own_server(sqlite_template, tmp_path_factory.mktemp("empty"), ())
    yield server
    stopped(server)


#: Each page of an empty installation and the empty states it shows (``data-empty``).
EMPTY_PAGES = (
    ("/", ("targets", "failures")),
    ("/runs", ("runs",)),
    ("/runs?job=nothing-like-it", ("runs",)),
    ("/jobs", ("jobs",)),
    ("/targets", ("targets",)),
    ("/targets?q=nothing-like-it", ("targets",)),
    ("/upcoming", ("upcoming",)),
    ("/audit?action=nothing.like.it", ("audit",)),
    ("/tokens", ("tokens",)),
)
#: Once there is one target and one bulk job, and nothing ran.
FIRST_STEPS_PAGES = (
    ("/", ("failures",)),
    ("/runs", ("runs",)),
    ("/targets/lonely", ("individual-jobs", "runs")),
    ("/jobs/first-job", ("slots",)),
    ("/jobs/first-job?status=failed", ("targets", "slots")),
)


def empty_states(page: Page) -> dict[str, str]:
    found: dict[str, str] = page.evaluate(
        """() => Object.fromEntries(Array.from(document.querySelectorAll('[data-empty]'))
             .filter(el => el.offsetParent !== null)
             .map(el => [el.dataset.empty, el.innerText]))"""
    )
    return found


def test_every_table_of_an_empty_installation_says_what_to_do_next(
    admin_page: AdminPage, empty_server: LiveServer
) -> None:
    page = admin_page(empty_server, LAPTOPS[0])
    walked: list[tuple[str, tuple[str, ...]]] = list(EMPTY_PAGES)
    for path, expected in walked:
        visit_and_check(page, empty_server, path, expected)
    screenshot(page, "empty-tokens")
    page.goto(empty_server.at("/"))
    screenshot(page, "empty-dashboard")

    add_target(empty_server.app, ADMIN, TargetSpec("lonely", TargetKind.LOCAL))
    add_job(empty_server.app, ADMIN, "first-job", JobSpec("0 3 1 1 *", "true"), bulk=True)
    for path, expected in FIRST_STEPS_PAGES:
        visit_and_check(page, empty_server, path, expected)
    page.goto(empty_server.at("/targets/lonely"))
    screenshot(page, "empty-target-page")

    # Negative control: a page whose table has rows shows no empty state for it.
    page.goto(empty_server.at("/jobs"))
    assert "jobs" not in empty_states(page)
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)


def visit_and_check(page: Page, server: LiveServer, path: str, expected: tuple[str, ...]) -> None:
    response = page.goto(server.at(path))
    assert response is not None and response.status == 200, path
    found = empty_states(page)
    for name in expected:
        assert name in found, (path, name, found)
        # What to do next: a link to follow, or a command to type.
        element = page.locator(f'[data-empty="{name}"]').first
        actions = element.locator("a, code, button").count()
        assert actions, (path, name, found[name])
    # No table on the page is left empty without a word.
    bare = page.evaluate(
        """() => Array.from(document.querySelectorAll('main table'))
             .filter(t => t.querySelectorAll('tbody tr').length === 0)
             .map(t => t.id || t.className)"""
    )
    assert bare == [], (path, bare)
