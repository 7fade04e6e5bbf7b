"""The fleet view counts a target whose newest run has not started (``pending`` its turn
in a rollout, or ``queued``) as *waiting*, not as running: the per-job counts, the grid,
the job page and its API, on SQLite and PostgreSQL. Before, every active status counted
as running, so a rollout's held slots showed the whole fleet running."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.status_display import state_of
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.fleet import grid as fleet_grid
from fleetcron.services.fleet import job_page as job_fleet
from fleetcron.services.fleet.job_page import TargetQuery
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore

ADMIN = Actor("admin", "admin")
VIEWER = Actor("victor", "viewer")
NAMES = ("alpha", "bravo", "charlie")
CARD = re.compile(r'<span class="big[^"]*">(\d+)</span><span class="label">([a-z]+)</span>')


def fire(app: App, clock: FakeClock) -> None:
    """Three targets; ``wave`` rolls out one at a time (its slot is held, ``pending``),
    ``plain`` has no rollout (its slot starts everywhere at once, ``running``)."""
    for name in NAMES:
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "wave", JobSpec("* * * * *", "echo wave", batch="1"), bulk=True)
    jobs.add_job(app, ADMIN, "plain", JobSpec("* * * * *", "echo plain"), bulk=True)
    clock.advance(minutes=1)
    RunStore(app.db, node="test", clock=clock).claim_due(clock.now)


def test_held_and_queued_runs_are_waiting_and_running_ones_running() -> None:
    assert [state_of(s) for s in statuses.WAITING] == ["waiting", "waiting"]
    assert state_of(statuses.RunStatus.RUNNING) == "running"
    assert all(state_of(s) not in ("running", "waiting") for s in statuses.TERMINAL)


def test_the_counts_and_the_grid_put_a_held_slot_under_waiting(
    app: App, clock: FakeClock
) -> None:
    fire(app, clock)

    counts = fleet_grid.job_counts(app, VIEWER)
    grid = fleet_grid.fleet_grid(app, VIEWER)

    assert (counts["wave"].waiting, counts["wave"].running, counts["wave"].total) == (3, 0, 3)
    # negative control: the job without a rollout started everywhere
    assert (counts["plain"].waiting, counts["plain"].running) == (0, 3)
    assert {grid.cells[(t, "wave")].state for t in NAMES} == {"waiting"}
    assert {grid.cells[(t, "plain")].state for t in NAMES} == {"running"}


def test_the_job_page_and_its_api_count_and_filter_waiting(
    app: App, clock: FakeClock, browser: TestClient
) -> None:
    fire(app, clock)

    page = browser.get("/jobs/wave")
    api = browser.get("/api/v1/jobs/wave/targets", params={"status": "waiting"})
    plain = job_fleet.job_targets(app, VIEWER, "plain", TargetQuery(statuses=["waiting"]))

    assert page.status_code == 200, page.text
    cards = {label: int(n) for n, label in CARD.findall(page.text)}
    assert (cards["waiting"], cards["running"]) == (3, 0)
    assert re.findall(r'<tr data-target="[^"]+" data-state="([^"]+)"', page.text) == [
        "waiting"
    ] * 3
    assert api.status_code == 200, api.text
    body = api.json()
    assert (body["counts"]["waiting"], body["counts"]["running"]) == (3, 0)
    assert [item["target"] for item in body["items"]] == list(NAMES)
    assert plain.items == []
