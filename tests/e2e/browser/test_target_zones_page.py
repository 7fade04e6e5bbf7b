"""A job in the ``target`` zone on targets in three zones, in a real Chromium against the
live server and its real scheduler: the form's preview spreads the next fires over the
zones in use, each target's page shows the job's next fire at 02:00 on its own clock (three
different instants), and after a fire the live scheduler moves each target to 02:00 of its
own next night."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from live_web import ADMIN, LiveServer, OpenPage
from playwright.sync_api import expect
from sqlalchemy import select, update

from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import NotFound
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Assignment, Job, Run
from waiting import eventually

JOB = "local-two-am"
ZONES = {"zberlin": "Europe/Berlin", "znewyork": "America/New_York", "ztokyo": "Asia/Tokyo"}
LABEL = "zone-demo=yes"


@pytest.fixture
def three_zones(server: LiveServer) -> Iterator[None]:
    """Three local targets, one per zone (set by an operator), removed afterwards so the
    other tests keep their three targets."""
    for name, zone in ZONES.items():
        targets.add_target(
            server.app, ADMIN, TargetSpec(name, TargetKind.LOCAL, labels=[LABEL], timezone=zone)
        )
    yield
    with contextlib.suppress(NotFound):
        jobs.remove_job(server.app, ADMIN, JOB)
    for name in ZONES:
        targets.remove_target(server.app, ADMIN, name)


def next_fires(server: LiveServer) -> dict[str, datetime | None]:
    with server.app.db.read() as session:
        return {
            a.target.name: a.next_fire_at
            for a in session.scalars(select(Assignment).join(Job).where(Job.name == JOB))
        }


@pytest.mark.usefixtures("three_zones")
def test_a_target_local_job_shows_and_fires_at_each_targets_own_time(
    open_page: OpenPage, server: LiveServer
) -> None:
    page = open_page("olivia")
    page.goto(server.at("/jobs/new"))
    page.get_by_label("Name", exact=True).fill(JOB)
    page.get_by_label("Time zone").fill("target")
    page.get_by_label("Time zone").dispatch_event("change")
    page.get_by_label("Schedule").fill("0 2 * * *")
    # The live preview: one line per zone in use, 02:00 in each.
    for zone in ZONES.values():
        line = page.locator(f'#schedule-preview .zone-spread li[data-zone="{zone}"]')
        expect(line).to_have_count(1)
        expect(line).to_contain_text(f"{zone} (1 target): ")
        expect(line).to_contain_text("02:00")
    page.get_by_label("Target selector").fill(LABEL)
    page.get_by_label("Command").fill('echo "$FLEETCRON_TARGET"')
    page.get_by_role("button", name="Create bulk job").click()
    page.wait_for_url(server.at("/jobs"))

    fires = next_fires(server)
    assert set(fires) == set(ZONES)
    assert len(set(fires.values())) == 3  # three zones, three instants
    for name, zone in ZONES.items():
        when = fires[name]
        assert when is not None
        local = when.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) in ((2, 0), (3, 0))  # 03:00 on a spring-forward day
        page.goto(server.at(f"/targets/{name}"))
        expect(page.locator("#target-zone")).to_contain_text(f"{zone} (set by an operator)")
        row = page.locator(f'tr[data-job="{JOB}"]')
        expect(row).to_contain_text(f"(target: {zone})")
        expect(row.locator(".next-fire")).to_have_text(
            "next: " + local.strftime("%a %Y-%m-%d %H:%M %Z")
        )

    # The job page names each target's zone and who set it.
    page.goto(server.at(f"/jobs/{JOB}"))
    for name, zone in ZONES.items():
        expect(page.locator(f'tr[data-target="{name}"] [data-zone]')).to_have_text(
            f"{zone} (operator)"
        )

    # Fire all three now: the live scheduler runs them and moves each to its own next 02:00.
    # The slot is this second, not this minute's start: a slot is fired within its misfire
    # grace (60 s) of its time and recorded missed after, so a minute's start set in its
    # last second was missed whenever the next tick came a moment late.
    slot = server.app.now().replace(microsecond=0)
    with server.app.db.session() as session:
        session.execute(
            update(Assignment)
            .where(Assignment.job_id == jobs.show_job(server.app, ADMIN, JOB).id)
            .values(next_fire_at=slot)
        )

    def succeeded() -> set[str]:
        with server.app.db.read() as session:
            return set(
                session.scalars(
                    select(Run.target_name).where(Run.job_name == JOB, Run.status == "succeeded")
                ).all()
            )

    eventually(
        lambda: succeeded() == set(ZONES),
        30,
        lambda: f"a run on every zone's target to succeed: {sorted(succeeded())}",
        interval=0.2,
    )
    after = next_fires(server)
    for name, zone in ZONES.items():
        when = after[name]
        assert when is not None and when > slot.astimezone(UTC)
        local = when.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) in ((2, 0), (3, 0)), (name, local)
        page.goto(server.at(f"/targets/{name}"))
        expect(page.locator(f'tr[data-job="{JOB}"] .next-fire')).to_have_text(
            "next: " + local.strftime("%a %Y-%m-%d %H:%M %Z")
        )
    assert len(set(after.values())) == 3
