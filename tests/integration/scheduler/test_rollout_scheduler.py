"""Rollouts driven by the real scheduler on SQLite and PostgreSQL: waves in order with
their pauses, the threshold and the canary halting the rest as skipped with the reason,
and a change of scheduler mid-rollout that runs no row twice.

The fixture clock starts at 2026-03-02 09:00:30 UTC; the job fires once, at 09:01, so the
clock can move freely after it. Runs execute on the fake executor (scripted per target),
which records every execution it was asked for: the effects the checkers count.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import add_channel, add_rule
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import NotificationDelivery, Run

SLOT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
ONCE = "1 9 2 3 *"  # 09:01 on 2 March: one slot


def add_fleet(
    app: App, names: Iterable[str], labels: dict[str, dict[str, str]] | None = None
) -> None:
    admin = Actor("admin", "admin")
    for name in names:
        found = (labels or {}).get(name, {})
        labels_here = [f"{k}={v}" for k, v in found.items()]
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL, labels=labels_here))


def add_rollout_job(
    app: App,
    actor: Actor,
    *,
    batch: str = "",
    batch_pause_s: int = 0,
    max_failures: str = "",
    canary: str = "",
    retries: int = 0,
) -> None:
    jobs.add_job(
        app,
        actor,
        "reload",
        JobSpec(
            ONCE,
            "reload",
            retries=retries,
            retry_on=("failed",),
            retry_backoff_s=1,
            batch=batch,
            batch_pause_s=batch_pause_s,
            max_failures=max_failures,
            canary=canary,
        ),
        bulk=True,
    )


def slot_rows(app: App) -> list[Run]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(Run).where(Run.job_name == "reload").order_by(Run.target_name, Run.attempt)
            )
        )


def statuses(app: App) -> dict[str, str]:
    """Each target's newest row's status."""
    return {r.target_name: str(r.status) for r in slot_rows(app)}


def executed(*fakes: FakeExecutor) -> Counter[str]:
    """How many times each target's command was executed, over every executor."""
    return Counter(target.name for fake in fakes for target, _ in fake.calls)


def failing_on(
    *names: str, duration_s: float = 0.0
) -> Callable[[RunTarget, ExecRequest], FakeOutcome]:
    def script(target: RunTarget, request: ExecRequest) -> FakeOutcome:
        return FakeOutcome(exit_code=1 if target.name in names else 0, duration_s=duration_s)

    return script


async def step(scheduler: Scheduler) -> None:
    await scheduler.tick()
    await scheduler.idle()


NAMES = [f"box{i}" for i in range(6)]


async def test_waves_start_in_target_order_after_each_pause(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, reversed(NAMES))  # added in the opposite order: the plan goes by name
    add_rollout_job(app, operator, batch="2", batch_pause_s=30)
    clock.advance(seconds=31)  # 09:01:01

    await step(fake_scheduler)
    assert [t.name for t, _ in fake.calls] == ["box0", "box1"]
    assert statuses(app) == {
        "box0": "succeeded",
        "box1": "succeeded",
        **{n: "pending" for n in NAMES[2:]},
    }
    done_at = clock.now

    clock.advance(seconds=29)
    await step(fake_scheduler)
    assert len(fake.calls) == 2, "the next wave started before the pause was over"

    clock.advance(seconds=1)  # exactly batch_pause_s after the last finish
    await step(fake_scheduler)
    assert [t.name for t, _ in fake.calls] == ["box0", "box1", "box2", "box3"]

    clock.advance(seconds=30)
    await step(fake_scheduler)
    assert [t.name for t, _ in fake.calls] == NAMES
    rows = slot_rows(app)
    assert all(r.status == RunStatus.SUCCEEDED for r in rows)
    assert all(r.scheduled_for == SLOT and r.attempt == 1 for r in rows)
    starts = {r.target_name: r.started_at for r in rows}
    assert starts["box2"] == starts["box3"] == done_at + timedelta(seconds=30)
    assert starts["box4"] == starts["box5"] == done_at + timedelta(seconds=60)


async def test_the_threshold_halts_the_rest_as_skipped_naming_the_failures(
    app: App,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fleetcron.cron")
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures="2")
    fake.script = failing_on("box1", "box2")
    clock.advance(seconds=31)

    for _ in range(4):
        await step(fake_scheduler)

    assert executed(fake) == Counter({"box0": 1, "box1": 1, "box2": 1, "box3": 1})
    rows = {r.target_name: r for r in slot_rows(app)}
    assert [rows[n].status for n in NAMES] == [
        "succeeded",
        "failed",
        "failed",
        "succeeded",
        "skipped",
        "skipped",
    ]
    for name in ("box4", "box5"):
        assert rows[name].skip_kind == SkipKind.ROLLOUT_HALTED
        assert rows[name].reason == (
            "rollout halted: max_failures 2 reached after failures on box1, box2"
        )
        assert rows[name].started_at is None
    halts = [r for r in caplog.records if getattr(r, "action", None) == "rollout.halted"]
    assert len(halts) == 1
    assert getattr(halts[0], "count", None) == 2 and "box1, box2" in halts[0].getMessage()
    waves = [r for r in caplog.records if getattr(r, "action", None) == "rollout.wave"]
    assert [getattr(r, "count", None) for r in waves] == [2, 2]


