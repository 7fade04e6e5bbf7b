"""A silence of part of a bulk job's targets (the job and a label selector, or the job and
one target) mutes only those targets' share of its incident: the message names and counts
the others, and the muted targets neither join nor recover in it while the silence is in
force. Real scheduler, database and webhook receiver; fake clock from 09:00:30 UTC."""

from __future__ import annotations

import pytest

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.incident_ops import incidents_reading
from fleetcron.services.alerts.silences import SilenceSpec, add_silence
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from integration.notify.conftest import WebhookReceiver
from integration.notify.scenario import FLEET, add_fleet, drive, expect, failing, hook, messages

pytestmark = pytest.mark.slow

# add_fleet labels target i rack=r(i % 5): rack=r0 is web00 and web05 of the first ten.
RACK_R0 = {"web00", "web05"}


async def outage(
    app: App,
    admin: Actor,
    operator: Actor,
    scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
    silence: SilenceSpec | None,
) -> None:
    """Ten targets of a bulk job fail for five slots, then succeed."""
    hook(app, admin, webhook)
    add_fleet(app, FLEET[:10])
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    if silence is not None:
        add_silence(app, operator, silence)
    fake.script = failing()
    await drive(app, scheduler, clock, minutes=5)
    fake.script = failing(unless=lambda name: True)
    await drive(app, scheduler, clock, minutes=2)


def named(body: dict[str, object]) -> set[str]:
    targets = body["targets"]
    assert isinstance(targets, dict)
    return {t["name"] for t in targets["shown"]}


async def test_a_label_silence_mutes_only_its_targets_share(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    silence = SilenceSpec(
        job="backup", selector="rack=r0", duration_s=3600, reason="rack r0 re-cabled"
    )
    await outage(app, admin, operator, fake_scheduler, fake, clock, webhook, silence)

    expect(webhook, firing=1, resolved=1)
    firing, _ = messages(webhook)
    assert firing["targets"]["count"] == 8
    assert named(firing) == set(FLEET[:10]) - RACK_R0
    assert firing["clusters"] == [{"reason": "exit 3", "count": 8, "labels": {}}]


async def test_a_target_silence_mutes_only_that_target(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    silence = SilenceSpec(job="backup", target="web03", duration_s=3600, reason="disk swap")
    await outage(app, admin, operator, fake_scheduler, fake, clock, webhook, silence)

    expect(webhook, firing=1, resolved=1)
    firing, _ = messages(webhook)
    assert firing["targets"]["count"] == 9
    assert "web03" not in named(firing)


async def test_without_the_silence_the_same_outage_counts_every_target(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    # Negative control of the two tests above: the count and the names they check change.
    await outage(app, admin, operator, fake_scheduler, fake, clock, webhook, None)

    expect(webhook, firing=1, resolved=1)
    assert messages(webhook)[0]["targets"]["count"] == 10
    assert named(messages(webhook)[0]) >= RACK_R0


async def test_when_only_the_silenced_targets_fail_nothing_is_sent(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    hook(app, admin, webhook)
    add_fleet(app, FLEET[:10])
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    add_silence(
        app, operator, SilenceSpec(job="backup", selector="rack=r0", duration_s=3600, reason="r0")
    )
    fake.script = failing(unless=lambda name: name not in RACK_R0)
    await drive(app, fake_scheduler, clock, minutes=5)
    expect(webhook)
    # The metrics' gauges say the same: the incident's two targets, muted.
    [reading] = incidents_reading(app).incidents
    assert (reading.job, reading.cause, reading.targets, reading.silenced) == (
        "backup",
        "failing",
        2,
        True,
    )
    # One more target failing outside the silence is announced alone.
    fake.script = failing(unless=lambda name: name not in {*RACK_R0, "web01"})
    await drive(app, fake_scheduler, clock, minutes=2)
    expect(webhook, firing=1)
    assert named(messages(webhook)[0]) == {"web01"}
    [reading] = incidents_reading(app).incidents
    assert (reading.targets, reading.silenced) == (3, False)
