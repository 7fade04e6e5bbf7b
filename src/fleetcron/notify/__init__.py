"""Senders of notifications: the I/O edge of alerting.

:func:`send` delivers one message to one channel — a webhook (JSON POST, see
:mod:`fleetcron.notify.webhook`) or an email (SMTP, see :mod:`fleetcron.notify.email`) —
within a timeout, and raises :class:`DeliveryFailed` with a message an operator can act on
for anything that goes wrong. Nothing here touches the database; callers send outside any
transaction and record the outcome afterwards. :mod:`fleetcron.notify.channels` holds what
a channel's settings are and the rules for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetcron.crypto import Secret
from fleetcron.errors import FleetcronError


class DeliveryFailed(FleetcronError):
    """The notification could not be delivered."""


def send(
    kind: str,
    config: Mapping[str, Any],
    secret: Secret | None,
    message: Mapping[str, Any],
    *,
    delivery_id: int | None,
    timeout: float,
) -> str | None:
    """Send ``message`` (a ``fleetcron.alert/1`` payload) through a channel.

    Returns None, or a note about a partial success (recipients an SMTP server refused
    while accepting others: sending again would duplicate the message for the rest).
    Raises :class:`DeliveryFailed`.
    """
    # Imported here: the sender modules import DeliveryFailed from this package.
    if kind == "webhook":
        from fleetcron.notify import webhook

        webhook.post_message(
            str(config["url"]),
            message,
            secret=secret,
            delivery_id=delivery_id,
            timeout=timeout,
        )
        return None
    if kind == "email":
        from fleetcron.notify import email

        return email.send_mail(
            host=str(config["host"]),
            port=int(config["port"]),
            starttls=bool(config.get("starttls")),
            username=config.get("username"),
            password=secret,
            sender=str(config["sender"]),
            to=[str(address) for address in config["to"]],
            subject=str(message["subject"]),
            text=str(message["text"]),
            timeout=timeout,
        )
    raise DeliveryFailed(f"unknown channel kind {kind!r}")


__all__ = ["DeliveryFailed", "send"]
