"""What the incident scenario tests share: a fleet of local targets on a fake executor, a
failing script, one webhook channel, and ``drive``: the clock moved 10 s at a time (the
scheduler's notification interval), each step ticking the scheduler, waiting for its runs,
evaluating alerts and sending what is due, as ``services/alerts/runner.py`` does."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeOutcome
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import RuleTimers, Thresholds, add_channel, add_rule
from fleetcron.services.alerts.deliveries import deliver_due
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.targets import edit as targets
from integration.notify.conftest import WebhookReceiver

FLEET = [f"web{i:02}" for i in range(50)]
STDERR = "rsync: connection unexpectedly closed\ndisk full"
Script = Callable[[RunTarget, ExecRequest], FakeOutcome]


def add_fleet(app: App, names: list[str]) -> None:
    admin = Actor("admin", "admin")
    for index, name in enumerate(names):
        targets.add_target(
            app, admin, TargetSpec(name, TargetKind.LOCAL, labels=[f"rack=r{index % 5}"])
        )


def failing(*, unless: Callable[[str], bool] = lambda name: False) -> Script:
    def script(target: RunTarget, request: ExecRequest) -> FakeOutcome:
        if unless(target.name):
            return FakeOutcome()
        return FakeOutcome(exit_code=3, stderr=STDERR)

    return script


def hook(
    app: App, admin: Actor, webhook: WebhookReceiver, *, name: str = "ops", **timers: float
) -> None:
    """A channel to ``webhook`` (``name``) and a rule for every job with these timers."""
    add_channel(app, admin, name, WebhookSpec(url=webhook.url))
    add_rule(app, admin, name, timers=RuleTimers(**timers))


def hook_job(app: App, admin: Actor, webhook: WebhookReceiver, job: str, **timers: float) -> None:
    """A channel to ``webhook`` named after ``job``, with a rule for that job alone."""
    add_channel(app, admin, job, WebhookSpec(url=webhook.url))
    add_rule(app, admin, job, job=job, timers=RuleTimers(**timers))


def hook_counting(
    app: App,
    admin: Actor,
    webhook: WebhookReceiver,
    *,
    failures: int,
    successes: int,
    name: str = "ops",
) -> None:
    """A channel to ``webhook`` (``name``), with a rule waiting for ``failures`` failed
    slots and ``successes``."""
    add_channel(app, admin, name, WebhookSpec(url=webhook.url))
    add_rule(app, admin, name, thresholds=Thresholds(failures, successes))


async def drive(
    app: App, scheduler: Scheduler, clock: FakeClock, minutes: float, step_s: float = 30.0
) -> None:
    """``minutes`` of the fake clock, a scheduler tick, an alert round and a delivery round
    every ``step_s``. Two rounds a minute: each slot's runs are decided in the tick after
    the slot and evaluated in the same step, and an overdue slot (the misfire grace is 60 s)
    is seen in the step after the grace; a finer step repeats rounds that find nothing new
    (10 s steps cost these scenarios half as much CPU again and changed no count they
    assert)."""
    for _ in range(round(minutes * 60 / step_s)):
        clock.advance(seconds=step_s)
        await scheduler.tick()
        await scheduler.idle()
        evaluate_alerts(app, clock.now)
        deliver_due(app, clock.now)


def messages(webhook: WebhookReceiver) -> list[dict[str, Any]]:
    return [json.loads(request.body) for request in webhook.requests]


def counts(webhook: WebhookReceiver) -> Counter[str]:
    return Counter(body["message"] for body in messages(webhook))


def expect(webhook: WebhookReceiver, **expected: int) -> None:
    """The receiver got exactly these messages, and no other kind."""
    got = counts(webhook)
    assert dict(got) == {k: v for k, v in expected.items() if v}, got
