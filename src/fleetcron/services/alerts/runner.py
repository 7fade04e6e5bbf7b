"""The scheduler's notification hook: one round of evaluation and delivery.

:func:`run_notifications` seals what channels still store in clear, evaluates alerts
(:mod:`fleetcron.services.alerts.evaluation`) and sends what is due
(:mod:`fleetcron.services.alerts.deliveries`), each on a worker thread. It never raises: a broken
channel or database hiccup is logged and retried, and never blocks the scheduler's loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

from fleetcron.app import App
from fleetcron.core.topology import Topology
from fleetcron.services.alerts.deliveries import deliver_due, seal_stored_urls
from fleetcron.services.alerts.evaluation import evaluate_alerts

log = logging.getLogger(__name__)

#: How often the scheduler should call :func:`run_notifications`.
NOTIFY_INTERVAL_S = 10.0


@dataclass(frozen=True)
class NotifyStats:
    """What one :func:`run_notifications` round did."""

    queued: int = 0
    attempted: int = 0
    errors: int = 0


async def run_notifications(app: App, now: datetime) -> NotifyStats:
    """Evaluate alerts, then send what is due, each on a worker thread; never raises
    (except on cancellation). Errors are logged and the next round tries again."""
    queued = attempted = errors = 0
    from fleetcron.services.writer import pair_standby

    if app.settings.topology is Topology.REPLICATED_PAIR:
        try:
            if await asyncio.to_thread(pair_standby, app):
                return NotifyStats()  # the owner of a replicated pair evaluates and delivers
        except Exception:
            log.exception("notify: reading the owner failed", extra={"action": "notify.error"})
            return NotifyStats(errors=1)
    try:
        await asyncio.to_thread(seal_stored_urls, app)
    except Exception:
        errors += 1
        log.exception("notify: encrypting stored URLs failed", extra={"action": "notify.error"})
    try:
        queued = await asyncio.to_thread(evaluate_alerts, app, now)
    except Exception:
        errors += 1
        log.exception("notify: alert evaluation failed", extra={"action": "notify.error"})
    try:
        attempted = await asyncio.to_thread(deliver_due, app, now)
    except Exception:
        errors += 1
        log.exception("notify: delivery round failed", extra={"action": "notify.error"})
    return NotifyStats(queued, attempted, errors)


__all__ = ["NOTIFY_INTERVAL_S", "NotifyStats", "run_notifications"]
