"""The scheduler's host probe task: fresh connections to the SSH targets that are due.

Beside the ticks, never in them: :meth:`HostProber.poke` (called after every tick) starts a
round every :attr:`HostProber.every_s` when the previous one finished. A round reads the
targets due (:func:`fleetcron.services.targets.reach.due_probes`; those behind jump hosts
with their chains) on a worker thread, probes them with at most ``probe_concurrency``
connections open
(:func:`fleetcron.executors.ssh_probe.probe_many`) and records the results on a worker
thread. Only the owner node probes. A round never raises: errors are logged and the next
round tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from fleetcron.app import App
from fleetcron.executors.base import RunTarget, SshTarget
from fleetcron.executors.kinds import KEY_CACHE_SIZE, ssh_target
from fleetcron.executors.ssh_probe import probe_many
from fleetcron.services.targets.reach import due_probes, probes_here, record_probes

log = logging.getLogger(__name__)

#: The longest pause between two rounds (seconds): a target is probed at most this long
#: after its slot.
ROUND_EVERY_MAX_S = 10.0


@dataclass
class HostProber:
    """Probe rounds of one scheduler; ``decrypt`` reveals a target's stored key (kept for
    the most recently used ciphertexts, as the SSH executor keeps them)."""

    app: App
    decrypt: Callable[[bytes], bytes]
    clock: Callable[[], datetime]
    monotonic: Callable[[], float] = time.monotonic
    #: Targets never probed are first probed at their offset after this (default: when
    #: the prober was made), spread over the interval rather than all at once.
    started_at: datetime | None = None
    _task: asyncio.Task[int] | None = field(default=None, init=False)
    _next: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._key = functools.lru_cache(maxsize=KEY_CACHE_SIZE)(self.decrypt)
        if self.started_at is None:
            self.started_at = self.clock()

    @property
    def every_s(self) -> float:
        """Seconds between rounds: a thirtieth of the interval, at most 10 s, at least 0.2 s."""
        return max(0.2, min(ROUND_EVERY_MAX_S, self.app.settings.probe_interval_s / 30))

    def poke(self) -> None:
        """Start a round if one is due and the previous one finished."""
        if self.app.settings.probe_interval_s <= 0:
            return
        if self.monotonic() < self._next or (self._task is not None and not self._task.done()):
            return
        self._next = self.monotonic() + self.every_s
        self._task = asyncio.create_task(self.round(self.clock()), name="fleetcron-probe")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def round(self, now: datetime) -> int:
        """Probe the targets due at ``now``; returns how many were probed."""
        settings = self.app.settings
        try:
            if not await asyncio.to_thread(probes_here, self.app):
                return 0
            due = await asyncio.to_thread(
                functools.partial(
                    due_probes,
                    self.app,
                    now,
                    interval_s=settings.probe_interval_s,
                    since=self.started_at,
                )
            )
            targets = self._connections(due)
            results = await probe_many(
                targets,
                timeout_s=settings.probe_timeout_s,
                concurrency=settings.probe_concurrency,
            )
            await asyncio.to_thread(record_probes, self.app, results, now)
        except Exception:
            log.exception("probe: round failed; will retry", extra={"action": "probe.error"})
            return 0
        return len(results)

    def _connections(self, due: list[tuple[int, RunTarget]]) -> list[tuple[int, SshTarget]]:
        out: list[tuple[int, SshTarget]] = []
        for target_id, record in due:
            try:
                out.append((target_id, ssh_target(record, self._key)))
            except Exception:
                log.warning(
                    "probe: target %s cannot be probed: its key or settings are unusable",
                    record.name,
                    extra={"action": "probe.skipped", "target": record.name},
                )
        return out


__all__ = ["ROUND_EVERY_MAX_S", "HostProber"]
