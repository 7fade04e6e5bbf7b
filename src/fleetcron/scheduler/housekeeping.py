"""Periodic work beside the ticks: cluster maintenance and retention.

Runs on the scheduler's database thread every ``maintenance_interval_s``; each part is
guarded so that one failing never stops the others or the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fleetcron.services import cluster, retention
from fleetcron.services.context import SYSTEM, App

log = logging.getLogger(__name__)

#: Retention runs at most this often (seconds): pruning is cheap but need not be constant.
PRUNE_EVERY_S = 3600.0


@dataclass
class Housekeeping:
    app: App
    extra: list[Callable[[], object]] = field(default_factory=list)
    _next_prune: float = 0.0

    def __call__(self) -> None:
        if self.app.settings.cluster:
            self._guarded("cluster maintenance", lambda: cluster.maintain(self.app))
        if time.monotonic() >= self._next_prune:
            self._next_prune = time.monotonic() + PRUNE_EVERY_S
            self._guarded("retention", lambda: retention.prune(self.app, SYSTEM))
        for task in self.extra:
            self._guarded(getattr(task, "__name__", "housekeeping task"), task)

    def _guarded(self, what: str, task: Callable[[], object]) -> None:
        try:
            task()
        except Exception:
            log.exception(
                "housekeeping: %s failed; will retry", what, extra={"action": "housekeeping.error"}
            )
