"""Upcoming fires read from a real database (SQLite and PostgreSQL), through the service,
the API and the page. The fixture clock stands at 2026-03-02 09:00:30 UTC (a Monday)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, update

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job, Target
from integration.web.conftest import API, error_of

ADMIN = Actor("admin", "admin")
OPERATOR = Actor("olivia", "operator")


def zone_of(app: App, target: str, zone: str | None) -> None:
    with app.db.session() as session:
        session.execute(update(Target).where(Target.name == target).values(timezone=zone))


def target_local(app: App, job: str) -> None:
    with app.db.session() as session:
        session.execute(update(Job).where(Job.name == job).values(timezone="target"))


@pytest.fixture
def fleet(app: App) -> None:
    """tokyo1, tokyo2 (Asia/Tokyo), berlin1 (Europe/Berlin, paused); the bulk job maint at
    02:00 in each target's zone (disabled on tokyo2) and the individual job backup."""
    for name, zone in (
        ("tokyo1", "Asia/Tokyo"),
        ("tokyo2", "Asia/Tokyo"),
        ("berlin1", "Europe/Berlin"),
    ):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL))
        zone_of(app, name, zone)
    jobs.add_job(
        app, OPERATOR, "maint", JobSpec("0 2 * * *", "m"), bulk=True, disabled_on=["tokyo2"]
    )
    target_local(app, "maint")
    jobs.add_job(
        app, OPERATOR, "backup", JobSpec("30 12 * * *", "b", timezone="UTC"), target="tokyo1"
    )
    targets.pause_target(app, ADMIN, "berlin1", "disk swap")


def test_the_next_day_lists_each_zone_of_a_target_local_job_and_the_individual_job(
    app: App, viewer: Actor, fleet: None
) -> None:
    result = upcoming_fires(app, viewer, UpcomingQuery(hours=24))

    assert [(f.job, f.zone, f.at.astimezone(UTC), f.state) for f in result.fires] == [
        ("backup", "UTC", datetime(2026, 3, 2, 12, 30, tzinfo=UTC), "fires"),
        ("maint", "Asia/Tokyo", datetime(2026, 3, 2, 17, 0, tzinfo=UTC), "fires"),
        ("maint", "Europe/Berlin", datetime(2026, 3, 3, 1, 0, tzinfo=UTC), "paused"),
    ]
    tokyo = result.fires[1]
    assert (tokyo.active, tokyo.paused, tokyo.disabled) == (1, 0, 1)


def test_filters_by_job_and_by_target(app: App, viewer: Actor, fleet: None) -> None:
    by_job = upcoming_fires(app, viewer, UpcomingQuery(hours=24, job="maint"))
    by_target = upcoming_fires(app, viewer, UpcomingQuery(hours=24, target="berlin1"))

    assert {f.job for f in by_job.fires} == {"maint"}
    assert [(f.job, f.zone, f.paused) for f in by_target.fires] == [("maint", "Europe/Berlin", 1)]
    with pytest.raises(NotFound):
        upcoming_fires(app, viewer, UpcomingQuery(job="nope"))


def test_the_spread_shown_is_the_spread_and_the_jitter_together(
    app: App, viewer: Actor, fleet: None
) -> None:
    # A target starts its spread offset and then its jitter after the fire: the last start
    # may come spread + jitter seconds after it.
    jobs.edit_job(app, OPERATOR, "maint", spread_s=60, jitter_s=30)

    fires = upcoming_fires(app, viewer, UpcomingQuery(hours=24, job="maint")).fires

    assert fires and {f.spread_s for f in fires} == {90}
    jobs.edit_job(app, OPERATOR, "maint", jitter_s=0)
    fires = upcoming_fires(app, viewer, UpcomingQuery(hours=24, job="maint")).fires
    assert {f.spread_s for f in fires} == {60}


def test_a_window_out_of_range_is_refused_naming_the_field(app: App, viewer: Actor) -> None:
    with pytest.raises(InvalidInput) as raised:
        upcoming_fires(app, viewer, UpcomingQuery(hours=1000))

    assert raised.value.field == "hours"


def test_the_api_answers_with_counts_per_fire(
    client: TestClient, as_viewer: dict[str, str], fleet: None
) -> None:
    response = client.get(
        f"{API}/upcoming", params={"hours": 24, "job": "maint"}, headers=as_viewer
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["truncated"] is False and "from" in body
    assert [(f["zone"], f["state"], f["targets"]) for f in body["fires"]] == [
        ("Asia/Tokyo", "fires", {"active": 1, "paused": 0, "disabled": 1}),
        ("Europe/Berlin", "paused", {"active": 0, "paused": 1, "disabled": 0}),
    ]
    bad = client.get(f"{API}/upcoming", params={"hours": 0}, headers=as_viewer)
    assert bad.status_code == 422 and error_of(bad)["field"] == "hours"


def test_the_upcoming_page_lists_the_fires_and_marks_paused_ones(
    browser: TestClient, fleet: None
) -> None:
    page = browser.get("/upcoming", params={"hours": "24"})

    assert page.status_code == 200, page.text
    assert page.text.count('<tr data-job="maint"') == 2
    assert 'data-zone="Europe/Berlin" data-state="paused"' in page.text
    assert 'href="/upcoming" aria-current="page"' in page.text
    bad = browser.get("/upcoming", params={"hours": "soon"})
    assert bad.status_code == 422 and "hours: &#39;soon&#39; is not a number" in bad.text


def test_five_thousand_targets_in_three_zones_are_three_schedule_walks(
    app: App, viewer: Actor
) -> None:
    """Grouped by zone: the fires do not multiply with the targets."""
    zones = ("Asia/Tokyo", "Europe/Berlin", "America/New_York")
    with app.db.session() as session:
        now = app.now()
        # One INSERT of many rows (SQLAlchemy's bulk insert), not 5,000 objects flushed.
        session.execute(
            insert(Target),
            [
                {
                    "name": f"t{i:04d}",
                    "kind": "local",
                    "paired": True,
                    "paired_at": now,
                    "timezone": zones[i % 3],
                    "labels": {},
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(5000)
            ],
        )
    jobs.add_job(app, OPERATOR, "fleetwide", JobSpec("*/15 * * * *", "f"), bulk=True)
    target_local(app, "fleetwide")

    result = upcoming_fires(app, viewer, UpcomingQuery(hours=24, limit=10_000))

    assert len(result.fires) == 3 * 96
    assert sum(f.active for f in result.fires if f.at == result.fires[0].at) == 5000
