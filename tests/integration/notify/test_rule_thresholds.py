"""A rule's thresholds end to end: ``failures_before`` (N consecutive failed slots before
the rule hears of a target) and ``successes_before`` (M consecutive successes before a
target leaves its incident). Real scheduler, real database, loopback webhook receiver,
fake clock from 2026-03-02 09:00:30 UTC; a job every minute, whose slot's runs finish at
the slot (09:01:00, 09:02:00, ...). Counts are of the requests the receiver got."""

from __future__ import annotations

from datetime import datetime

import pytest

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.errors import InvalidInput
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts import incident_ops
from fleetcron.services.alerts.channels import Thresholds, add_rule, list_rules
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
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
    hook_counting,
    messages,
)

pytestmark = pytest.mark.slow


def fails_unless_minute_divides_by(step: int) -> Script:
    """Fails in every minute but those divisible by ``step``: with 3, two failed slots then
    one success, over and over; with 2, the state flips every slot."""

    def script(target: RunTarget, request: ExecRequest) -> FakeOutcome:
        minute = datetime.fromisoformat(request.env["FLEETCRON_SCHEDULED_FOR"]).minute
        return FakeOutcome() if minute % step == 0 else FakeOutcome(exit_code=3, stderr=STDERR)

    return script


async def outage(
    app: App, operator: Actor, scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    """Ten targets fail for ten slots (09:01 to 09:10), then succeed."""
    add_fleet(app, FLEET[:10])
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = failing()
    await drive(app, scheduler, clock, minutes=10)
    fake.script = failing(unless=lambda name: True)
    await drive(app, scheduler, clock, minutes=4)


async def test_three_failures_before_firing_and_two_successes_before_resolving(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    hook_counting(app, admin, webhook, failures=3, successes=2)
    await outage(app, operator, fake_scheduler, fake, clock)

    expect(webhook, firing=1, resolved=1)
    firing, resolved = messages(webhook)
    # group_wait (30 s) counted from the third failed slot (09:03), not from the first.
    assert firing["at"] == "2026-03-02T09:03:30+00:00"
    assert firing["targets"]["count"] == 10
    # Resolved with the second success (the 09:12 slot), not the first (09:11).
    assert resolved["resolved_at"] == "2026-03-02T09:12:00+00:00"
    assert (resolved["previous_state"], resolved["state"]) == ("failing", "ok")
    assert resolved["failed_slots"] == 10


async def test_the_same_outage_with_the_default_rule_fires_and_resolves_earlier(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    # Negative control of the test above: the times it checks move with the thresholds.
    hook(app, admin, webhook)
    await outage(app, operator, fake_scheduler, fake, clock)

    expect(webhook, firing=1, resolved=1)
    firing, resolved = messages(webhook)
    assert firing["at"] == "2026-03-02T09:01:30+00:00"
    assert resolved["resolved_at"] == "2026-03-02T09:11:00+00:00"
    assert [r.failures_before for r in list_rules(app, admin)] == [1]


async def test_two_failures_at_a_time_never_reach_a_threshold_of_three(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    pager: WebhookReceiver,
) -> None:
    # The negative control is a second channel told of the same slots, whose rule waits
    # for two failed slots (N is the rule's, per channel): it hears of the same failures.
    hook_counting(app, admin, webhook, failures=3, successes=1)
    hook_counting(app, admin, pager, failures=2, successes=1, name="pager")
    add_fleet(app, FLEET[:5])
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = fails_unless_minute_divides_by(3)
    await drive(app, fake_scheduler, clock, minutes=20)

    expect(webhook)
    # The incidents are still recorded; the rule only keeps them from the channel.
    assert len(incident_ops.list_incidents(app, operator, status="resolved")) >= 6

    # Negative control: with N = 2 the same failures are announced.
    with pytest.raises(AssertionError):
        expect(pager)
    assert counts(pager)["firing"] >= 1


async def test_a_target_flipping_every_slot_stays_in_one_incident_under_two_successes(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    # One success never makes two in a row: the incident stays open, announced once; the
    # same flips under the default rule are five incidents and a flapping message
    # (test_incident_scenarios.py, test_a_flapping_target_sends_one_flapping_message...).
    hook_counting(app, admin, webhook, failures=1, successes=2)
    add_fleet(app, FLEET[:1])
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = fails_unless_minute_divides_by(2)
    await drive(app, fake_scheduler, clock, minutes=30)

    expect(webhook, firing=1)
    [incident] = incident_ops.list_incidents(app, operator)
    assert incident.status == "open"
    fake.script = failing(unless=lambda name: True)
    await drive(app, fake_scheduler, clock, minutes=3)
    expect(webhook, firing=1, resolved=1)


def test_thresholds_out_of_range_are_refused_naming_the_field(
    app: App, admin: Actor, webhook: WebhookReceiver
) -> None:
    hook(app, admin, webhook)
    for given, name in (
        (Thresholds(0, 1), "failures_before"),
        (Thresholds(1, 101), "successes_before"),
    ):
        with pytest.raises(InvalidInput) as refused:
            add_rule(app, admin, "ops", job=None, thresholds=given)
        assert refused.value.field == name
        assert "1 to 100" in str(refused.value)
    assert len(list_rules(app, admin)) == 1  # nothing half-saved
