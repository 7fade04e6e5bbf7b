"""The runs this process is running now, for whoever follows them.

The scheduler opens a :class:`LiveRun` when it launches a run and closes it once the run's
outcome is recorded. Each holds the run's :class:`~fleetcron.executors.output.LiveOutput`
(the executors feed it as the command prints; bounded, head and tail) and its stop
request. The web app of the same process (``fleetcron serve``) reaches the registry as
``app.state.scheduler.live``; readers in other processes (the CLI, other nodes' pages)
read the snapshot the scheduler writes into the run row every
:data:`SNAPSHOT_INTERVAL_S` seconds (``runs.live_output``), so what they see is at most
that old.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from fleetcron.executors.output import LIVE_HEAD_BYTES, LIVE_TAIL_BYTES, LiveOutput

SNAPSHOT_INTERVAL_S: Final = 2.0
"""How often the scheduler writes the tail of its running runs' output to the database
(one transaction for all runs whose output grew; never per chunk)."""
SNAPSHOT_BYTES: Final = 8192
"""Bytes of the tail written in a snapshot."""


@dataclass
class LiveRun:
    """One running run of this process."""

    run_id: int
    job: str
    target: str
    node: str
    started_at: datetime
    output: LiveOutput
    loop: asyncio.AbstractEventLoop
    #: Who asked to stop it (set with the stop request).
    stopped_by: str | None = None
    #: ``output.total_bytes`` when the last snapshot was written (-1: none yet).
    snapshot_bytes: int = -1

    def request_stop(self, by: str) -> None:
        """Ask the executor to kill the run; callable from any thread."""
        if self.stopped_by is None:
            self.stopped_by = by
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.output.request_stop()
        else:
            self.loop.call_soon_threadsafe(self.output.request_stop)


@dataclass
class LiveRuns:
    """Run id -> :class:`LiveRun`, for the runs this process runs now."""

    head_limit: int = LIVE_HEAD_BYTES
    tail_limit: int = LIVE_TAIL_BYTES
    _runs: dict[int, LiveRun] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def open(
        self, run_id: int, *, job: str, target: str, node: str, started_at: datetime
    ) -> LiveRun:
        """Register a run being launched (on the scheduler's event loop)."""
        entry = LiveRun(
            run_id=run_id,
            job=job,
            target=target,
            node=node,
            started_at=started_at,
            output=LiveOutput(self.head_limit, self.tail_limit),
            loop=asyncio.get_running_loop(),
        )
        with self._lock:
            self._runs[run_id] = entry
        return entry

    def get(self, run_id: int) -> LiveRun | None:
        with self._lock:
            return self._runs.get(run_id)

    def close(self, run_id: int) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    def ids(self) -> frozenset[int]:
        """The runs launched here and not yet recorded."""
        with self._lock:
            return frozenset(self._runs)

    def request_stop(self, run_id: int, by: str) -> bool:
        """Ask to stop ``run_id`` if this process runs it; False when it does not."""
        entry = self.get(run_id)
        if entry is None:
            return False
        entry.request_stop(by)
        return True

    def changed_snapshots(self) -> list[tuple[int, str, int]]:
        """``(run id, tail text, bytes so far)`` of every run whose output grew since its
        last snapshot; marks them written."""
        with self._lock:
            entries = list(self._runs.values())
        snapshots = []
        for entry in entries:
            total = entry.output.total_bytes
            if total == entry.snapshot_bytes:
                continue
            chunk = entry.output.read(max(total - SNAPSHOT_BYTES, 0))
            entry.snapshot_bytes = chunk.offset
            snapshots.append((entry.run_id, chunk.text, chunk.offset))
        return snapshots
