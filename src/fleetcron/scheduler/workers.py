"""The worker processes of ``fleetcron scheduler --workers N`` (and ``serve``): one node,
N processes, each with its own event loop, so every core of the machine executes.

The process the operator started is worker 0 (with the web UI under ``serve``); it starts
workers 1 to N-1 as ``fleetcron scheduler --worker-of I/N``, restarts one that exits
(after a pause that doubles up to :data:`RESTART_MAX_S` while it keeps failing), and on
its own stop asks them to stop and waits for them. A worker dies with its parent (the
kernel sends it SIGTERM: ``PR_SET_PDEATHSIG``), so a killed group leaves no orphan
executing beside its successor. Which shards each worker executes is decided in
:mod:`fleetcron.services.cluster.workers`.

Written here rather than with ``multiprocessing``: each worker is a fresh interpreter
running the same command an operator could type (no state inherited through ``fork``
from a process that already holds database connections and threads).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from fleetcron.config_sources import pass_secrets_to_child
from fleetcron.core.members import Worker
from fleetcron.errors import InvalidInput

__all__ = ["WorkerGroup", "die_with_parent", "parse_worker_of"]

log = logging.getLogger(__name__)

#: The longest pause before restarting a worker that keeps exiting (seconds).
RESTART_MAX_S = 30.0
#: How often the group looks at its workers (seconds).
WATCH_S = 0.5
#: ``prctl`` option: the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: The environment variable naming the worker's parent (checked after ``prctl``).
PARENT_VARIABLE = "FLEETCRON_WORKER_PARENT"


def parse_worker_of(value: str) -> Worker:
    """``I/N`` of ``--worker-of``."""
    index, sep, count = value.partition("/")
    if not sep or not index.isdigit() or not count.isdigit():
        raise InvalidInput(
            f"worker-of: {value!r} is not I/N",
            field="worker-of",
            value=value,
            allowed="I/N with 0 < I < N, e.g. 1/2",
        )
    try:
        return Worker(int(index), int(count))
    except ValueError as exc:
        raise InvalidInput(
            f"worker-of: {exc}", field="worker-of", value=value, allowed="0 < I < N"
        ) from None


def die_with_parent() -> None:
    """Ask the kernel to stop this worker (SIGTERM) when the process that started it ends,
    and stop at once if it already has."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    parent = os.environ.get(PARENT_VARIABLE)
    if parent is not None and parent.isdigit() and os.getppid() != int(parent):
        raise SystemExit("fleetcron worker: the scheduler that started it has stopped")


@dataclass
class _Child:
    worker: Worker
    process: subprocess.Popen[bytes] | None = None
    failures: int = 0
    start_after: float = 0.0


@dataclass
class WorkerGroup:
    """Workers 1 to ``count - 1`` of this node, started and kept running by worker 0."""

    count: int
    children: list[_Child] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.children = [_Child(Worker(i, self.count)) for i in range(1, self.count)]

    def start(self) -> None:
        for child in self.children:
            self._spawn(child)

    def _spawn(self, child: _Child) -> None:
        env_extra, secret_fd = pass_secrets_to_child()
        env = {**os.environ, **env_extra, PARENT_VARIABLE: str(os.getpid())}
        argv = [sys.executable, "-m", "fleetcron", "scheduler", "--worker-of"]
        try:
            child.process = subprocess.Popen(
                [*argv, f"{child.worker.index}/{child.worker.count}"],
                env=env,
                pass_fds=(secret_fd,) if secret_fd is not None else (),
                stdin=subprocess.DEVNULL,
            )
        finally:
            if secret_fd is not None:
                os.close(secret_fd)
        log.info(
            "cron: started worker %d of %d (pid %d)",
            child.worker.index,
            child.worker.count,
            child.process.pid,
            extra={"action": "scheduler.worker_start", "worker": child.worker.index},
        )

    def pids(self) -> list[int]:
        return [c.process.pid for c in self.children if c.process is not None]

    async def watch(self, stop: asyncio.Event) -> None:
        """Restart workers that exit until ``stop`` is set."""
        while not stop.is_set():
            for child in self.children:
                self._look_at(child)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), WATCH_S)

    def _look_at(self, child: _Child) -> None:
        now = time.monotonic()
        if child.process is None:
            if now >= child.start_after:
                self._spawn(child)
            return
        code = child.process.poll()
        if code is None:
            return
        child.failures += 1
        pause = min(RESTART_MAX_S, 0.5 * 2 ** (child.failures - 1))
        log.error(
            "cron: worker %d exited with %d; restarting it in %gs",
            child.worker.index,
            code,
            pause,
            extra={"action": "scheduler.worker_exit", "worker": child.worker.index},
        )
        child.process, child.start_after = None, now + pause

    async def stop(self, grace_s: float) -> None:
        """Ask every worker to stop (SIGTERM: each lets its runs finish within its own
        grace, as a single scheduler does) and wait; kill those still there after
        ``grace_s``."""
        running = [c.process for c in self.children if c.process is not None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in running:
            left = max(0.0, deadline - time.monotonic())
            try:
                await asyncio.to_thread(process.wait, left)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait)
