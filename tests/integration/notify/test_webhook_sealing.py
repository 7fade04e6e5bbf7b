"""Webhook URLs (which often carry a token) are encrypted at rest and shown masked, still
delivered to in full; and an optional setting refuses non-public destinations."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from sqlalchemy import select, update

from fleetcron.app import Actor, App
from fleetcron.config import Settings
from fleetcron.notify import DeliveryFailed
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.services.alerts.channels import add_channel, list_channels, send_test_message
from fleetcron.services.alerts.deliveries import _SEALED, seal_stored_urls
from fleetcron.store.schema import AuditEvent, NotificationChannel
from integration.notify.conftest import WebhookReceiver

TOKEN = "abc"  # the receiver's URL ends in ?token=abc


def stored(app: App) -> dict[str, object]:
    with app.db.read() as session:
        return dict(session.scalars(select(NotificationChannel.config)).one())


def test_a_webhook_url_is_encrypted_at_rest_and_listed_masked(
    app: App, admin: Actor, webhook: WebhookReceiver
) -> None:
    add_channel(app, admin, "hook", WebhookSpec(url=webhook.url))
    [view] = list_channels(app, admin)
    send_test_message(app, admin, "hook")
    with app.db.read() as session:
        audit = json.dumps([e.detail for e in session.scalars(select(AuditEvent))])

    config = stored(app)
    assert "hooks/fleetcron" not in json.dumps(config) and TOKEN not in str(config["url_shown"])
    assert app.master_key.decrypt(str(config["url_enc"]).encode()).reveal() == webhook.url.encode()
    assert view.config == {"url": f"http://127.0.0.1:{webhook.port}/…"}
    assert "token" not in audit
    [request] = webhook.requests
    assert request.path == "/hooks/fleetcron?token=abc"  # delivered to the whole URL


def test_a_url_stored_in_clear_before_is_encrypted_and_still_delivered(
    app: App, admin: Actor, webhook: WebhookReceiver
) -> None:
    add_channel(app, admin, "hook", WebhookSpec(url=webhook.url))
    with app.db.session() as session:  # as a channel added by an older version left it
        session.execute(update(NotificationChannel).values(config={"url": webhook.url}))
    _SEALED.clear()
    listed_before = list_channels(app, admin)[0].config

    assert seal_stored_urls(app) == 1
    assert seal_stored_urls(app) == 0  # once per process and database
    send_test_message(app, admin, "hook")

    assert listed_before == {"url": f"http://127.0.0.1:{webhook.port}/…"}
    assert "url" not in stored(app) and "url_enc" in stored(app)
    assert [r.path for r in webhook.requests] == ["/hooks/fleetcron?token=abc"]


def refusing(app: App) -> App:
    values = {**app.settings.model_dump(), "webhook_refuse_private": True}
    return replace(app, settings=Settings(**values))


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_private_destination_setting_refuses_loopback(
    app: App, admin: Actor, webhook: WebhookReceiver
) -> None:
    add_channel(app, admin, "hook", WebhookSpec(url=webhook.url))

    with pytest.raises(DeliveryFailed, match="non-public address"):
        send_test_message(refusing(app), admin, "hook")
    assert webhook.requests == []
    # negative control: by default loopback receivers (like this test's) are allowed
    send_test_message(app, admin, "hook")
    assert len(webhook.requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:9/",
        "http://2130706433:9/",
        "http://10.1.2.3/",
        "http://[::ffff:127.0.0.1]/",
    ],
)
def test_non_public_addresses_are_refused(url: str) -> None:
    from fleetcron.notify.webhook import refuse_private_destination

    with pytest.raises(DeliveryFailed):
        refuse_private_destination(url)


def test_a_public_address_passes_the_check() -> None:
    """Negative control: the check refuses by address class, not everything."""
    from fleetcron.notify.webhook import refuse_private_destination

    refuse_private_destination("https://93.184.216.34/hook")  # a literal: no DNS needed