async def test_below_the_threshold_every_wave_runs(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    # Negative control of the test above: the same failures, a threshold of 3.
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures="3")
    fake.script = failing_on("box1", "box2")
    clock.advance(seconds=31)

    for _ in range(4):
        await step(fake_scheduler)

    assert executed(fake) == Counter({n: 1 for n in NAMES})
    assert not any(r.status == RunStatus.SKIPPED for r in slot_rows(app))


async def test_a_failed_canary_halts_every_other_target(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES, {"box4": {"role": "canary"}})
    add_rollout_job(app, operator, canary="role=canary", batch="50%")
    fake.script = failing_on("box4")
    clock.advance(seconds=31)

    for _ in range(3):
        await step(fake_scheduler)

    assert executed(fake) == Counter({"box4": 1})
    rows = {r.target_name: r for r in slot_rows(app)}
    assert rows["box4"].status == RunStatus.FAILED
    for name in ("box0", "box1", "box2", "box3", "box5"):
        assert rows[name].status == RunStatus.SKIPPED
        assert rows[name].reason == (
            "rollout halted: canary box4 ended failed; the other targets do not start"
        )


async def test_a_successful_canary_lets_the_rest_start(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, canary="box5", batch="50%")
    clock.advance(seconds=31)

    await step(fake_scheduler)
    assert [t.name for t, _ in fake.calls] == ["box5"]
    await step(fake_scheduler)
    await step(fake_scheduler)
    # 50% of 6 targets: waves of 3 after the canary.
    assert [t.name for t, _ in fake.calls] == ["box5", "box0", "box1", "box2", "box3", "box4"]


async def test_a_retried_target_counts_once_toward_the_threshold(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES[:3])
    add_rollout_job(app, operator, batch="1", max_failures="2", retries=2)
    fake.script = failing_on("box0")
    clock.advance(seconds=31)

    await step(fake_scheduler)  # box0 fails, its retries fail too (three attempts)
    for _ in range(3):
        await step(fake_scheduler)

    rows = slot_rows(app)
    assert [(r.target_name, r.attempt, str(r.status)) for r in rows] == [
        ("box0", 1, "failed"),
        ("box0", 2, "failed"),
        ("box0", 3, "failed"),
        ("box1", 1, "succeeded"),
        ("box2", 1, "succeeded"),
    ]


async def test_a_new_scheduler_continues_the_rollout_and_runs_no_row_twice(
    app: App, operator: Actor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", batch_pause_s=10)
    first = FakeExecutor(clock=clock)
    old = Scheduler(app, clock=clock, executors={"local": first})
    await old.start()
    clock.advance(seconds=31)
    await step(old)
    assert executed(first) == Counter({"box0": 1, "box1": 1})
    # The owner goes away in the pause between two waves; nothing of the plan is kept.
    await old.shutdown()

    fakes = [FakeExecutor(clock=clock), FakeExecutor(clock=clock)]
    new = [Scheduler(app, clock=clock, executors={"local": f}) for f in fakes]
    for scheduler in new:
        await scheduler.start()
    try:
        for _ in range(4):
            clock.advance(seconds=10)
            # Both tick at once: the rows, locked and re-read, decide who starts what.
            await asyncio.gather(*(s.tick() for s in new))
            await asyncio.gather(*(s.idle() for s in new))
    finally:
        for scheduler in new:
            await scheduler.shutdown()

    counts = executed(first, *fakes)
    assert counts == Counter({n: 1 for n in NAMES}), counts
    assert all(r.status == RunStatus.SUCCEEDED for r in slot_rows(app))

    # Negative control: a row that forgot it ran (set back to pending behind the store's
    # back) is executed again, and the same checker sees it.
    with app.db.session() as session:
        session.execute(
            update(Run)
            .where(Run.job_name == "reload", Run.target_name == "box0")
            .values(status=RunStatus.PENDING, finished_at=None, started_at=None)
        )
    again = FakeExecutor(clock=clock)
    rogue = Scheduler(app, clock=clock, executors={"local": again})
    await rogue.start()
    try:
        await step(rogue)
    finally:
        await rogue.shutdown()
    assert executed(first, *fakes, again)["box0"] == 2


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_job_without_rollout_options_starts_every_target_at_once(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch_pause_s=30)  # a pause alone is no rollout
    clock.advance(seconds=31)
    stats = await fake_scheduler.tick()
    await fake_scheduler.idle()
    assert stats.dispatched == len(NAMES)
    assert not any(r.status == RunStatus.PENDING for r in slot_rows(app))


def rollout_messages(app: App) -> list[dict[str, Any]]:
    with app.db.read() as session:
        return [
            d.payload
            for d in session.scalars(select(NotificationDelivery).order_by(NotificationDelivery.id))
            if d.payload.get("cause") == "halted"
        ]


async def halt_with_a_channel(
    app: App,
    admin: Actor,
    operator: Actor,
    scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    max_failures: str,
) -> None:
    add_channel(app, admin, "ops", WebhookSpec(url="http://127.0.0.1:9/hook"))
    add_rule(app, admin, "ops")
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures=max_failures)
    fake.script = failing_on("box1", "box2")
    clock.advance(seconds=31)
    for _ in range(4):
        await step(scheduler)
        clock.advance(seconds=1)


