"""The delivery queue: claim due deliveries, send them, record each attempt.

:func:`deliver_due` claims due deliveries (on PostgreSQL skipping rows another node is
claiming), counts the attempt and leases them, sends them *outside* any transaction with a
timeout through their channel's kind (:mod:`fleetcron.notify.registry`), and records each
attempt: ``sent``, or ``pending`` again with exponential backoff, or ``failed`` after
``notify_max_attempts``. A record is written only if no one claimed the delivery again
after the lease ran out.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from fleetcron.app import App
from fleetcron.config import Settings
from fleetcron.core.alerts import delivery_delay
from fleetcron.crypto import Secret
from fleetcron.errors import FleetcronError
from fleetcron.notify import Sending
from fleetcron.notify.registry import KINDS, kind_named
from fleetcron.store.schema import NotificationChannel, NotificationDelivery

log = logging.getLogger(__name__)

#: Deliveries claimed by one :func:`deliver_due` call.
DELIVERY_BATCH = 100
#: Sends in flight at once within that call.
SEND_CONCURRENCY = 8
MAX_ERROR_LENGTH = 500


@dataclass(frozen=True)
class Outbound:
    """One claimed delivery attempt: plain data, no session."""

    delivery_id: int | None
    attempt: int
    channel: str
    kind: str
    config: dict[str, Any]
    secret_enc: bytes | None = field(repr=False)
    message: dict[str, Any] = field(repr=False)


def deliver_due(app: App, now: datetime, *, limit: int = DELIVERY_BATCH) -> int:
    """Send up to ``limit`` pending deliveries whose ``next_attempt_at`` has come; returns
    how many attempts were made. Never raises for a channel's failure: each attempt's
    outcome is recorded on its delivery. Blocks for up to about ``notify_timeout_s`` per
    round of :data:`SEND_CONCURRENCY` sends: call it from a worker thread."""
    claimed = _claim(app, now, limit)
    if not claimed:
        return 0
    with ThreadPoolExecutor(
        max_workers=min(SEND_CONCURRENCY, len(claimed)), thread_name_prefix="fleetcron-notify"
    ) as pool:
        outcomes = list(pool.map(lambda outbound: _attempt(app, outbound), claimed))
    _record(app, now, list(zip(claimed, outcomes, strict=True)))
    return len(claimed)


def _lease(app: App) -> timedelta:
    # A claimed delivery is not due again until its attempt is certainly over: every SMTP
    # step may take the full timeout. If this process dies mid-send, it is retried then.
    return timedelta(seconds=max(60.0, 10 * app.settings.notify_timeout_s))


def _claim(app: App, now: datetime, limit: int) -> list[Outbound]:
    with app.db.session() as session:
        query = (
            select(NotificationDelivery.id)
            .join(NotificationChannel, NotificationChannel.id == NotificationDelivery.channel_id)
            .where(
                NotificationDelivery.status == "pending",
                NotificationDelivery.next_attempt_at <= now,
                NotificationChannel.enabled.is_(True),
            )
            .order_by(NotificationDelivery.next_attempt_at, NotificationDelivery.id)
            .limit(limit)
        )
        if session.get_bind().dialect.name == "postgresql":
            # Another node's claim in progress is skipped, not waited for.
            query = query.with_for_update(skip_locked=True, of=NotificationDelivery)
        ids = list(session.scalars(query))
        if not ids:
            return []
        # Counting the attempt at the claim bounds the attempts even across crashes.
        session.execute(
            update(NotificationDelivery)
            .where(NotificationDelivery.id.in_(ids))
            .values(
                attempts=NotificationDelivery.attempts + 1,
                next_attempt_at=now + _lease(app),
            )
        )
        rows = session.execute(
            select(NotificationDelivery, NotificationChannel)
            .join(NotificationChannel, NotificationChannel.id == NotificationDelivery.channel_id)
            .where(NotificationDelivery.id.in_(ids))
            .order_by(NotificationDelivery.id)
            .execution_options(populate_existing=True)
        ).all()
        return [
            Outbound(
                delivery_id=d.id,
                attempt=d.attempts,
                channel=c.name,
                kind=c.kind,
                config=dict(c.config),
                secret_enc=c.secret_enc,
                message=dict(d.payload),
            )
            for d, c in rows
        ]


_SEALED: set[str] = set()


def seal_stored_urls(app: App) -> int:
    """Encrypt what channels still store in clear (webhook URLs of channels added before
    URLs were encrypted); returns how many channels changed. Done by the notifier once per
    process and database; the master key is not available to schema migrations, so this is
    not one."""
    database = app.settings.effective_database_url
    if database in _SEALED:
        return 0
    sealed = 0
    with app.db.session() as session:
        for channel in session.scalars(select(NotificationChannel)):
            kind = KINDS.get(channel.kind)
            if kind is None:
                continue
            config = dict(channel.config)
            stored = kind.seal(config, app.master_key.encrypt)
            if stored is not config:
                channel.config = stored
                sealed += 1
    _SEALED.add(database)
    if sealed:
        log.info(
            "notify: encrypted %d stored webhook URL(s)",
            sealed,
            extra={"action": "notify.seal", "count": sealed},
        )
    return sealed


def send_outbound(app: App, outbound: Outbound) -> str | None:
    """Send one message through its channel's kind; returns a note on a partial success,
    raises DeliveryFailed (FleetcronError) saying what went wrong."""
    secret: Secret | None = None
    if outbound.secret_enc is not None:
        secret = app.master_key.decrypt(outbound.secret_enc)
    kind = kind_named(outbound.kind)
    config = kind.unseal(outbound.config, lambda token: app.master_key.decrypt(token).reveal())
    sending = Sending(
        delivery_id=outbound.delivery_id,
        timeout=app.settings.notify_timeout_s,
        refuse_private=app.settings.webhook_refuse_private,
    )
    return kind.send(config, secret, outbound.message, sending)


def _attempt(app: App, outbound: Outbound) -> tuple[bool, str | None]:
    """(sent, note or error) of one attempt; never raises."""
    try:
        return True, send_outbound(app, outbound)
    except FleetcronError as exc:
        return False, _bounded(exc.message)
    except Exception as exc:  # a bug in a sender must not stop the other deliveries
        log.exception(
            "notify: delivery %s to %s crashed",
            outbound.delivery_id,
            outbound.channel,
            extra={"action": "notify.error", "channel": outbound.channel},
        )
        return False, _bounded(f"internal error: {type(exc).__name__}: {exc}")


def _record(
    app: App, now: datetime, results: list[tuple[Outbound, tuple[bool, str | None]]]
) -> None:
    """Write and log each attempt's outcome on its delivery: sent, pending a retry after
    the backoff, or failed for good after the last attempt."""
    settings = app.settings
    with app.db.session() as session:
        for outbound, (sent, detail) in results:
            # Written only if no one claimed the delivery again after our lease ran out.
            mine = (NotificationDelivery.id == outbound.delivery_id) & (
                NotificationDelivery.attempts == outbound.attempt
            )
            values, action, level = _outcome(settings, outbound, now, sent=sent, detail=detail)
            session.execute(update(NotificationDelivery).where(mine).values(**values))
            log.log(
                level,
                "notify: delivery %s to %s attempt %d: %s%s",
                outbound.delivery_id,
                outbound.channel,
                outbound.attempt,
                values["status"],
                f" ({detail})" if detail else "",
                extra={
                    "action": action,
                    "channel": outbound.channel,
                    "delivery_id": outbound.delivery_id,
                    "attempt": outbound.attempt,
                },
            )


def _outcome(
    settings: Settings, outbound: Outbound, now: datetime, *, sent: bool, detail: str | None
) -> tuple[dict[str, Any], str, int]:
    """The delivery's new values after an attempt, and the log action and level for it."""
    if sent:
        values: dict[str, Any] = {
            "status": "sent",
            "sent_at": now,
            "next_attempt_at": None,
            "last_error": detail,
        }
        return values, "notify.sent", logging.INFO
    delay = delivery_delay(
        outbound.attempt, settings.notify_backoff_s, settings.notify_max_attempts
    )
    if delay is None:
        values = {"status": "failed", "next_attempt_at": None, "last_error": detail}
        return values, "notify.failed", logging.WARNING
    values = {
        "status": "pending",
        "next_attempt_at": now + timedelta(seconds=delay),
        "last_error": detail,
    }
    return values, "notify.retry", logging.INFO


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"


__all__ = [
    "DELIVERY_BATCH",
    "Outbound",
    "deliver_due",
    "seal_stored_urls",
    "send_outbound",
]
