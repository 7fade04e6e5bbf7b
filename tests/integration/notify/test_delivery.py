"""Delivering queued messages to a real HTTP receiver and a real SMTP server.

The ``app`` here allows 3 attempts, 30 s apart and doubling, with a 30 s timeout.
"""

from __future__ import annotations

import asyncio
import email
import json
import threading
from datetime import timedelta
from email.message import Message
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.notify.email import EmailSpec
from fleetcron.notify.webhook import SIGNATURE_HEADER, WebhookSpec, verify
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.channels import add_channel, add_rule, send_test_message
from fleetcron.services.alerts.deliveries import deliver_due
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.alerts.runner import run_notifications
from fleetcron.store.schema import NotificationChannel, NotificationDelivery
from integration.notify.conftest import (
    FAILING,
    HeldReceiver,
    SmtpReceiver,
    WebhookReceiver,
    add_job,
    next_minute,
)

SECRET = "webhook-signing-key-1"


def deliveries(app: App) -> list[NotificationDelivery]:
    with app.db.read() as session:
        return list(session.scalars(select(NotificationDelivery).order_by(NotificationDelivery.id)))


async def a_failure(app: App, admin: Actor, scheduler: Scheduler, clock: FakeClock) -> None:
    """Job backup fails once on box, and group_wait (30 s) later its incident's first
    message is queued for every channel."""
    add_job(app, admin, "backup", FAILING)
    await next_minute(scheduler, clock)
    assert evaluate_alerts(app, clock.now) == 0
    clock.advance(seconds=30)
    assert evaluate_alerts(app, clock.now) >= 1


def channel_to(app: App, admin: Actor, url: str, *, secret: str | None = SECRET) -> None:
    add_channel(app, admin, "ops", WebhookSpec(url=url, secret=secret))
    add_rule(app, admin, "ops")


