"""Alert evaluation on a real database with a real scheduler: one message per change.

The clock starts at 2026-03-02 09:00:30 UTC; a job "* * * * *" added then first fires at
09:01, and each ``next_minute`` fires the next slot 30 s after its time. The rules here have
a group_wait of 0, so an incident is announced in the round that opens it; the timers have
their own tests (test_incident_scenarios.py, tests/unit/core/test_incidents.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import (
    RuleEvents,
    RuleTimers,
    add_channel,
    add_rule,
    list_rules,
)
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.jobs import edit as jobs
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import AlertState, Assignment, NotificationDelivery
from integration.notify.conftest import FAILING, add_job, next_minute


def queued(app: App) -> list[NotificationDelivery]:
    with app.db.read() as session:
        return list(session.scalars(select(NotificationDelivery).order_by(NotificationDelivery.id)))


def events(app: App) -> list[tuple[str, str]]:
    return [(d.event, d.payload["job"]["name"]) for d in queued(app)]


def alert_state(app: App) -> str | None:
    with app.db.read() as session:
        return session.scalar(select(AlertState.state))


def hook(app: App, admin: Actor, name: str = "ops", **rule: object) -> None:
    add_channel(app, admin, name, WebhookSpec(url="http://127.0.0.1:9/hook"))
    add_rule(app, admin, name, timers=RuleTimers(group_wait_s=0), **rule)  # type: ignore[arg-type]


async def test_three_failures_in_a_row_queue_one_message(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", FAILING)

    counts = []
    for _ in range(3):
        await next_minute(scheduler, clock)
        counts.append(evaluate_alerts(app, clock.now))

    assert counts == [1, 0, 0]
    [delivery] = queued(app)
    assert (delivery.event, delivery.status, delivery.attempts) == ("failure", "pending", 0)
    assert delivery.next_attempt_at == datetime(2026, 3, 2, 9, 1, 30, tzinfo=UTC)
    body = delivery.payload
    assert body["subject"] == f"[fleetcron] #{body['incident_id']} backup failing: 1 target"
    assert [t["name"] for t in body["targets"]["shown"]] == ["box"]
    assert body["run"]["status"] == "failed"
    assert body["run"]["stderr"] == "disk full\ngiving up"
    assert body["run"]["link"] == f"/runs/{body['run']['id']}"
    assert body["opened_at"] == "2026-03-02T09:01:30+00:00"
    assert alert_state(app) == "failing"


async def test_the_next_success_queues_one_recovery(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", FAILING)
    for _ in range(2):
        await next_minute(scheduler, clock)
        evaluate_alerts(app, clock.now)
    jobs.edit_job(app, admin, "backup", command="true")

    for _ in range(2):
        await next_minute(scheduler, clock)
        evaluate_alerts(app, clock.now)

    assert events(app) == [("failure", "backup"), ("recovery", "backup")]
    recovery = queued(app)[1].payload
    assert recovery["subject"].endswith("backup failing: RESOLVED after 2m")
    assert recovery["previous_state"] == "failing"
    assert alert_state(app) == "ok"


async def test_evaluating_twice_without_news_queues_nothing_more(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", FAILING)
    await next_minute(scheduler, clock)

    assert [evaluate_alerts(app, clock.now) for _ in range(3)] == [1, 0, 0]


async def test_a_slot_nobody_decided_is_one_late_message_until_it_recovers(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", "true")

    # The scheduler is "down": 09:01 is due, still undecided after the 60 s grace.
    clock.advance(seconds=60)  # 09:01:30, within the grace
    assert evaluate_alerts(app, clock.now) == 0
    clock.advance(seconds=31)  # 09:02:01
    late = [evaluate_alerts(app, clock.now)]
    for _ in range(3):
        clock.advance(minutes=1)
        late.append(evaluate_alerts(app, clock.now))
    # It comes back: the missed slots are recorded, the current one runs and succeeds.
    await scheduler.tick()
    await scheduler.idle()
    recovered = evaluate_alerts(app, clock.now)

    assert late == [1, 0, 0, 0]
    assert recovered == 1
    assert events(app) == [("late", "backup"), ("recovery", "backup")]
    body = queued(app)[0].payload
    assert body["run"] is None
    assert body["cause"] == "late"
    assert "the slot 2026-03-02 09:01:00 UTC has not started 60 s after" in body["reason"]


async def test_slots_missed_while_the_only_node_was_down_are_reported_after_its_restart(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", "true")
    clock.advance(minutes=5)  # 09:05:30: nobody evaluated while the node was down
    await scheduler.tick()  # 09:01-09:04 recorded missed, 09:05 runs and succeeds
    await scheduler.idle()

    # Opened and resolved in one round: one resolved message that says what happened.
    assert evaluate_alerts(app, clock.now) == 1
    assert evaluate_alerts(app, clock.now) == 0

    [recovery] = queued(app)
    body = recovery.payload
    assert (recovery.event, body["cause"], body["previous_state"]) == ("recovery", "late", "late")
    assert body["run"]["status"] == "missed"
    assert body["reason"] == "scheduler was not running at this time"
    assert body["failed_slots"] == 4


async def test_a_failure_already_followed_by_a_success_is_still_reported(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", FAILING)
    await next_minute(scheduler, clock)
    jobs.edit_job(app, admin, "backup", command="true")
    await next_minute(scheduler, clock)

    evaluate_alerts(app, clock.now)

    # One resolved message about the failure that already recovered.
    assert events(app) == [("recovery", "backup")]
    assert queued(app)[0].payload["run"]["status"] == "failed"


async def test_a_run_stuck_past_its_deadline_is_late_then_a_failure_when_found_lost(
    app: App, admin: Actor, box: str, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", "sleep 1000")
    store = RunStore(app.db, node=app.node_name, clock=clock)
    clock.advance(seconds=31)
    [dispatch] = store.claim_due(clock.now).dispatches  # started; its node then vanished
    with app.db.session() as session:  # keep the next slots from making it late first
        session.execute(update(Assignment).values(next_fire_at=clock.now + timedelta(days=1)))

    clock.advance(seconds=300 + 61)  # past the run's timeout and the claim margin
    stuck = evaluate_alerts(app, clock.now)
    clock.advance(seconds=5)  # the node restarts and closes what it left running
    store.close_lost(clock.now)
    lost = evaluate_alerts(app, clock.now)

    # The cause changes: the "stuck" incident resolves and a "failing" one opens.
    assert (stuck, lost) == (1, 2)
    late, unstuck, failure = queued(app)
    assert late.event == "late" and late.payload["run"]["id"] == dispatch.run_id
    assert late.payload["cause"] == "stuck"
    assert "still running past its deadline" in late.payload["reason"]
    assert (unstuck.event, unstuck.payload["cause"]) == ("recovery", "stuck")
    assert failure.event == "failure" and failure.payload["run"]["status"] == "lost"


async def test_a_rule_for_one_job_sends_only_that_job_and_only_its_events(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add_job(app, admin, "backup", FAILING)
    add_job(app, admin, "report", FAILING + " # report")
    hook(app, admin, job="backup", events=RuleEvents(recovery=False))

    await next_minute(scheduler, clock)
    evaluate_alerts(app, clock.now)
    jobs.edit_job(app, admin, "backup", command="true")
    await next_minute(scheduler, clock)
    evaluate_alerts(app, clock.now)

    assert events(app) == [("failure", "backup")]


async def test_a_channel_named_by_two_rules_gets_one_message(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add_job(app, admin, "backup", FAILING)
    hook(app, admin)
    add_rule(app, admin, "ops", job="backup", timers=RuleTimers(group_wait_s=0))
    add_channel(app, admin, "pager", WebhookSpec(url="http://127.0.0.1:9/pager"))
    add_rule(app, admin, "pager", job="backup", timers=RuleTimers(group_wait_s=0))

    await next_minute(scheduler, clock)

    assert evaluate_alerts(app, clock.now) == 2
    assert sorted(d.channel_id for d in queued(app)) == sorted({d.channel_id for d in queued(app)})


async def test_a_removed_job_leaves_no_alert_state_behind(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    hook(app, admin)
    add_job(app, admin, "backup", FAILING)
    await next_minute(scheduler, clock)
    evaluate_alerts(app, clock.now)

    jobs.remove_job(app, admin, "backup")

    assert evaluate_alerts(app, clock.now) == 0
    assert alert_state(app) is None
    assert [r.job for r in list_rules(app, admin)] == [None]  # the global rule stays


async def test_removing_a_job_removes_its_rules(app: App, admin: Actor, box: str) -> None:
    add_job(app, admin, "backup", FAILING)
    hook(app, admin, job="backup")

    jobs.remove_job(app, admin, "backup")

    assert list_rules(app, admin) == []
