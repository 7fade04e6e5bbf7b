"""group_wait on the real clock: a failure on 5 targets waits the rule's group_wait (3 s
here), then is one message to a real loopback receiver. The scenario tests move a fake
clock; this one lets real time pass, as the scheduler's notifier does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import make_settings
from fleetcron.app import Actor, App, utc_now
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import RuleTimers, add_channel, add_rule
from fleetcron.services.alerts.deliveries import deliver_due
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs.reads import request_run
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Incident
from integration.notify.conftest import WebhookReceiver
from waiting import eventually

pytestmark = [
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
    pytest.mark.serial,  # waits out a real group_wait
]
#: Long enough for the scheduler's shutdown and a first round to come before it ends,
#: however loaded the machine.
GROUP_WAIT_S = 3.0


@pytest.fixture
def real_app(database_url: str, tmp_path: Path) -> Iterator[App]:
    the_app = App.open(make_settings(tmp_path / "real", database_url), clock=utc_now)
    yield the_app
    the_app.close()


async def test_the_first_message_waits_group_wait_in_real_time(
    real_app: App, webhook: WebhookReceiver
) -> None:
    app = real_app
    admin = Actor("admin", "admin")
    add_channel(app, admin, "ops", WebhookSpec(url=webhook.url))
    add_rule(app, admin, "ops", timers=RuleTimers(group_wait_s=GROUP_WAIT_S))
    for index in range(5):
        targets.add_target(app, admin, TargetSpec(f"web{index}", TargetKind.LOCAL))
    jobs.add_job(app, admin, "backup", JobSpec("0 3 * * *", "backup"), bulk=True)
    fake = FakeExecutor(script={"backup": FakeOutcome(exit_code=3, stderr="disk full")})
    scheduler = Scheduler(app, executors={"local": fake})
    await scheduler.start()
    try:
        request_run(app, admin, "backup")
        await scheduler.tick()
        await scheduler.idle()
    finally:
        await scheduler.shutdown()

    # Evaluation rounds on the real clock until the message goes out, each with the
    # instant it evaluated at: the rule is checked against those instants, so a loaded
    # machine's slow rounds change how many there are, never the outcome.
    rounds: list[tuple[datetime, int]] = []

    def a_round() -> int:
        now = utc_now()
        rounds.append((now, evaluate_alerts(app, now)))
        deliver_due(app, now)
        return rounds[-1][1]

    eventually(a_round, 60, lambda: f"the first message; rounds {rounds}", interval=0.2)
    for _ in range(2):  # and nothing more in the rounds after it
        rounds.append((utc_now(), evaluate_alerts(app, utc_now())))
    with app.db.read() as session:
        opened_at = session.scalars(select(Incident.opened_at)).one().replace(tzinfo=UTC)
    due = opened_at + timedelta(seconds=GROUP_WAIT_S)
    before = [count for at, count in rounds if at < due]
    after = [count for at, count in rounds if at >= due]
    assert before and not any(before), rounds  # evaluated, and nothing sent, before it
    assert after[0] == 1 and not any(after[1:]), rounds  # one message, once it passed
    [request] = webhook.requests
    body = json.loads(request.body)
    assert (body["message"], body["targets"]["count"]) == ("firing", 5)