async def test_a_webhook_gets_the_alert_as_json_signed_with_the_channel_secret(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    channel_to(app, admin, webhook.url)
    await a_failure(app, admin, scheduler, clock)

    assert deliver_due(app, clock.now) == 1

    [request] = webhook.requests
    assert request.path == "/hooks/fleetcron?token=abc"
    assert request.headers["Content-Type"] == "application/json; charset=utf-8"
    assert verify(SECRET.encode(), request.body, request.headers[SIGNATURE_HEADER])
    assert not verify(b"another-key-entirely", request.body, request.headers[SIGNATURE_HEADER])
    body = json.loads(request.body)
    [delivery] = deliveries(app)
    assert body["delivery_id"] == delivery.id == int(request.headers["X-Fleetcron-Delivery"])
    assert body["schema"] == "fleetcron.incident/1"
    assert request.headers["X-Fleetcron-Event"] == "failure"
    assert (body["event"], body["status"], body["job"]["name"]) == ("failure", "firing", "backup")
    assert body["targets"]["shown"] == [{"id": body["targets"]["shown"][0]["id"], "name": "box"}]
    assert body["run"]["exit_code"] == 3
    assert (delivery.status, delivery.attempts, delivery.sent_at) == ("sent", 1, clock.now)


async def test_a_sent_message_is_not_sent_again(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    channel_to(app, admin, webhook.url)
    await a_failure(app, admin, scheduler, clock)
    deliver_due(app, clock.now)

    clock.advance(hours=1)

    assert deliver_due(app, clock.now) == 0
    assert len(webhook.requests) == 1


def test_an_unsigned_webhook_carries_no_signature(
    app: App, admin: Actor, webhook: WebhookReceiver
) -> None:
    channel_to(app, admin, webhook.url, secret=None)

    send_test_message(app, admin, "ops")

    [request] = webhook.requests
    assert SIGNATURE_HEADER not in request.headers
    assert json.loads(request.body)["event"] == "test"


async def test_an_email_reaches_its_recipients_with_the_alert_subject(
    app: App, admin: Actor, box: str, scheduler: Scheduler, clock: FakeClock, smtp: SmtpReceiver
) -> None:
    spec = EmailSpec(
        host="127.0.0.1",
        port=smtp.port,
        sender="fleetcron@example.com",
        to=["ops@example.com", "oncall@example.com"],
    )
    add_channel(app, admin, "mail", spec)
    add_rule(app, admin, "mail")
    await a_failure(app, admin, scheduler, clock)

    deliver_due(app, clock.now)

    [mail] = smtp.mails
    assert mail.sender == "fleetcron@example.com"
    assert mail.recipients == ["ops@example.com", "oncall@example.com"]
    message: Message = email.message_from_bytes(mail.content)
    assert message["Subject"] == "[fleetcron] #1 backup failing: 1 target"
    assert message["To"] == "ops@example.com, oncall@example.com"
    assert message["References"] == "<fleetcron-incident-1@example.com>"
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes)
    lines = body.decode().splitlines()
    assert "Targets (1): box" in lines
    assert any(line.startswith("First failing run: /runs/") for line in lines)
    assert lines[-3:] == ["stderr:", "  disk full", "  giving up"]
    assert [d.status for d in deliveries(app)] == ["sent"]


def test_an_smtp_login_uses_the_password_stored_encrypted(
    app: App, admin: Actor, smtp: SmtpReceiver
) -> None:
    spec = EmailSpec(
        host="127.0.0.1",
        port=smtp.port,
        sender="fleetcron@example.com",
        to=["ops@example.com"],
        username="alerts",
        password="relay-password-1",
    )
    add_channel(app, admin, "mail", spec)

    send_test_message(app, admin, "mail")

    assert smtp.logins == [("alerts", "relay-password-1")]
    assert len(smtp.mails) == 1
    with app.db.read() as session:
        channel = session.scalars(select(NotificationChannel)).one()
    assert channel.secret_enc is not None and b"relay-password-1" not in channel.secret_enc
    assert "relay-password-1" not in json.dumps(channel.config)


async def test_a_failing_receiver_is_retried_with_backoff_until_the_last_attempt(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    channel_to(app, admin, webhook.url)
    await a_failure(app, admin, scheduler, clock)
    webhook.answer(500)
    start = clock.now

    first = deliver_due(app, clock.now)  # 500
    [after_first] = deliveries(app)
    clock.advance(seconds=29)
    too_early = deliver_due(app, clock.now)
    webhook.close()  # from now on nothing listens on the port
    clock.advance(seconds=1)
    second = deliver_due(app, clock.now)  # connection refused
    [after_second] = deliveries(app)
    clock.advance(seconds=60)
    third = deliver_due(app, clock.now)  # refused again: the last attempt
    clock.advance(days=1)
    after_giving_up = deliver_due(app, clock.now)

    assert (first, too_early, second, third, after_giving_up) == (1, 0, 1, 1, 0)
    assert after_first.status == "pending"
    assert after_first.next_attempt_at == start + timedelta(seconds=30)
    assert after_first.last_error is not None and "answered HTTP 500" in after_first.last_error
    assert "token" not in after_first.last_error  # errors name the origin only
    assert after_second.next_attempt_at == start + timedelta(seconds=30 + 60)
    assert after_second.last_error is not None and "connection refused" in after_second.last_error
    [final] = deliveries(app)
    assert (final.status, final.attempts, final.next_attempt_at) == ("failed", 3, None)
    assert len(webhook.requests) == 1


async def test_a_hung_receiver_does_not_hold_up_the_scheduler(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    held_receiver: HeldReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A read timeout far longer than any tick on a loaded machine: the POST is still
    # waiting when the tick is done, and is answered only on release.
    monkeypatch.setattr(app, "settings", app.settings.model_copy(update={"notify_timeout_s": 60}))
    channel_to(app, admin, f"http://127.0.0.1:{held_receiver.port}/hook")
    await a_failure(app, admin, scheduler, clock)

    notifying = asyncio.create_task(run_notifications(app, clock.now))
    assert await asyncio.to_thread(held_receiver.got_request.wait, 30)
    stats = await next_minute(scheduler, clock)

    assert stats.dispatched == 1
    assert not notifying.done()
    held_receiver.release()
    result = await notifying
    assert (result.attempted, result.errors) == (1, 0)
    [delivery] = deliveries(app)
    assert delivery.status == "pending"
    assert delivery.last_error is not None and "answered HTTP 503" in delivery.last_error


async def test_a_receiver_that_never_answers_is_given_up_after_the_timeout(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    held_receiver: HeldReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app, "settings", app.settings.model_copy(update={"notify_timeout_s": 1}))
    channel_to(app, admin, f"http://127.0.0.1:{held_receiver.port}/hook")
    await a_failure(app, admin, scheduler, clock)

    result = await run_notifications(app, clock.now)  # never released: 1 s, then given up

    assert (result.attempted, result.errors) == (1, 0)
    [delivery] = deliveries(app)
    assert delivery.status == "pending"
    assert delivery.last_error == f"no answer from http://127.0.0.1:{held_receiver.port} within 1 s"


async def test_a_secret_this_master_key_cannot_decrypt_is_recorded_not_raised(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    webhook: WebhookReceiver,
    database_url: str,
    tmp_path: Path,
) -> None:
    channel_to(app, admin, webhook.url)
    await a_failure(app, admin, scheduler, clock)
    other_key = App.open(make_settings(tmp_path / "other", database_url), clock=clock)

    try:
        stats = await run_notifications(other_key, clock.now)
    finally:
        other_key.close()

    assert (stats.attempted, stats.errors) == (1, 0)
    [delivery] = deliveries(app)
    assert delivery.last_error is not None and "master key" in delivery.last_error
    assert webhook.requests == []


async def test_two_delivery_rounds_at_once_send_each_message_once(
    app: App,
    admin: Actor,
    box: str,
    scheduler: Scheduler,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    channel_to(app, admin, webhook.url)
    await a_failure(app, admin, scheduler, clock)
    webhook.delay_s = 0.3
    sent: list[int] = []

    rounds = [
        threading.Thread(target=lambda: sent.append(deliver_due(app, clock.now))) for _ in range(2)
    ]
    for thread in rounds:
        thread.start()
    for thread in rounds:
        thread.join()

    assert sorted(sent) == [0, 1]
    assert len(webhook.requests) == 1
