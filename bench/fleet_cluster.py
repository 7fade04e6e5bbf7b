"""The fleet benchmark's cluster designs (``fleetcron-w1``, ``fleetcron-w2``, ...
``fleetcron-wN``): fleetcron as a cluster installation on a throwaway PostgreSQL, its one
node's shards executed by N scheduler processes side by side (``fleetcron scheduler
--workers N``), on the fleet simulator's targets.

The installation is the one ``bench/workers_bench.py`` sets up (``--shards``, 64, shards;
one approved node owning every shard; the fixture's PostgreSQL with fsync off), with the
simulator's SSH targets instead of local ones (bulk inserted, each with its pinned host key,
its encrypted client key and its shard, ``core.shards.shard_of``, as ``target add`` writes
them) and one bulk job ``* * * * *`` running the command on all of them.

Each worker is a fresh interpreter (this file with ``--worker-of I/N``), built as
``fleetcron scheduler --workers N`` builds worker I (``build_scheduler(app,
worker=Worker(I, N))``; with N = 1 the node's only scheduler), started, its first
housekeeping round done, then "ready". The node's SSH caps are the bare loop's: by default
(``--worker-caps split``) each worker gets ``cap / N`` runs in flight and ``handshakes / N``
handshakes, so the node as a whole has the same caps as the one bare asyncssh loop;
``--worker-caps each`` gives every worker the full caps (what a node with unchanged settings
does, N times the bare loop's).

Two fires: the parent names a start instant; each worker's clock (real, shifted) reads M
at it, ticks and waits for its runs recorded, and reports its CPU (the process's user+sys,
its event loop's and its database thread's, the garbage collector's) and when it was done;
then the same at M + 30 min (the job runs ``*/30 * * * *``) over the connections each
worker kept. Beside the fires each worker runs the scheduler's loop as ``Scheduler.serve``
does (the housekeeping, then a tick, every ``tick_s``; a fire's tick takes the loop's
turn), so its lease, member row and placement step are renewed as in production. A fire's
wall time runs from the start instant to the last worker done; lateness is recorded
``started_at`` minus ``scheduled_for``; the scheduler CPU is summed over the workers (and
given per worker, against its own dispatches); PostgreSQL's CPU (the postmaster and its
backends) is reported beside it, and its transactions (``pg_stat_database``) over the fire
and over an idle window after the fires; each worker counts the transactions its engine
began inside the housekeeping (coordination) and elsewhere.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Usage, after_bulk_load, catch_up_sequences, core_table
from workers_bench import (
    KEY_VARIABLE,
    LEAD_S,
    NODE_NAME,
    Install,
    Server,
    StartClock,
    build,
    new_install,
    node_owning_every_shard,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fleetcron.app import App
    from fleetcron.scheduler.service import Scheduler

#: Issue 29's goal for the fleet at 2 workers, against the one bare asyncssh loop.
GOAL_POOLED, GOAL_FIRST = 1.0, 0.8
#: Issue 29's goals for 4 members: CPU per dispatch per member within 10% of one member's,
#: at most 1 coordination transaction per 50 dispatches.
GOAL_CPU_SPREAD, GOAL_DISPATCHES_PER_COORDINATION = 0.10, 50
#: ``--placement members``: FLEETCRON_LEASE_S (the members placement needs a lease). Not
#: 30 s: a node fences itself when its lease step has not run for 24 s of a 30 s lease, and
#: the step runs in the scheduler's loop after the tick, which at 10,000 new connections
#: on one worker took longer than that (docs/benchmarks.md, "20,000 targets over 4
#: workers"). The renewal period, and so the coordination measured, is the default 10 s.
MEMBERS_LEASE_S = 120.0
#: The two fires' minutes: M and M + 30 min (the job runs every 30 minutes), so that the
#: scheduler's loop, which ticks beside a fire, never reaches the next fire's minute
#: during a first fire longer than a minute.
FIRE_GAP = timedelta(minutes=30)
SCHEDULE = "*/30 * * * *"
MEMBERS = ("shard_placement", "lease_s")


def worker_settings(opts: dict[str, Any], workers: int) -> dict[str, Any]:
    """Each worker's SSH caps: the node's (the bare loop's) split among its workers, or
    (``worker_caps == "each"``) the full caps in every worker."""
    split = opts.get("worker_caps", "split") == "split"
    cap = max(1, opts["cap"] // workers) if split else opts["cap"]
    handshakes = max(1, opts["handshakes"] // workers) if split else opts["handshakes"]
    extra = {"ssh_max_concurrency": cap, "ssh_max_connecting": handshakes}
    if opts.get("pool"):
        extra["ssh_max_connections"] = max(opts["pool"], cap)
    if opts.get("placement") == "members":
        # Every node a member (here the one node, its worker 0 the member row): the lease
        # and member renewal and the placement step every FLEETCRON_LEASE_RENEW_S.
        extra |= {"shard_placement": "members", "lease_s": MEMBERS_LEASE_S}
    return extra


# -- the installation ----------------------------------------------------------------------


def set_up(install: Install, targets: list[Any], command: str) -> None:
    """The node owning every shard, the simulator's targets and the bulk job."""
    from fleetcron.app import SYSTEM
    from fleetcron.services.jobs import edit as jobs

    # Handed every shard as the owner placement does (a transfer, which the members
    # placement refuses); with ``--placement members`` the one member keeps them all.
    owner = replace(install, extra={k: v for k, v in install.extra.items() if k not in MEMBERS})
    app = owner.open(NODE_NAME, clock=lambda: install.due - timedelta(seconds=30))
    try:
        node_owning_every_shard(app)
        add_ssh_targets(app, targets)
        jobs.add_job(app, SYSTEM, "fleet", jobs.JobSpec(SCHEDULE, command), bulk=True)
        after_bulk_load(app)
    finally:
        app.close()


def add_ssh_targets(app: App, targets: list[Any]) -> None:
    """The simulator's targets, ids 1 to n, each in its shard."""
    from sqlalchemy import insert

    from fleet_bench import target_row
    from fleetcron.core.shards import shard_of
    from fleetcron.store.schema import Target

    now, shards = app.now(), app.settings.shards
    assert shards, "a cluster installation has its shard count set"
    rows = [
        {**target_row(app, t, now), "id": i, "shard": shard_of(i, shards)}
        for i, t in enumerate(targets, start=1)
    ]
    with app.db.engine.begin() as conn:
        conn.execute(insert(core_table(Target)), rows)
        catch_up_sequences(conn, ("targets",))


# -- one worker process ----------------------------------------------------------------------


@dataclass(frozen=True)
class FireReport:
    """One worker's fire, from the start instant to its runs recorded."""

    dispatched: int
    done_at: float
    cpu_s: float
    loop_cpu_s: float
    db_cpu_s: float
    gc_cpu_s: float
    gc_full: int
    connect_retries: int
    transactions: int
    maxrss_mb: float
    coordination_tx: int
    other_tx: int
    tick_s: float


def connect_retries(scheduler: Scheduler) -> int:
    ssh = scheduler.ssh
    return 0 if ssh is None else int(ssh.connect_retries)


@dataclass
class Transactions:
    """The transactions this worker's engine began, by what began them: a listener of the
    bench's on the engine's ``begin`` event (the product is not instrumented). Every
    database call of a worker runs on its one database thread, one at a time, so a phase
    set around the housekeeping call on that thread is exact: ``coordination`` is what
    the housekeeping began (lease and member renewal, the placement step, worker 0's
    cluster maintenance and retention), ``other`` everything else (claims, recordings,
    the reads of the loop's ticks)."""

    phase: str = "other"
    counts: collections.Counter[str] = field(default_factory=collections.Counter)

    def began(self, _conn: object) -> None:
        self.counts[self.phase] += 1

    def housekeeping(self, scheduler: Scheduler) -> None:
        """The scheduler's housekeeping call, its transactions counted as coordination
        (runs on the database thread)."""
        assert scheduler.maintenance is not None
        self.phase = "coordination"
        try:
            scheduler.maintenance()
        finally:
            self.phase = "other"

    def snapshot(self) -> tuple[int, int]:
        return self.counts["coordination"], self.counts["other"]


@dataclass
class ServeLoop:
    """What ``Scheduler.serve`` does, from the worker's start to its end: every
    ``tick_s`` the housekeeping (the lease, with it the member row, renewed; the
    placement step), then a tick; stopped between two rounds, never inside one (a tick
    cancelled in a database call would leave the scheduler mid-claim). A fire's own tick
    takes ``lock``, as a round does, so no two ticks overlap."""

    scheduler: Scheduler
    tx: Transactions
    dispatched: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def run(self) -> None:
        every = self.scheduler.app.settings.tick_s
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), every)
                return
            async with self.lock:
                await self.scheduler._in_db(self.tx.housekeeping, self.scheduler)
                self.dispatched += (await self.scheduler.tick()).dispatched

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ServeLoop]:
        task = asyncio.create_task(self.run())
        try:
            yield self
        finally:
            self.stop.set()
            await task


