"""A rollout set up in the job form that stops at its failure threshold, watched in a real
Chromium against the live server and its real scheduler (real local processes)."""

from __future__ import annotations

from live_web import ADMIN, LiveServer, OpenPage
from playwright.sync_api import expect
from sqlalchemy import select, update

from fleetcron.core.statuses import RunStatus
from fleetcron.services.jobs.edit import show_job
from fleetcron.store.schema import Assignment, Run
from waiting import eventually

JOB = "risky-change"
HALT = "rollout halted: max_failures 1 reached after failures on bravo"


def statuses(server: LiveServer) -> dict[str, str]:
    with server.app.db.read() as session:
        return {
            name: str(status)
            for name, status in session.execute(
                select(Run.target_name, Run.status).where(Run.job_name == JOB)
            )
        }


def test_a_rollout_that_reaches_its_threshold_shows_the_rest_skipped_with_the_reason(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Name", exact=True).fill(JOB)
    page.get_by_label("Schedule").fill("0 0 1 1 *")
    # Fails on bravo only; the targets go one at a time, alphabetically, a second each.
    page.get_by_label("Command").fill('sleep 1; test "$FLEETCRON_TARGET" != bravo')
    page.get_by_label("Batch", exact=True).fill("1")
    page.get_by_label("Max failures").fill("1")
    page.get_by_role("button", name="Create bulk job").click()
    page.wait_for_url(server.at("/jobs"))
    view = show_job(server.app, ADMIN, JOB)
    assert (view.batch, view.max_failures, view.total) == ("1", "1", 3)

    # Its yearly slot brought to this minute: the live scheduler fires it on its next tick.
    slot = server.app.now().replace(second=0, microsecond=0)
    with server.app.db.session() as session:
        session.execute(
            update(Assignment).where(Assignment.job_id == view.id).values(next_fire_at=slot)
        )
    eventually(
        lambda: statuses(server).get("charlie") == RunStatus.PENDING,
        30,
        lambda: f"charlie's run to wait for its turn: {statuses(server)}",
    )

    # Opened while charlie waits for its turn: the list follows the rollout by itself.
    page.goto(server.at(f"/runs?job={JOB}"))
    if statuses(server).get("charlie") == RunStatus.PENDING:
        expect(page.locator('tr[data-status="pending"]').first).to_contain_text(
            "waits for its turn in the rollout"
        )
    expect(page.locator('tr[data-status="skipped"]')).to_have_count(1, timeout=30_000)
    assert statuses(server) == {"alpha": "succeeded", "bravo": "failed", "charlie": "skipped"}
    rows = page.locator("table.runs tbody tr[data-run]")
    expect(rows).to_have_count(3)
    skipped = page.locator('tr[data-status="skipped"]')
    expect(skipped).to_have_count(1)
    expect(skipped).to_contain_text("charlie")
    expect(skipped).to_contain_text(HALT)
    expect(page.locator('tr[data-status="failed"]')).to_contain_text("bravo")
    expect(page.locator('tr[data-status="succeeded"]')).to_contain_text("alpha")

    # The job page: each target's last run of the slot.
    page.goto(server.at(f"/jobs/{JOB}"))
    for target, status in (("alpha", "succeeded"), ("bravo", "failed"), ("charlie", "skipped")):
        expect(page.locator(f'tr[data-target="{target}"]')).to_have_attribute("data-status", status)

    # The run's own page says why, and the job form shows the options it was given.
    page.goto(server.at(f"/runs?job={JOB}&status=skipped"))
    page.locator('tr[data-status="skipped"] a').first.click()
    expect(page.locator("main")).to_contain_text(HALT)
    page.goto(server.at(f"/jobs/{JOB}/edit"))
    expect(page.get_by_label("Batch", exact=True)).to_have_value("1")
    expect(page.get_by_label("Max failures")).to_have_value("1")
