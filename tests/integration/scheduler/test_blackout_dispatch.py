"""Blackout windows in the real scheduler, on SQLite and PostgreSQL, with a fake executor
and a hand-moved clock (it starts at 2026-03-02 09:00:30 UTC).

A job firing every minute on ``box`` meets a window from 09:02 to 09:05 UTC: its slots in
the window are recorded ``skipped`` (kind ``blackout``, the reason naming the window), the
09:05 slot runs. With ``on_blackout: defer`` the 09:02 slot waits ``queued`` and runs at
09:05 with its own slot, the later ones are skipped saying so; lifting the window early
starts the waiting run on the next tick. The negative control plans without the rule and
sees the slots run inside the window.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.statuses import SkipKind
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.blackouts.windows import BlackoutSpec, add_blackout, lift_blackout
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store import runs as run_store
from fleetcron.store.schema import Run

WINDOW = BlackoutSpec(
    name="kernel patch",
    reason="rack r12 reboots",
    job="nightly",
    zone="UTC",
    start="2026-03-02 09:02",
    end="2026-03-02 09:05",
)


def at(minute: int) -> datetime:
    return datetime(2026, 3, 2, 9, minute, tzinfo=UTC)


@pytest.fixture
def nightly(app: App, admin: Actor) -> str:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "nightly", JobSpec(schedule="* * * * *", command="true"), target="box")
    return "nightly"


def runs_of(app: App) -> list[Run]:
    with app.db.read() as session:
        query = select(Run).where(Run.job_name == "nightly").order_by(Run.scheduled_for, Run.id)
        return list(session.scalars(query))


async def minutes(scheduler: Scheduler, clock: FakeClock, until_minute: int) -> None:
    """Tick once a minute (one second past it) until ``until_minute`` past nine."""
    while clock.now < at(until_minute):
        clock.advance(minutes=1)
        await scheduler.tick()
        await scheduler.idle()


async def test_slots_inside_a_window_are_skipped_naming_it(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, operator: Actor, nightly: str
) -> None:
    window = add_blackout(app, operator, WINDOW)

    await minutes(fake_scheduler, clock, 6)

    found = [(r.scheduled_for.minute, r.status, r.skip_kind) for r in runs_of(app)]
    assert found == [
        (1, "succeeded", None),
        (2, "skipped", SkipKind.BLACKOUT),
        (3, "skipped", SkipKind.BLACKOUT),
        (4, "skipped", SkipKind.BLACKOUT),
        (5, "succeeded", None),
        (6, "succeeded", None),
    ]
    skipped = runs_of(app)[1]
    assert skipped.reason == (
        f'blackout window #{window.id} "kernel patch" until 2026-03-02T09:05:00+00:00'
    )


async def test_a_deferring_job_runs_the_first_covered_slot_at_the_windows_end(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, operator: Actor, nightly: str
) -> None:
    jobs.edit_job(app, operator, nightly, on_blackout="defer")
    add_blackout(app, operator, WINDOW)

    await minutes(fake_scheduler, clock, 4)
    waiting = [r for r in runs_of(app) if r.status == "queued"]
    assert [(r.scheduled_for, r.trigger, r.not_before) for r in waiting] == [
        (at(2), "deferred", at(5))
    ]
    await minutes(fake_scheduler, clock, 5)

    found = [(r.scheduled_for.minute, r.trigger, r.status) for r in runs_of(app)]
    assert found == [
        (1, "schedule", "succeeded"),
        (2, "deferred", "succeeded"),
        (3, "schedule", "skipped"),
        (4, "schedule", "skipped"),
        (5, "schedule", "succeeded"),
    ]
    deferred = runs_of(app)[1]
    assert deferred.started_at is not None and deferred.started_at >= at(5)
    assert all("already waits" in (r.reason or "") for r in runs_of(app)[2:4])


async def test_lifting_a_window_starts_the_deferred_run_at_once(
    app: App, fake_scheduler: Scheduler, clock: FakeClock, operator: Actor, nightly: str
) -> None:
    jobs.edit_job(app, operator, nightly, on_blackout="defer")
    window = add_blackout(app, operator, replace(WINDOW, end="2026-03-02 10:00"))
    await minutes(fake_scheduler, clock, 3)

    lift_blackout(app, operator, window.id, "patched early")
    await fake_scheduler.tick()
    await fake_scheduler.idle()

    deferred = runs_of(app)[1]
    assert (deferred.trigger, deferred.status) == ("deferred", "succeeded")
    assert deferred.started_at is not None and deferred.started_at < at(4)


async def test_without_the_rule_slots_run_inside_the_window(
    app: App,
    fake_scheduler: Scheduler,
    clock: FakeClock,
    operator: Actor,
    nightly: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control: the planner without ``black_out`` runs every slot."""
    monkeypatch.setattr(run_store, "black_out", lambda plan, _state: plan)
    add_blackout(app, operator, WINDOW)

    await minutes(fake_scheduler, clock, 4)

    assert [r.status for r in runs_of(app)] == ["succeeded"] * 4