async def fire(
    scheduler: Scheduler, commits: collections.Counter[str], loop: ServeLoop
) -> FireReport:
    """One tick (it claims in batches until nothing is due), then every run recorded;
    the scheduler's loop goes on beside it as in ``serve``."""
    tx = loop.tx
    db0, u0, r0 = await scheduler._in_db(time.thread_time), Usage.now(), connect_retries(scheduler)
    c0, (k0, o0) = commits["commit"], tx.snapshot()
    d0 = loop.dispatched  # a round may claim the minute first: its dispatches count too
    async with loop.lock:
        stats = await scheduler.tick()
    await scheduler.idle()
    done_at, u1 = time.time(), Usage.now()
    k1, o1 = tx.snapshot()
    return FireReport(
        dispatched=stats.dispatched + loop.dispatched - d0,
        done_at=done_at,
        cpu_s=u1.cpu_s - u0.cpu_s,
        loop_cpu_s=u1.thread_s - u0.thread_s,
        db_cpu_s=await scheduler._in_db(time.thread_time) - db0,
        gc_cpu_s=u1.gc_s - u0.gc_s,
        gc_full=u1.gc_full - u0.gc_full,
        connect_retries=connect_retries(scheduler) - r0,
        transactions=commits["commit"] - c0,
        maxrss_mb=u1.maxrss_mb,
        coordination_tx=k1 - k0,
        other_tx=o1 - o0,
        tick_s=stats.seconds,
    )


