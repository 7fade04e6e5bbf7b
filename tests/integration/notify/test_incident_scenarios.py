"""Incidents end to end: a real scheduler, a real database (SQLite and PostgreSQL), a real
loopback webhook receiver, and a fake clock so that half an hour of failing slots takes
seconds.

The clock starts at 2026-03-02 09:00:30 UTC. ``drive`` moves it 10 s at a time (the
scheduler's notification interval) and at each step ticks the scheduler, waits for its
runs, evaluates alerts and sends what is due, as ``services/alerts/runner.py`` does. Every
count below is of the HTTP requests the receiver got.

Where a test's negative control differs from it only in a rule's timers, one drive tells
both: the control's rule is on a second channel (the ``pager`` receiver), told of the same
incidents, so the half hour of slots is simulated once. Where it differs in what happens to
the job (an acknowledgement, a silence, when the flapping stops), the control is a second
job on the same targets in the same slots, with a rule of its own to the ``pager``.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from sqlalchemy import func, select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts import incident_ops
from fleetcron.services.alerts.silences import SilenceSpec, add_silence
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.store.schema import Job, Run
from integration.notify.conftest import WebhookReceiver
from integration.notify.scenario import (
    FLEET,
    STDERR,
    Script,
    add_fleet,
    counts,
    drive,
    expect,
    failing,
    hook,
    hook_job,
    messages,
)

# Half an hour of slots on a fake clock: 2-11 s each (2 cores, 2026-12-06).
pytestmark = pytest.mark.slow


def slot_runs(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


async def fifty_targets_fail_for_thirty_slots(
    app: App,
    admin: Actor,
    operator: Actor,
    scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    """A bulk job on 50 targets fails everywhere for 10 slots, then on all but the last 5
    for 20 more (one change of the set), then succeeds everywhere."""
    hook(app, admin, webhook)
    add_fleet(app, FLEET)
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = failing()
    await drive(app, scheduler, clock, minutes=10)
    fake.script = failing(unless=lambda name: name >= "web45")
    await drive(app, scheduler, clock, minutes=20)
    fake.script = failing(unless=lambda name: True)
    await drive(app, scheduler, clock, minutes=2)


async def test_a_bulk_job_failing_for_thirty_slots_is_one_incident_of_three_messages(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    pager: WebhookReceiver,
) -> None:
    # The same outage is told to a second channel whose rule reminds every ten minutes:
    # the negative control of the count check (below), from the same half hour of slots.
    hook(app, admin, pager, name="pager", repeat_interval_s=600)
    await fifty_targets_fail_for_thirty_slots(
        app, admin, operator, fake_scheduler, fake, clock, webhook
    )

    expect(webhook, firing=1, update=1, reminder=0, resolved=1)
    firing, update, resolved = messages(webhook)
    assert firing["schema"] == "fleetcron.incident/1"
    assert firing["incident_id"] == update["incident_id"] == resolved["incident_id"]
    assert (firing["status"], firing["cause"], firing["job"]["name"]) == (
        "firing",
        "failing",
        "backup",
    )
    assert (firing["previous_state"], firing["state"]) == ("ok", "failing")
    # Sent group_wait (30 s) after the first failure of the 09:01 slot, with every target.
    assert firing["at"] == "2026-03-02T09:01:30+00:00"
    assert firing["targets"]["count"] == 50
    assert len(firing["targets"]["shown"]) == 20
    assert firing["targets"]["shown"][0]["name"] == "web00"
    assert firing["run"]["stderr"] == STDERR
    assert firing["run"]["exit_code"] == 3
    assert firing["link"] == "/jobs/backup?status=failing"
    assert firing["clusters"] == [{"reason": "exit 3", "count": 50, "labels": {}}]
    assert firing["subject"] == "[fleetcron] #1 backup failing: 50 targets".replace(
        "#1", f"#{firing['incident_id']}"
    )
    # The set changed once (5 recovered with the 09:11 slot), more than group_interval
    # after the firing message: one update, at once.
    assert update["targets"]["count"] == 45
    assert [t["name"] for t in update["targets"]["recovered"]] == FLEET[45:]
    assert update["targets"]["joined"] == []
    assert update["at"] == "2026-03-02T09:11:00+00:00"  # the round the set changed
    assert (resolved["status"], resolved["previous_state"], resolved["state"]) == (
        "resolved",
        "failing",
        "ok",
    )
    assert resolved["failed_slots"] == 30
    assert "RESOLVED after 30m" in resolved["subject"]
    # Every slot of every target is recorded, messages or not.
    assert slot_runs(app) == 50 * 32

    # Negative control: the count check sees reminders when there are. 09:01:30 firing,
    # 09:11:30 update (a reminder is not needed then), a reminder at 09:21:30 (the outage
    # ends with the 09:31 slot's success at 09:31:00).
    with pytest.raises(AssertionError):
        expect(pager, firing=1, update=1, reminder=0, resolved=1)
    assert counts(pager)["reminder"] == 1
    assert counts(pager)["firing"] == 1


async def test_an_acknowledged_incident_sends_no_reminder_but_its_resolved_message(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    pager: WebhookReceiver,
) -> None:
    # Two jobs fail on the same five targets in the same slots: "backup", told to the
    # webhook, is acknowledged; "restore", told to the pager with the same timers, is not
    # (the negative control of the acknowledgement, from the same half hour of slots).
    add_fleet(app, FLEET[:5])
    for job, receiver in (("backup", webhook), ("restore", pager)):
        jobs.add_job(app, operator, job, JobSpec("* * * * *", job), bulk=True)
        hook_job(app, admin, receiver, job, repeat_interval_s=300)
    fake.script = failing()
    await drive(app, fake_scheduler, clock, minutes=2)
    [incident] = incident_ops.list_incidents(app, operator, job="backup")
    incident_ops.acknowledge(app, operator, incident.id, note="looking at the disks")
    await drive(app, fake_scheduler, clock, minutes=20)
    fake.script = failing(unless=lambda name: True)
    await drive(app, fake_scheduler, clock, minutes=2)

    expect(webhook, firing=1, reminder=0, resolved=1)
    assert messages(webhook)[-1]["acknowledged_by"] == operator.name
    assert {body["job"]["name"] for body in messages(webhook)} == {"backup"}

    # Negative control: the same outage unacknowledged reminds every repeat interval.
    expect(pager, firing=1, reminder=4, resolved=1)
    assert {body["job"]["name"] for body in messages(pager)} == {"restore"}
    assert messages(pager)[-1]["acknowledged_by"] is None


def job_runs(app: App, job: str, *, status: str | None = None) -> int:
    query = select(func.count()).select_from(Run).join(Job, Job.id == Run.job_id)
    query = query.where(Job.name == job)
    if status is not None:
        query = query.where(Run.status == status)
    with app.db.read() as session:
        return int(session.scalar(query) or 0)


async def test_a_silence_in_force_sends_nothing_and_the_runs_are_still_recorded(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    pager: WebhookReceiver,
) -> None:
    # Two jobs fail on the same ten targets in the same slots: "backup", told to the
    # webhook, is silenced for an hour; "restore", told to the pager, for 10 minutes of
    # the 30-minute outage (the negative control of the silence, from the same slots).
    add_fleet(app, FLEET[:10])
    for job, receiver, duration_s in (("backup", webhook, 3600), ("restore", pager, 600)):
        jobs.add_job(app, operator, job, JobSpec("* * * * *", job), bulk=True)
        hook_job(app, admin, receiver, job)
        add_silence(app, operator, SilenceSpec(job=job, duration_s=duration_s, reason="disks"))
    fake.script = failing()
    await drive(app, fake_scheduler, clock, minutes=30)
    fake.script = failing(unless=lambda name: True)
    await drive(app, fake_scheduler, clock, minutes=2)

    expect(webhook)
    assert job_runs(app, "backup") == 10 * 32
    assert job_runs(app, "backup", status="failed") == 10 * 30

    # Negative control: the expired silence lifts and the open incident is announced, in
    # the first round after it ended (added at 09:00:30 for 10 minutes).
    expect(pager, firing=1, resolved=1)
    assert messages(pager)[0]["at"] == "2026-03-02T09:10:30+00:00"
    assert messages(pager)[0]["job"]["name"] == "restore"


ROLLOUT_FLEET = [f"app{i}" for i in range(6)]


async def test_a_rollout_halting_every_slot_is_one_halted_incident_with_true_states(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    pager: WebhookReceiver,
) -> None:
    # The reproduction of issue 25: a canary failing every slot halted every slot and sent
    # one message per slot, each saying "previous_state: ok". The negative control of the
    # halt bound is a second channel told of the same slots: a group_interval of 10 s and
    # a repeat_interval of 60 s, the closest rules to "one message per slot".
    hook(app, admin, webhook)
    hook(app, admin, pager, name="pager", group_interval_s=10, repeat_interval_s=60)
    add_fleet(app, ROLLOUT_FLEET)
    jobs.add_job(
        app,
        operator,
        "reload",
        JobSpec("* * * * *", "reload", batch="2", canary="app0"),
        bulk=True,
    )
    fake.script = failing(unless=lambda name: name != "app0")
    await drive(app, fake_scheduler, clock, minutes=30)
    per_slot = Counter(body["message"] for body in messages(pager) if body["cause"] == "halted")
    fake.script = failing(unless=lambda name: True)
    await drive(app, fake_scheduler, clock, minutes=3)

    by_cause = Counter((body["cause"], body["message"]) for body in messages(webhook))
    assert by_cause == {
        ("failing", "firing"): 1,
        ("failing", "resolved"): 1,
        ("halted", "firing"): 1,
        # The first slot after the fix recovers the skipped targets wave by wave: the set
        # changes once (an update naming the first wave), then every target recovered.
        ("halted", "update"): 1,
        ("halted", "resolved"): 1,
    }
    halted = [body for body in messages(webhook) if body["cause"] == "halted"]
    assert halted[0]["targets"]["count"] == 5
    assert "canary" in halted[0]["reason"]
    # The canary's stored state when the first slot halted: it had just failed.
    failing_first = next(b for b in messages(webhook) if b["cause"] == "failing")
    assert (failing_first["previous_state"], failing_first["state"]) == ("ok", "failing")
    # The halt is decided a tick after the canary failed, and that failure was already
    # evaluated: the stored state it reports is "failing", where the old code wrote "ok".
    assert (halted[0]["previous_state"], halted[0]["state"]) == ("failing", "failing")
    assert [t["name"] for t in halted[1]["targets"]["recovered"]] == ["app1", "app2"]
    assert (halted[2]["previous_state"], halted[2]["state"]) == ("failing", "ok")
    assert halted[2]["failed_slots"] == 30
    with app.db.read() as session:
        halted_rows = session.scalar(
            select(func.count()).select_from(Run).where(Run.skip_kind == "rollout_halted")
        )
    assert halted_rows == 5 * 30

    # Negative control: the closest rules to "one message per slot" make the same bound
    # fail over the thirty halted slots.
    assert per_slot["firing"] == 1
    assert per_slot["reminder"] >= 25


def by_job(modes: dict[str, str]) -> Script:
    """Each job as ``modes`` says at its run (read then): ``flap`` fails in odd minutes and
    succeeds in even ones (its state flips every slot), ``fail`` fails, anything else (or
    no mode) succeeds."""

    def script(target: RunTarget, request: ExecRequest) -> FakeOutcome:
        mode = modes.get(request.env["FLEETCRON_JOB"])
        minute = datetime.fromisoformat(request.env["FLEETCRON_SCHEDULED_FOR"]).minute
        if mode == "fail" or (mode == "flap" and minute % 2):
            return FakeOutcome(exit_code=3, stderr=STDERR)
        return FakeOutcome()

    return script


async def test_a_flapping_target_sends_one_flapping_message_then_nothing_until_stable(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    pager: WebhookReceiver,
) -> None:
    # Two jobs on one target flap from the same slot: "backup", told to the webhook, for
    # half an hour; "restore", told to the pager, for 10 minutes, then it succeeds (the
    # negative control: five flips in an hour, from the same slots).
    add_fleet(app, FLEET[:1])
    for job, receiver in (("backup", webhook), ("restore", pager)):
        jobs.add_job(app, operator, job, JobSpec("* * * * *", job), bulk=True)
        hook_job(app, admin, receiver, job)
    modes = {"backup": "flap", "restore": "flap"}
    fake.script = by_job(modes)
    await drive(app, fake_scheduler, clock, minutes=10)
    modes["restore"] = "ok"
    await drive(app, fake_scheduler, clock, minutes=2)

    # Negative control: five incidents, each announced and resolved, no flapping message.
    with pytest.raises(AssertionError):
        expect(pager, firing=5, resolved=5, flapping=1)
    expect(pager, firing=5, resolved=5)

    await drive(app, fake_scheduler, clock, minutes=18)
    modes["backup"] = "ok"

    # Five incidents (09:01, 09:03, ... 09:09) are announced and resolved; the sixth, at
    # 09:11, makes six within an hour: one flapping message, then quiet.
    expect(webhook, firing=5, resolved=5, flapping=1)
    flapping_message = messages(webhook)[-1]
    assert flapping_message["message"] == "flapping"
    assert flapping_message["flapping"] == {"incidents": 6, "window_s": 3600.0}
    assert "FLAPPING (6 incidents in 1h)" in flapping_message["subject"]

    # Stable for an hour (the flapping incidents age out of the window), then a real
    # failure is announced as usual.
    await drive(app, fake_scheduler, clock, minutes=61, step_s=60)
    modes["backup"] = "fail"
    await drive(app, fake_scheduler, clock, minutes=1)
    expect(webhook, firing=6, resolved=5, flapping=1)