async def test_a_halted_rollout_sends_one_alert_naming_the_threshold(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
) -> None:
    await halt_with_a_channel(app, admin, operator, fake_scheduler, fake, clock, "2")

    evaluate_alerts(app, clock.now)
    clock.advance(seconds=30)
    evaluate_alerts(app, clock.now)  # a second round announces nothing new

    [message] = rollout_messages(app)  # the halted incident's first message
    assert (message["event"], message["status"]) == ("failure", "firing")
    assert (
        message["subject"]
        == f"[fleetcron] #{message['incident_id']} reload rollout halted: 2 targets"
    )
    assert message["reason"] == (
        "rollout halted: max_failures 2 reached after failures on box1, box2; "
        "2 target(s) of the slot were skipped"
    )
    assert [t["name"] for t in message["targets"]["shown"]] == ["box4", "box5"]
    assert message["run"]["status"] == "failed"  # the failure that reached the threshold
    with app.db.read() as session:
        halting = session.get(Run, message["run"]["id"])
    assert halting is not None and halting.target_name == "box2"


async def test_a_rollout_below_its_threshold_sends_no_halt_alert(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
) -> None:
    # Negative control: the same failures under a threshold of 3 halt nothing.
    await halt_with_a_channel(app, admin, operator, fake_scheduler, fake, clock, "3")
    evaluate_alerts(app, clock.now)
    clock.advance(seconds=30)
    evaluate_alerts(app, clock.now)
    assert rollout_messages(app) == []
    with app.db.read() as session:
        failures = session.scalars(
            select(NotificationDelivery).where(NotificationDelivery.event == "failure")
        ).all()
    # The two targets' own failures still go out, as one incident of both.
    [failure] = failures
    assert failure.payload["targets"]["count"] == 2


async def test_a_target_paused_or_disabled_before_its_turn_is_skipped_as_such(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES[:4])
    add_rollout_job(app, operator, batch="1")
    clock.advance(seconds=31)
    await step(fake_scheduler)  # box0 runs
    jobs.set_enabled(app, operator, "reload", False, target="box1")
    targets.pause_target(app, Actor("admin", "admin"), "box2", reason="disk swap")
    for _ in range(3):
        await step(fake_scheduler)

    assert executed(fake) == Counter({"box0": 1, "box3": 1})
    rows = {r.target_name: r for r in slot_rows(app)}
    assert (rows["box1"].status, rows["box1"].skip_kind) == ("skipped", SkipKind.DISABLED)
    assert (rows["box2"].status, rows["box2"].skip_kind) == ("skipped", SkipKind.TARGET_PAUSED)


async def test_a_pending_row_an_operator_stops_is_cancelled_and_the_rollout_goes_on(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES[:3])
    add_rollout_job(app, operator, batch="1", max_failures="1")
    clock.advance(seconds=31)
    await step(fake_scheduler)  # box0 runs; box1 and box2 wait
    box1 = next(r for r in slot_rows(app) if r.target_name == "box1")
    assert box1.status == RunStatus.PENDING
    stopped = runs.stop_run(app, operator, box1.id)
    assert stopped.status == RunStatus.CANCELLED
    for _ in range(3):
        await step(fake_scheduler)

    assert executed(fake) == Counter({"box0": 1, "box2": 1})
    assert statuses(app) == {"box0": "succeeded", "box1": "cancelled", "box2": "succeeded"}


async def test_rows_of_a_removed_job_or_an_unpaired_target_are_skipped_as_removed(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES[:3])
    add_rollout_job(app, operator, batch="1")
    clock.advance(seconds=31)
    await step(fake_scheduler)  # box0 runs
    targets.unpair_target(app, Actor("admin", "admin"), "box1")
    await step(fake_scheduler)  # box1's turn: its assignment is gone
    jobs.remove_job(app, operator, "reload")
    await step(fake_scheduler)

    assert executed(fake) == Counter({"box0": 1})
    rows = {r.target_name: r for r in slot_rows(app)}
    for name in ("box1", "box2"):
        assert (rows[name].status, rows[name].skip_kind) == ("skipped", SkipKind.REMOVED)
    assert rows["box0"].status == RunStatus.SUCCEEDED