async def idle_window(tx: Transactions) -> dict[str, float]:
    """The loop with nothing due, from now to the parent's next line: the transactions
    it began, by kind, the process's CPU, and its length."""
    (k0, o0), t0, u0 = tx.snapshot(), time.time(), Usage.now()
    await asyncio.to_thread(sys.stdin.readline)
    (k1, o1), t1, u1 = tx.snapshot(), time.time(), Usage.now()
    return {
        "coordination_tx": k1 - k0,
        "other_tx": o1 - o0,
        "cpu_s": u1.cpu_s - u0.cpu_s,
        "seconds": t1 - t0,
    }


async def worker_main(worker_of: str) -> None:
    """A worker: build, start, one housekeeping round, "ready"; then for each start
    instant the parent names (its clock reads M, then M + 30 min, at them) one fire,
    reported as JSON; then the idle loop until the parent's next line, reported; then it
    shuts down."""
    from sqlalchemy import event

    from _common import quiet_production_logging
    from fleet_sim import raise_fd_limit
    from fleetcron.core.members import Worker

    raise_fd_limit()
    quiet_production_logging()
    shared = json.loads(sys.stdin.readline())
    install = Install(**{**shared, "master_key": os.environ[KEY_VARIABLE]})
    index, count = (int(part) for part in worker_of.split("/"))
    clock = StartClock(install.due)
    scheduler = build(install, Worker(index, count) if count > 1 else None, clock, "local")
    commits = collections.Counter[str]()  # write transactions: claims and recordings batched
    tx = Transactions()
    event.listen(scheduler.app.db.engine, "commit", lambda conn: commits.update(["commit"]))
    event.listen(scheduler.app.db.engine, "begin", tx.began)
    await scheduler.start()
    await scheduler._in_db(tx.housekeeping, scheduler)
    print("ready", flush=True)
    async with ServeLoop(scheduler, tx).running() as loop:
        for minutes in range(2):
            line = await asyncio.to_thread(sys.stdin.readline)
            clock.minute, clock.at = install.due + minutes * FIRE_GAP, float(line)
            await asyncio.sleep(max(0.0, clock.at - time.time()))
            print(json.dumps(asdict(await fire(scheduler, commits, loop))), flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # the idle window starts
        print(json.dumps(await idle_window(tx)), flush=True)
    await scheduler.shutdown()
    if scheduler.ssh is not None:
        await scheduler.ssh.close()
    scheduler.app.close()


# -- the design's process: the workers, side by side -----------------------------------------


@dataclass
class Workers:
    """The N worker processes of the node, their log."""

    procs: list[subprocess.Popen[str]]
    log: Path

    @classmethod
    def spawn(cls, install: Install, count: int) -> Workers:
        log = Path(install.directory) / "workers.log"
        env = {**os.environ, KEY_VARIABLE: install.master_key}
        shared = json.dumps({**asdict(install), "master_key": ""}) + "\n"
        procs = []
        for i in range(count):
            argv = [sys.executable, __file__, "--worker-of", f"{i}/{count}"]
            with log.open("a") as err:
                proc = subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            assert proc.stdin is not None
            proc.stdin.write(shared)
            proc.stdin.flush()
            procs.append(proc)
        return cls(procs, log)

    def say(self, line: str) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(line + "\n")
            proc.stdin.flush()

    def hear(self) -> list[str]:
        lines = []
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                tail = self.log.read_text()[-3000:]
                raise SystemExit(f"a worker exited ({proc.wait()}); its log:\n{tail}")
            lines.append(line)
        return lines

    def wait(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.close()
            if proc.wait(timeout=120) != 0:
                raise SystemExit(f"a worker failed; its log:\n{self.log.read_text()[-3000:]}")


def recorded(install: Install, at: datetime, n: int) -> dict[str, Any]:
    """The fire's runs as recorded: successes, errors by kind, lateness, runs per worker."""
    from sqlalchemy import select

    from fleet_bench import error_kind, lateness
    from fleetcron.store.schema import Run

    app = install.open(NODE_NAME, clock=lambda: datetime.now(UTC))
    try:
        with app.db.read() as session:
            rows = session.execute(
                select(Run.status, Run.error, Run.started_at, Run.scheduled_for, Run.node).where(
                    Run.scheduled_for == at
                )
            ).all()
    finally:
        app.close()
    errors = collections.Counter(
        f"{r.status}: {error_kind(r.error or '')}" for r in rows if r.status != "succeeded"
    )
    if len(rows) != n:
        errors["runs not recorded"] += n - len(rows)
    per_node = collections.Counter(r.node for r in rows)
    late = [(r.started_at - r.scheduled_for).total_seconds() for r in rows if r.started_at]
    return {
        "ok": sum(r.status == "succeeded" for r in rows),
        "errors": errors,
        "per_worker": "/".join(str(per_node[k]) for k in sorted(per_node)),
        **lateness(late),
    }


#: PostgreSQL 15 flushes a backend's transaction counts at most once a second, and an
#: idle backend's within 10 s: ``pg_stat_database`` is read this long after the last
#: transaction of interest.
STATS_SETTLE_S = 11.5
#: The idle window over which the loop's transactions per second are measured.
IDLE_WINDOW_S = 30.0


@dataclass(frozen=True)
class Bench:
    """What a design's fires share: the installation, its N targets, the simulator's
    control socket, the PostgreSQL server."""

    install: Install
    targets: int
    control: Any
    server: Server

    def transactions(self) -> int:
        """``xact_commit + xact_rollback`` of the bench's database, read from another
        database (so the reading is not counted)."""
        import psycopg

        with psycopg.connect(self.server.conninfo("postgres"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
                (DATABASE,),
            ).fetchone()
        assert row is not None
        return int(row[0])


DATABASE = "fleet"


def one_fire(workers: Workers, bench: Bench, minutes: int) -> dict[str, Any]:
    """Name a start instant, collect every worker's report; the simulator's and
    PostgreSQL's counters over the same span (its transaction count read once the
    backends have flushed theirs)."""
    from fleet_bench import sim_delta

    time.sleep(STATS_SETTLE_S)
    x0, t0 = bench.transactions(), time.time()
    s0, pg0 = bench.control.stats(), bench.server.cpu()
    start = time.time() + LEAD_S
    workers.say(repr(start))
    reports = [FireReport(**json.loads(line)) for line in workers.hear()]
    s1, pg1 = bench.control.stats(), bench.server.cpu()
    time.sleep(STATS_SETTLE_S)
    x1, t1 = bench.transactions(), time.time()
    at = bench.install.due + minutes * FIRE_GAP
    runs = recorded(bench.install, at, bench.targets)
    retried = sum(r.connect_retries for r in reports)
    if retried:
        runs["errors"]["(ssh.connect_retry, retried)"] += retried
    return {
        **runs,
        "errors": dict(runs["errors"]),
        "wall_s": max(r.done_at for r in reports) - start,
        "dispatched": sum(r.dispatched for r in reports),
        "cpu_s": sum(r.cpu_s for r in reports),
        "loop_cpu_s": sum(r.loop_cpu_s for r in reports),
        "db_cpu_s": sum(r.db_cpu_s for r in reports),
        "gc_cpu_s": sum(r.gc_cpu_s for r in reports),
        "gc_full": sum(r.gc_full for r in reports),
        "transactions": sum(r.transactions for r in reports),
        "pg_transactions": x1 - x0,
        "pg_span_s": t1 - t0,
        "coordination_tx": sum(r.coordination_tx for r in reports),
        "other_tx": sum(r.other_tx for r in reports),
        "workers_cpu": [
            {
                "dispatched": r.dispatched,
                "cpu_s": r.cpu_s,
                "done_s": r.done_at - start,
                "tick_s": r.tick_s,
            }
            for r in reports
        ],
        "pg_cpu_s": pg1 - pg0,
        "sim": sim_delta(s0, s1),
        "maxrss_mb": [r.maxrss_mb for r in reports],
    }


def idle(workers: Workers, bench: Bench) -> dict[str, Any]:
    """The workers' loops with nothing due for ``IDLE_WINDOW_S``: PostgreSQL's
    transactions per second (read at both ends, the backends flushing every second while
    the loops run) and the workers' own, coordination apart."""
    workers.say("idle")
    time.sleep(STATS_SETTLE_S)  # the fire's last counts flushed, the loops running
    x0, t0 = bench.transactions(), time.time()
    time.sleep(IDLE_WINDOW_S)
    x1, t1 = bench.transactions(), time.time()
    workers.say("stop")
    reports = [json.loads(line) for line in workers.hear()]
    seconds = [r["seconds"] for r in reports]
    return {
        "pg_tx_per_s": (x1 - x0) / (t1 - t0),
        "coordination_tx_per_s": sum(
            r["coordination_tx"] / s for r, s in zip(reports, seconds, strict=True)
        ),
        "other_tx_per_s": sum(r["other_tx"] / s for r, s in zip(reports, seconds, strict=True)),
        "cpu_ms_per_s": [1000 * r["cpu_s"] / s for r, s in zip(reports, seconds, strict=True)],
    }


def on_the_half_hour(install: Install) -> Install:
    """The installation with its minute M moved to the next slot of ``SCHEDULE``."""
    due = install.due
    return replace(install, minute=(due + timedelta(minutes=-due.minute % 30)).isoformat())


def run_fleetcron_workers(
    spec: dict[str, Any], command: str, opts: dict[str, Any]
) -> dict[str, Any]:
    """The design ``fleetcron-wN``: a fresh PostgreSQL, the installation, N workers, two
    fires."""
    from _common import running_postgres
    from fleet_bench import targets_of
    from fleet_sim import SimControl

    count = int(opts["design"].removeprefix("fleetcron-w"))
    targets = targets_of(spec)
    control = SimControl(spec["control"])
    try:
        with running_postgres() as handle:
            if handle is None:
                raise SystemExit("PostgreSQL binaries not found (the fleetcron-wN designs)")
            pid = int((handle.data_dir / "postmaster.pid").read_text().split()[0])  # type: ignore[attr-defined]
            server = Server(handle, pid)
            url = handle.create_database(DATABASE)  # type: ignore[attr-defined]
            install = on_the_half_hour(
                new_install(url, opts.get("shards", 64), worker_settings(opts, count))
            )
            set_up(install, targets, command)
            return fires(Bench(install, len(targets), control, server), count)
    finally:
        control.close()


def fires(bench: Bench, count: int) -> dict[str, Any]:
    """The N workers started, the first fire (new connections), the pooled one."""
    workers = Workers.spawn(bench.install, count)
    try:
        workers.hear()  # every worker ready
        first = one_fire(workers, bench, 0)
        pooled = one_fire(workers, bench, 1)
        background = idle(workers, bench)
        workers.wait()
    finally:
        for proc in workers.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    rss = [max(a, b) for a, b in zip(first.pop("maxrss_mb"), pooled.pop("maxrss_mb"), strict=True)]
    return {
        "first": first,
        "pooled": pooled,
        "idle": background,
        "rss_before_mb": 0.0,
        "peak_tree_rss_mb": sum(rss),
        "workers": count,
        "worker_caps": bench.install.extra,
        "connect_retries": sum(
            f["errors"].get("(ssh.connect_retry, retried)", 0) for f in (first, pooled)
        ),
    }


if __name__ == "__main__":
    asyncio.run(worker_main(sys.argv[sys.argv.index("--worker-of") + 1]))
