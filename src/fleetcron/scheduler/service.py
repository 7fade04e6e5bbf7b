"""The scheduler: the asyncio loop that ties planning, the run store and the executors.

Each tick claims due slots and queued manual runs (one transaction each, through
:class:`~fleetcron.store.runs.RunStore`), starts a task per run, and lets a writer task
record completions in batches. Database calls run on one dedicated thread so the event
loop never blocks on I/O and SQLite sees one writer.

Stopping (SIGTERM/SIGINT): no more claims; running runs get ``shutdown_grace_s`` to finish,
the rest are cancelled (their processes killed) and recorded as ``interrupted``.

Every command runs under a watchdog budget: the seconds left until its claim deadline
(:func:`fleetcron.core.ownership.watchdog_budget`), enforced on the executing machine, so a
command never outlives its claim even when this process is killed, stopped or cut off. A
run whose budget is gone before it starts is not started.

Self-fencing (automatic failover): ``may_execute`` says whether this node renewed its lease
recently enough. A watcher on the event loop (independent of the database thread, which a
cut link to PostgreSQL can block) cancels every in-flight run the moment it turns false —
the executors kill the process groups — and nothing starts until it is true again; the
runs are recorded ``interrupted`` once the database answers (a new owner's guard refuses
the write if it took over; the claims then expire and the runs are closed as ``fenced``).

Active cleanup (``active_cleanup``, cluster mode): once per generation this node owns, a
background task raises the highest-generation mark of the SSH targets older generations'
claims still hold and kills those generations there (:mod:`fleetcron.scheduler.cleanup`).
Every request carries the installation's mark scope, so the wrapper refuses a run whose
generation the target's mark has passed. What a request holds is
:mod:`fleetcron.scheduler.run_request`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from fleetcron.app import App
from fleetcron.coordination.guard import CoordinatedGuard
from fleetcron.core.planning import (
    SlotPolicy,
    retry_delay,
    should_retry,
)
from fleetcron.core.targets import TargetKind
from fleetcron.errors import SecretError
from fleetcron.executors.base import (
    SUPERSEDED,
    ExecRequest,
    ExecResult,
    Executor,
    utc_now,
)
from fleetcron.executors.kinds import SshKind, standard_executors
from fleetcron.executors.local import runs_privileged
from fleetcron.executors.output import STOPPED
from fleetcron.executors.ssh import SshExecutor
from fleetcron.executors.watchdog import shard_scope
from fleetcron.metrics import Metrics, SshPoolReading
from fleetcron.scheduler.cleanup import ActiveCleanup
from fleetcron.scheduler.live import SNAPSHOT_INTERVAL_S, LiveRuns
from fleetcron.scheduler.probes import HostProber
from fleetcron.scheduler.rollout import log_step as log_rollout_step
from fleetcron.scheduler.run_log import log_dispatch, log_done, log_stopped, log_superseded
from fleetcron.scheduler.run_request import (
    ClaimAsking,
    exec_request,
    run_target,
)
from fleetcron.services.alerts.runner import NOTIFY_INTERVAL_S, NotifyStats, run_notifications
from fleetcron.services.cluster import claims
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.workers import WorkerMembership, shards_of
from fleetcron.store.run_dispatch import Dispatch
from fleetcron.store.runs import RunGuard, RunStore

log = logging.getLogger("fleetcron.cron")

T = TypeVar("T")

#: Completions written in one transaction at most.
FINISH_BATCH = 500
#: While other runs are in flight, how long a completion waits for others to share its
#: transaction (each run's times are the executor's, so only when it shows is delayed).
FINISH_GATHER_S = 0.05
#: Fewer completions than this wait once more while the last wait brought others, at most
#: :data:`FINISH_GATHER_WAITS` waits in all (:func:`gather_again`).
FINISH_FEW = 64
FINISH_GATHER_WAITS = 5
#: How often (seconds) the self-fencing watcher checks ``may_execute`` while runs are in
#: flight; with none it sleeps until one starts.
FENCE_CHECK_S = 0.05
#: How often the renewal task asks whether the lease renewal is due (a call on the
#: database thread that does nothing when it is not), when the renewal does not say when
#: it is due next; when it does, the task sleeps until then, at most
#: :data:`RENEWAL_SLEEP_MAX_S`.
RENEWAL_POLL_S = 0.5
RENEWAL_SLEEP_MAX_S = 60.0
#: Added to the time the renewal says it is due, so that the task wakes after it.
RENEWAL_MARGIN_S = 0.005

SELF_FENCED = "this node could not renew its ownership lease in time and fenced itself"
#: ``ExecResult.error`` of a run whose stop was asked for before its command started.
STOPPED_BEFORE_START = "stopped before it started"
#: How often (seconds) runs a crash left ``running`` are looked for again after the start
#: (a restart within a run's deadline finds them still inside it).
LOST_CHECK_S = 30.0


def policy_from(app: App) -> SlotPolicy:
    s = app.settings
    return SlotPolicy(
        grace=timedelta(seconds=s.misfire_grace_s),
        catchup_window=timedelta(seconds=s.catchup_window_s),
        max_missed_records=s.max_missed_records,
        allow_local_targets=s.allow_local_targets,
        default_timezone=s.timezone,
        local_privileged=runs_privileged(s.local_run_as),
        local_job_role=s.local_job_role,
    )


@dataclass
class TickStats:
    """What one tick did; returned for tests and the tick-duration metric."""

    dispatched: int = 0
    missed: int = 0
    skipped: int = 0
    seconds: float = 0.0


@dataclass
class _Finished:
    dispatch: Dispatch
    result: ExecResult
    #: Who stopped the run (it is recorded ``cancelled``); None: it ended by itself.
    stopped_by: str | None = None


def claim_asking(app: App) -> ClaimAsking | None:
    """How this cluster node's runs ask the API about their claims; ``None`` (they get no
    ``FLEETCRON_CLAIM_SECRET``) when the master key cannot be read, which is logged."""
    try:
        return ClaimAsking(claims.secrets_key(app), app.settings.endpoint)
    except SecretError as exc:
        log.warning(
            "runs get no FLEETCRON_CLAIM_SECRET: %s",
            exc.message,
            extra={"action": "scheduler.claim_secret_unavailable"},
        )
        return None


def renewal_sleep(due_in: float | None) -> float:
    """How long the renewal task sleeps when the renewal is due in ``due_in`` seconds
    (``None``: unknown, or the renewal failed)."""
    if due_in is None:
        return RENEWAL_POLL_S
    return min(due_in + RENEWAL_MARGIN_S, RENEWAL_SLEEP_MAX_S)


@dataclass
class Scheduler:
    """One scheduler of one node. ``clock`` is the only time source (tests inject one)."""

    app: App
    guard: RunGuard | None = None
    clock: Callable[[], datetime] = utc_now
    #: One executor per target kind (``Dispatch.target_kind``); by default the local and
    #: SSH executors sized from the settings (``executors.kinds.standard_executors``).
    executors: Mapping[str, Executor] | None = None
    #: Called before every tick on the database thread; it keeps its own timers
    #: (see :class:`fleetcron.scheduler.housekeeping.Housekeeping`).
    maintenance: Callable[[], object] | None = None
    #: Automatic failover: the lease renewal when due (``Housekeeping.renew_if_due``),
    #: called on the database thread by a task of its own, so that it runs between a long
    #: tick's claim batches instead of after the tick. It returns the seconds until it is
    #: due again, and the task sleeps until then (``None``: it asks every
    #: :data:`RENEWAL_POLL_S`).
    renewal: Callable[[], float | None] | None = None
    metrics: Metrics | None = None
    #: Automatic failover: whether this node still holds its lease (see module docstring).
    may_execute: Callable[[], bool] | None = None
    #: One of several worker processes of this node (``--workers``): its row among the
    #: members; it executes its own shards only, and only worker 0 notifies and probes.
    membership: WorkerMembership | None = None
    running: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    last_tick: datetime | None = None

    def __post_init__(self) -> None:
        settings = self.app.settings
        self.runs = RunStore(
            self.app.db,
            node=self.app.node_name,
            guard=self.guard,
            policy=policy_from(self.app),
            clock=self.clock,
            claim_margin=timedelta(seconds=settings.claim_margin_s),
        )
        if self.executors is None:
            self.executors = standard_executors(settings, self.clock, self._decrypt)
        if self.metrics is not None:
            self.metrics.watch_ssh_pool(self._ssh_pool_reading)
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetcron-db")
        self._finished: asyncio.Queue[_Finished] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._fence_watch: asyncio.Task[None] | None = None
        self._retries: set[asyncio.Task[None]] = set()
        #: Set when a run or a retry starts: wakes the self-fencing watcher.
        self._run_started = asyncio.Event()
        self._recording: set[asyncio.Task[None]] = set()
        self.self_fenced = 0
        #: The installation's highest-generation mark on targets (cluster mode only).
        self.mark_scope: str | None = None
        #: The installation's shard count: each shard's runs carry their shard's mark scope.
        self.shards = 1
        #: How runs ask the API about their claims (cluster mode only).
        self.claim_asking: ClaimAsking | None = None
        self.cleanup = ActiveCleanup(self.app, self._in_db)
        #: The runs in flight, for followers of their output and their stop requests.
        self.live = LiveRuns()
        #: Seconds between the snapshots of live output written to the run rows.
        self.live_snapshot_s = SNAPSHOT_INTERVAL_S
        self._next_snapshot = 0.0
        self._next_lost_check = 0.0
        #: Runs waiting for their spread or jitter offset (their commands have not started).
        self._waiting: set[int] = set()
        #: Fresh-connection probes of the SSH targets, beside the ticks.
        self.prober = HostProber(self.app, self._decrypt, self.clock)

    async def _in_db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._db, fn, *args)

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Close runs a crash left behind, then accept completions."""
        await self._close_lost(self.clock())
        if self.app.settings.cluster:
            self.mark_scope = await self._in_db(cluster.mark_scope, self.app)
            self.shards = await self._in_db(cluster.installation_shards, self.app)
            self.claim_asking = claim_asking(self.app)
            await self._take_worker_shards()
        self._writer = asyncio.create_task(self._write_completions(), name="fleetcron-writer")
        if self.may_execute is not None:
            self._fence_watch = asyncio.create_task(self._watch_fence(), name="fleetcron-fence")

    async def _take_worker_shards(self) -> None:
        """As one of several workers of this node: execute only this worker's shards (its
        due slots, queued runs, rollout rows and active cleanup), and join the members."""
        if isinstance(self.guard, CoordinatedGuard) and self.guard.shared:
            # The members placement: start only the work of the shards this node owns.
            self.runs.owner = self.guard.node_id
        if self.membership is None:
            return
        membership = self.membership
        await self._in_db(membership.join)
        if membership.worker.count == 1:
            return
        mine = await self._in_db(shards_of, self.app, membership.node_id, membership.worker)
        self.runs.shards = self.cleanup.shards = mine
        log.info(
            "cron: worker %d of %d executes %d of %d shards",
            membership.worker.index,
            membership.worker.count,
            len(mine),
            self.shards,
            extra={"action": "scheduler.worker", "worker": membership.worker.index},
        )

    @property
    def node_wide(self) -> bool:
        """Whether this process does the node's work beyond its shards (notifications,
        host probes): a node's only scheduler, or its worker 0."""
        return self.membership is None or self.membership.worker.first

    async def serve(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set, then shut down gracefully."""
        await self.start()
        log.info(
            "cron: scheduler started on node %s",
            self.app.node_name,
            extra={"action": "scheduler.start", "node": self.app.node_name},
        )
        notifying: asyncio.Task[NotifyStats] | None = None
        next_notify = time.monotonic()
        renewing = None
        if self.renewal is not None:
            renewing = asyncio.create_task(self._keep_renewing(stop), name="fleetcron-renewal")
        try:
            while not stop.is_set():
                try:
                    if self.maintenance is not None:
                        await self._in_db(self.maintenance)
                    await self.tick()
                    # Notifications run on their own threads: a slow channel never delays a tick.
                    if (
                        self.node_wide
                        and time.monotonic() >= next_notify
                        and (notifying is None or notifying.done())
                    ):
                        next_notify = time.monotonic() + NOTIFY_INTERVAL_S
                        notifying = asyncio.create_task(
                            run_notifications(self.app, self.clock()), name="fleetcron-notify"
                        )
                    if self.node_wide:
                        self.prober.poke()
                except Exception:
                    log.exception("cron: tick failed; retrying", extra={"action": "tick.error"})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.app.settings.tick_s)
        finally:
            if renewing is not None:
                renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewing
            if notifying is not None:
                await asyncio.wait({notifying}, timeout=2 * self.app.settings.notify_timeout_s)
            await self.prober.stop()
            await self.shutdown()

    async def _keep_renewing(self, stop: asyncio.Event) -> None:
        """Run :attr:`renewal` when it is due until ``stop``. The database thread runs one
        call at a time, in order: the renewal waits for the claim batch in progress at
        most, never for the rest of the tick."""
        assert self.renewal is not None
        while not stop.is_set():
            due_in: float | None = None
            try:
                due_in = await self._in_db(self.renewal)
            except Exception:
                log.exception("cron: lease renewal failed", extra={"action": "lease.error"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), renewal_sleep(due_in))

    async def shutdown(self) -> None:
        await self.cleanup.stop()
        if self._fence_watch is not None:
            self._fence_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._fence_watch
        await self._interrupt_waiting()
        grace = self.app.settings.shutdown_grace_s
        pending = [t for t in self.running.values() if not t.done()]
        if pending:
            log.info(
                "cron: waiting up to %gs for %d running run(s)",
                grace,
                len(pending),
                extra={"action": "scheduler.drain", "count": len(pending)},
            )
            await asyncio.wait(pending, timeout=grace)
        for task in self._retries:
            task.cancel()
        leftover = {rid: t for rid, t in self.running.items() if not t.done()}
        for task in leftover.values():
            task.cancel()
        await asyncio.gather(*leftover.values(), *self._retries, return_exceptions=True)
        await self._drain_writer()
        if leftover:
            await self._in_db(
                self.runs.interrupt,
                list(leftover),
                self.clock(),
                "the scheduler was stopped before this run finished",
            )
        assert self.executors is not None
        for executor in self.executors.values():
            await executor.close()
        if self.membership is not None:
            await self._in_db(self.membership.leave)
        self._db.shutdown(wait=True)
        log.info("cron: scheduler stopped", extra={"action": "scheduler.stop"})

    async def _interrupt_waiting(self) -> None:
        """Runs still waiting for their spread or jitter offset do not start once the
        scheduler stops: their commands never ran."""
        waiting = {rid: self.running[rid] for rid in self._waiting if rid in self.running}
        if not waiting:
            return
        for task in waiting.values():
            task.cancel()
        await asyncio.gather(*waiting.values(), return_exceptions=True)
        await self._in_db(
            self.runs.interrupt,
            sorted(waiting),
            self.clock(),
            "the scheduler was stopped before this run started (it was waiting for its "
            "spread or jitter offset); its command did not run",
        )

    # -- ticking ----------------------------------------------------------------------

    async def tick(self) -> TickStats:
        """Claim due slots (in batches, until none is left) and queued manual runs; start them."""
        t0 = time.perf_counter()
        await self._start_active_cleanup()
        now = self.clock()
        if time.monotonic() >= self._next_lost_check:
            await self._close_lost(now)  # before the claims: an overlap check reads them
        stats = TickStats()
        # One read says which of the transactions below have work (store/tick_work.py).
        work = await self._in_db(partial(self.runs.waiting, now, live=bool(self.running)))
        # Decided slots may leave a rollout's first rows or deferred runs behind.
        decided = await self._claim_due(now, stats) if work.due else 0
        if work.rollouts or decided:
            await self._advance_rollouts(now, stats)
        if work.queued or decided:
            for dispatch in await self._in_db(self.runs.claim_queued, now):
                self._launch(dispatch)
                stats.dispatched += 1
        await self._follow_live(now, stops=work.stops)
        if stats.dispatched or stats.missed or stats.skipped:
            _log_tick(now, stats)
        self.last_tick = now
        stats.seconds = time.perf_counter() - t0
        if self.metrics is not None:
            self.metrics.tick.observe(stats.seconds)
            self.metrics.due.set(stats.dispatched + stats.missed + stats.skipped)
            self.metrics.skipped.labels("missed").inc(stats.missed)
            self.metrics.skipped.labels("skipped").inc(stats.skipped)
            self.metrics.in_flight.set(len(self.running))
        return stats

    async def _advance_rollouts(self, now: datetime, stats: TickStats) -> None:
        """Rolled-out slots: the next wave, or the halt of the rest (scheduler/rollout.py)."""
        step = await self._in_db(self.runs.advance_rollouts, now)
        for dispatch in step.dispatches:
            self._launch(dispatch)
        stats.dispatched += len(step.dispatches)
        stats.skipped += sum(h.skipped for h in step.halted)
        log_rollout_step(step)

    async def _claim_due(self, now: datetime, stats: TickStats) -> int:
        """Claim due slots in batches of ``claim_batch`` until a batch comes back short, and
        launch what they start; the assignments held back stay excluded from later batches.
        Returns how many due assignments the batches read."""
        batch = self.app.settings.claim_batch
        held: set[int] = set()
        decided = 0
        while True:
            claimed = await self._in_db(
                self.runs.claim_due, now, batch, frozenset(held), self.cleanup.held
            )
            held.update(claimed.held)
            for dispatch in claimed.dispatches:
                self._launch(dispatch)
            stats.dispatched += len(claimed.dispatches)
            stats.missed += claimed.missed
            stats.skipped += claimed.skipped
            decided += claimed.assignments
            if claimed.assignments < batch:
                return decided

    async def _close_lost(self, now: datetime) -> None:
        """Record as ``lost`` this node's runs that no process runs any more (a crash left
        them) once their deadline has passed: at the start, and every ``LOST_CHECK_S``."""
        self._next_lost_check = time.monotonic() + LOST_CHECK_S
        lost = await self._in_db(self.runs.close_lost, now, self.live.ids())
        if lost:
            log.warning(
                "cron: %d run(s) left running by a crash closed as lost",
                lost,
                extra={"action": "runs.lost", "count": lost},
            )

    # -- active cleanup ---------------------------------------------------------------

    async def _start_active_cleanup(self) -> None:
        """Start the active cleanup of older generations' targets when it is due
        (:class:`~fleetcron.scheduler.cleanup.ActiveCleanup`)."""
        await self.cleanup.start(self.guard, self.mark_scope, self._ssh_kind, self.may_execute)

    def _ssh_kind(self) -> SshKind:
        """The SSH executor of the table (active cleanup raises marks over SSH only)."""
        assert self.executors is not None
        ssh = self.executors.get(TargetKind.SSH)
        if not isinstance(ssh, SshKind):
            raise ValueError("this scheduler has no SSH executor for the active cleanup")
        return ssh

    @property
    def ssh(self) -> SshExecutor | None:
        """The SSH executor of the table, if it has one (pool statistics, benchmarks)."""
        assert self.executors is not None
        kind = self.executors.get(TargetKind.SSH)
        return kind.executor if isinstance(kind, SshKind) else None

    @ssh.setter
    def ssh(self, executor: SshExecutor) -> None:
        """Run SSH targets on ``executor`` (a benchmark sizing its own pool)."""
        assert self.executors is not None
        self.executors = {**self.executors, TargetKind.SSH: SshKind(executor, self._decrypt)}

    def _ssh_pool_reading(self) -> SshPoolReading | None:
        """The SSH pool's counters for ``/metrics`` (read at scrape time)."""
        ssh = self.ssh
        if ssh is None:
            return None
        return SshPoolReading(ssh.connections_opened, ssh.connect_retries, ssh.pooled_connections)

    def _decrypt(self, encrypted: bytes) -> bytes:
        return self.app.master_key.decrypt(encrypted).reveal()

    def _launch(self, dispatch: Dispatch) -> None:
        self.live.open(
            dispatch.run_id,
            job=dispatch.job_name,
            target=dispatch.target_name,
            node=self.app.node_name,
            started_at=dispatch.started_at or self.clock(),
        )
        task = asyncio.create_task(self._execute(dispatch), name=f"run-{dispatch.run_id}")
        self.running[dispatch.run_id] = task
        self._run_started.set()
        run_id = dispatch.run_id

        def forget(_task: asyncio.Task[None]) -> None:
            self.running.pop(run_id, None)
            if _task.cancelled() or _task.exception() is not None:
                self.live.close(run_id)  # nothing goes to the writer, which would close it

        task.add_done_callback(forget)

    async def _execute(self, dispatch: Dispatch) -> None:
        delay = dispatch.window.delay_s
        if delay:
            self._waiting.add(dispatch.run_id)
            try:
                await asyncio.sleep(delay)
            finally:
                self._waiting.discard(dispatch.run_id)
        log_dispatch(dispatch)
        if self.metrics is not None and dispatch.scheduled_for and dispatch.trigger == "schedule":
            lateness = (self.clock() - dispatch.scheduled_for).total_seconds()
            self.metrics.lateness.observe(max(lateness, 0.0))
        result = await self._run_on_target(dispatch)
        entry = self.live.get(dispatch.run_id)
        stopped_by = None
        if entry is not None and result.error in (STOPPED, STOPPED_BEFORE_START):
            stopped_by = entry.stopped_by or "someone"
            log_stopped(dispatch.run_id, stopped_by)
        if result.error is not None and result.error.startswith(SUPERSEDED):
            log_superseded(dispatch.run_id, result.error)
        if self.metrics is not None:
            self.metrics.runs.labels(result.status, dispatch.origin).inc()
            self.metrics.duration.observe(result.duration_ms / 1000)
        log_done(dispatch, result)
        await self._finished.put(_Finished(dispatch, result, stopped_by))
        if stopped_by is None and should_retry(
            result.status, dispatch.attempt, dispatch.retries, list(dispatch.retry_on)
        ):
            task = asyncio.create_task(self._retry(dispatch))
            self._retries.add(task)
            self._run_started.set()
            task.add_done_callback(self._retries.discard)

    async def _retry(self, previous: Dispatch) -> None:
        await asyncio.sleep(retry_delay(previous.attempt, previous.retry_backoff_s))
        dispatch = await self._in_db(self.runs.start_retry, previous, self.clock())
        if dispatch is not None:
            self._launch(dispatch)

    def _request(self, dispatch: Dispatch) -> ExecRequest | str:
        """The executor request, with the watchdog budget left at this moment; or why the
        run must not start."""
        if self.may_execute is not None and not self.may_execute():
            return f"not started: {SELF_FENCED}"
        live = self.live.get(dispatch.run_id)
        return exec_request(
            dispatch,
            node=self.app.node_name,
            output_limit=self.app.settings.output_limit_bytes,
            mark_scope=(
                shard_scope(self.mark_scope, dispatch.shard, self.shards)
                if self.mark_scope is not None
                else None
            ),
            live=live.output if live else None,
            asking=self.claim_asking,
        )

    async def _run_on_target(self, dispatch: Dispatch) -> ExecResult:
        assert self.executors is not None
        try:
            executor = self.executors.get(dispatch.target_kind)
            if executor is None:
                raise ValueError(
                    f"target {dispatch.target_name} is of kind '{dispatch.target_kind}', "
                    f"which this scheduler has no executor for ({', '.join(self.executors)})"
                )
            async with executor.admit():
                entry = self.live.get(dispatch.run_id)
                if entry is not None and entry.output.stop_requested:
                    return ExecResult.not_started(STOPPED_BEFORE_START, started_at=self.clock())
                request = self._request(dispatch)
                if isinstance(request, str):
                    return self._refused_start(dispatch, request)
                return await executor.run(run_target(dispatch), request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a broken target record must not kill the loop
            log.exception(
                "cron: run %d could not start",
                dispatch.run_id,
                extra={"action": "run.error", "run_id": dispatch.run_id},
            )
            return ExecResult.not_started(f"could not start: {exc}", started_at=self.clock())

    def _refused_start(self, dispatch: Dispatch, why: str) -> ExecResult:
        log.warning(
            "cron: run %d %s",
            dispatch.run_id,
            why,
            extra={"action": "run.not_started", "run_id": dispatch.run_id},
        )
        return ExecResult.not_started(why, started_at=self.clock())

    async def _watch_fence(self) -> None:
        """Cancel every in-flight run as soon as this node may no longer execute."""
        assert self.may_execute is not None
        while True:
            if not (self.running or self._retries):
                # Nothing to cancel: sleep until a run starts rather than wake 20 times
                # a second (an idle worker's most frequent wake-up).
                self._run_started.clear()
                await self._run_started.wait()
            await asyncio.sleep(FENCE_CHECK_S)
            if self.may_execute() or not (self.running or self._retries):
                continue
            doomed = {rid: t for rid, t in self.running.items() if not t.done()}
            for task in [*doomed.values(), *self._retries]:
                task.cancel()
            await asyncio.gather(*doomed.values(), *self._retries, return_exceptions=True)
            self.self_fenced += len(doomed)
            log.error(
                "cron: %s; killed %d run(s) in flight",
                SELF_FENCED,
                len(doomed),
                extra={"action": "scheduler.self_fence", "count": len(doomed)},
            )
            if doomed:
                # Waits for the database if it is unreachable; the loop keeps watching.
                recording = asyncio.create_task(self._record_fenced(list(doomed)))
                self._recording.add(recording)
                recording.add_done_callback(self._recording.discard)

    async def _record_fenced(self, run_ids: list[int]) -> None:
        try:
            await self._in_db(
                self.runs.interrupt, run_ids, self.clock(), f"interrupted: {SELF_FENCED}"
            )
        except Exception:
            log.exception(
                "cron: could not record %d self-fenced run(s)",
                len(run_ids),
                extra={"action": "runs.interrupt.error"},
            )

    # -- recording --------------------------------------------------------------------

    async def _gather_finished(self) -> list[_Finished]:
        """The next batch of completions to record: what the queue holds, after short
        waits for the runs that end together or one after the other while others are in
        flight (:func:`gather_again`; runs that end one after the other in a burst of
        local runs, or a worker's share of a fleet, would each take a transaction)."""
        batch = [await self._finished.get()]
        queued, brought, waits = self._finished.qsize(), 0, 0
        while gather_again(len(batch) + queued, brought, waits, len(self.running)):
            await asyncio.sleep(FINISH_GATHER_S)
            waits += 1
            brought = self._finished.qsize() - queued
            queued += brought
        while len(batch) < FINISH_BATCH and not self._finished.empty():
            batch.append(self._finished.get_nowait())
        return batch

    async def _write_completions(self) -> None:
        while True:
            batch = await self._gather_finished()
            try:
                refused = await self._in_db(
                    self.runs.finish,
                    [(f.dispatch.run_id, f.result) for f in batch if f.stopped_by is None],
                )
                stopped = [
                    (f.dispatch.run_id, f.result, f.stopped_by)
                    for f in batch
                    if f.stopped_by is not None
                ]
                if stopped:
                    refused += await self._in_db(self.runs.cancel, stopped)
                for run_id in refused:
                    log.warning(
                        "cron: completion of run %d refused: this node no longer holds its claim",
                        run_id,
                        extra={"action": "run.fenced", "run_id": run_id},
                    )
            except Exception:
                log.exception(
                    "cron: could not record %d finished run(s)",
                    len(batch),
                    extra={"action": "runs.finish.error"},
                )
            finally:
                for item in batch:
                    self.live.close(item.dispatch.run_id)
                    self._finished.task_done()

    # -- live runs --------------------------------------------------------------------

    def stop(self, run_id: int, by: str) -> bool:
        """Kill ``run_id`` now if this scheduler runs it (recorded ``cancelled``, stopped
        by ``by``); False when it does not. Callable from any thread (the web app)."""
        return self.live.request_stop(run_id, by)

    async def _follow_live(self, now: datetime, *, stops: bool) -> None:
        """Every tick: act on the stop requests made elsewhere (the CLI, another node) for
        runs of this node, when the tick's first read saw any (``stops``); every
        ``live_snapshot_s``: write the tail of the output of runs whose output grew, in one
        transaction."""
        if not self.running:
            return
        try:
            asked = await self._in_db(self.runs.stop_requests) if stops else {}
            for run_id, by in asked.items():
                entry = self.live.get(run_id)
                if entry is not None and not entry.output.stop_requested:
                    entry.request_stop(by)
            if time.monotonic() >= self._next_snapshot:
                self._next_snapshot = time.monotonic() + self.live_snapshot_s
                snapshots = self.live.changed_snapshots()
                if snapshots:
                    await self._in_db(self.runs.write_live, snapshots, now)
        except Exception:
            # Followers only: never keep the tick from claiming.
            log.exception("cron: could not follow the live runs", extra={"action": "live.error"})

    async def _drain_writer(self) -> None:
        await self._finished.join()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer

    async def idle(self) -> None:
        """Wait until every started run has finished and been recorded (for tests and CLI)."""
        while self.running or self._retries:
            await asyncio.gather(*self.running.values(), *self._retries, return_exceptions=True)
        await self._finished.join()


def gather_again(gathered: int, brought: int, waits: int, in_flight: int) -> bool:
    """Whether ``gathered`` completions wait :data:`FINISH_GATHER_S` more for others to
    share their transaction, after ``waits`` waits of which the last ``brought`` some.

    The first wait is taken whenever other runs are in flight and the batch is not full.
    A batch of fewer than :data:`FINISH_FEW` waits again while completions keep coming,
    up to :data:`FINISH_GATHER_WAITS` waits: a worker of several (``--workers``) sees
    only its share of a fleet's completions, and each transaction's fixed cost (the
    guard's lock, the claims released, the commit) would otherwise fall on a few rows.
    When a wait brings nothing, the batch is written at once.
    """
    if gathered >= FINISH_BATCH or in_flight <= 1:
        return False
    if waits == 0:
        return True
    return waits < FINISH_GATHER_WAITS and brought > 0 and gathered < FINISH_FEW


def _log_tick(now: datetime, stats: TickStats) -> None:
    log.info(
        "cron: %d due at %s (%d missed, %d skipped)",
        stats.dispatched,
        now.strftime("%Y-%m-%d %H:%M"),
        stats.missed,
        stats.skipped,
        extra={
            "action": "tick",
            "due": stats.dispatched,
            "missed": stats.missed,
            "skipped": stats.skipped,
        },
    )
