"""Every main page, filled with a little of everything: it renders under the strict CSP
without a console error, every form control has a label, and a screenshot is kept under
test-artifacts/screenshots/ for a human to look at."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from live_web import ADMIN, LiveServer, OpenPage, problems_of, screenshot
from playwright.sync_api import expect

from fleetcron.services.accounts.users import create_token
from fleetcron.services.jobs.edit import JobSpec, add_job
from fleetcron.services.runs.reads import FINISHED_STATUSES, request_run
from fleetcron.services.runs.views import show_run
from waiting import eventually

#: Form controls a person cannot name: no <label>, no aria-label, or a button without text.
UNLABELLED = """() => Array.from(
  document.querySelectorAll('input:not([type=hidden]), select, textarea, button')
).filter(el => el.offsetParent !== null || el.type === 'radio' || el.type === 'checkbox')
 .filter(el => el.tagName === 'BUTTON'
   ? !el.textContent.trim() && !el.getAttribute('aria-label')
   : el.labels.length === 0 && !el.getAttribute('aria-label'))
 .map(el => el.outerHTML.slice(0, 160))"""


@dataclass(frozen=True)
class Tour:
    succeeded_run: int
    failed_run: int
    big_run: int


def wait_finished(server: LiveServer, run_ids: list[int]) -> None:
    eventually(
        lambda: all(show_run(server.app, ADMIN, i).status in FINISHED_STATUSES for i in run_ids),
        20,
        f"runs {run_ids} to finish (is the scheduler running?)",
        interval=0.1,
    )


@pytest.fixture(scope="module")
def tour(server: LiveServer) -> Tour:
    app = server.app
    add_job(
        app,
        ADMIN,
        "nightly-backup",
        JobSpec(
            "15 2 * * *",
            "/usr/local/bin/backup --all\n# then prune old archives",
            notes="Keeps 14 days of archives.",
        ),
        bulk=True,
        disabled_on=["charlie"],
    )
    warm = JobSpec("*/10 * * * *", "echo warm")
    add_job(app, ADMIN, "prod-cache-warm", warm, bulk=True, selector="env=prod")
    report = JobSpec("0 7 * * 1", "printf 'report\\nok\\n'")
    add_job(app, ADMIN, "alpha-report", report, target="alpha")
    add_job(
        app,
        ADMIN,
        "alpha-broken",
        JobSpec("0 8 * * *", "echo 'disk check failed: /var is 97% full' >&2; exit 3"),
        target="alpha",
    )
    add_job(app, ADMIN, "alpha-chatty", JobSpec("0 9 * * *", "seq 1 3000"), target="alpha")
    ok = request_run(app, ADMIN, "alpha-report", target="alpha")
    failed = request_run(app, ADMIN, "alpha-broken", target="alpha")
    big = request_run(app, ADMIN, "alpha-chatty", target="alpha")
    wait_finished(server, ok + failed + big)
    create_token(app, ADMIN, "admin", "backup-script")
    return Tour(succeeded_run=ok[0], failed_run=failed[0], big_run=big[0])


PAGES = [
    ("dashboard", "/", "Dashboard"),
    ("bulk-jobs", "/jobs", "Bulk jobs"),
    ("job-form-new", "/jobs/new", "New bulk job"),
    ("job-form-edit", "/jobs/nightly-backup/edit", "Edit bulk job nightly-backup"),
    ("targets", "/targets", "Targets"),
    ("target-form", "/targets/new", "Add a target"),
    ("target-page", "/targets/alpha", "alpha"),
    ("runs", "/runs", "Runs"),
    ("run-page", "/runs/{failed_run}", "Run #{failed_run}"),
    ("audit", "/audit", "Audit log"),
    ("users", "/users", "Users"),
    ("tokens", "/tokens", "API tokens"),
    ("cluster", "/cluster", "Cluster"),
]


@pytest.mark.parametrize(("name", "path", "heading"), PAGES, ids=[p[0] for p in PAGES])
def test_the_page_renders_under_the_csp_with_every_control_labelled(
    open_page: OpenPage, server: LiveServer, tour: Tour, name: str, path: str, heading: str
) -> None:
    ids = {"failed_run": tour.failed_run}
    page = open_page("admin")
    response = page.goto(server.at(path.format(**ids)))

    assert response is not None and response.status == 200
    expect(page.locator("main h1")).to_contain_text(heading.format(**ids))
    assert page.evaluate(UNLABELLED) == []
    assert problems_of(page) == []
    screenshot(page, name)


def test_a_standalone_node_shows_its_cluster_status_as_one_line(
    open_page: OpenPage, server: LiveServer, tour: Tour
) -> None:
    page = open_page("admin")
    page.goto(server.at("/"))

    expect(page.locator("#cluster-status")).to_have_text("Standalone: this node runs every job")
    page.locator("#cluster-status a").click()
    expect(page.locator("#cluster-summary")).to_have_text("Standalone: this node runs every job")
    # No nodes table; the one shard (this node's) and the members, none registered.
    expect(page.locator("main table")).to_have_count(2)
    expect(page.locator('main table[data-table="shards"] tr[data-shard]')).to_have_count(1)
    expect(page.locator('main table[data-table="members"] [data-empty="members"]')).to_have_count(1)


def test_a_failed_run_shows_its_exit_code_and_stderr_on_the_target_page(
    open_page: OpenPage, server: LiveServer, tour: Tour
) -> None:
    page = open_page("admin")
    page.goto(server.at("/targets/alpha"))

    row = page.locator(f'#recent-runs tr[data-run="{tour.failed_run}"]')
    expect(row.locator(".badge-bad", has_text="3")).to_be_visible()
    row.get_by_text("stderr").click()
    expect(row.locator("details.output[open] pre")).to_have_text(
        "disk check failed: /var is 97% full\n"
    )
    expect(row).to_contain_text("individual")


def test_the_run_page_says_how_much_of_a_long_output_was_dropped(
    open_page: OpenPage, server: LiveServer, tour: Tour
) -> None:
    output = "".join(f"{n}\n" for n in range(1, 3001)).encode()
    limit = server.app.settings.output_limit_bytes
    page = open_page("admin")
    page.goto(server.at(f"/runs/{tour.big_run}"))

    stdout = page.locator("section.stream", has=page.get_by_role("heading", name="stdout"))
    omitted = len(output) - 2 * limit
    expect(stdout.locator(".note")).to_have_text(
        f"Truncated: {len(output)} bytes in all; the first and last parts are kept, "
        f"{omitted} bytes in the middle were dropped."
    )
    head, tail = stdout.locator("pre").all_inner_texts()
    assert head.encode() == output[:limit]
    assert tail.encode() == output[-limit:]


def test_filtering_runs_by_text_in_their_output_finds_only_the_matching_run(
    open_page: OpenPage, server: LiveServer, tour: Tour
) -> None:
    page = open_page("admin")
    page.goto(server.at("/runs"))
    page.get_by_label("Text in output").fill("97% full")
    page.get_by_label("Target").select_option("alpha")
    page.get_by_role("button", name="Filter").click()

    expect(page.locator("table.runs tbody tr[data-run]")).to_have_count(1)
    expect(page.locator(f'tr[data-run="{tour.failed_run}"]')).to_be_visible()
    expect(page.locator(".pager")).to_contain_text("1–1 of 1 runs")
