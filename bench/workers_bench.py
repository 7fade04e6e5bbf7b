"""Workers: every core of a node (``fleetcron scheduler --workers N``), side by side in one run.

A real cluster installation on a throwaway PostgreSQL cluster (the test fixture's: fsync,
synchronous_commit and full_page_writes off): ``FLEETCRON_SHARDS`` shards (``--shards``,
64), one approved node that owns every shard (announced, approved and handed the jobs
as ``fleetcron cluster`` does), ``--runs`` local targets (bulk inserted, each with its
shard, ``core.shards.shard_of``, as ``target add`` writes it) and one bulk job
``* * * * *`` over them, due at minute M. A fresh database for each design.

Designs, each measured from the same instant:

* ``bare``: the floor, bare asyncio spawning the same ``/bin/sh -c true`` under the local
  executor's cap of 64 (``overhead_bench.bare_asyncio``; no scheduler, no database);
* ``workers=1``: one scheduler process, as ``fleetcron scheduler`` (``--workers 1``) runs
  a node's only scheduler;
* ``workers=N``: N scheduler processes of the node, each built as ``fleetcron scheduler
  --workers N`` builds worker I (``build_scheduler(app, worker=Worker(I, N))``), each with
  its own event loop, executing the shards ``core.members.worker_shards`` gives it.

Each worker is a fresh interpreter (this file with ``--worker-of I/N``). It is built and
started, does its first housekeeping round (as ``serve()`` would) and says it is ready;
the parent then names a common start instant, and each worker's clock (the real clock,
shifted) reads M + 0 s at that instant and runs at real speed, so every timestamp recorded
is a real duration after M. At the instant each worker calls ``tick()`` (which claims in
batches until nothing is due) and ``idle()`` (its runs recorded), then reports its CPU:
its own user+sys, its children's (the ``true`` processes and their shells, ``RUSAGE_CHILDREN``)
and the local executor's group watchdog's (``/proc``). Log lines at INFO are formatted as
``fleetcron serve`` does, written to /dev/null.

Reported: the time from M until the last worker's runs are recorded; the dispatch lateness
of each run (recorded ``started_at`` minus ``scheduled_for``) at p50, p99 and max; the
scheduler CPU (summed over the workers) per run; the children CPU per run; PostgreSQL's
CPU (the postmaster and its backends, ``/proc``) per run; the transactions committed or
rolled back in the database per run (``pg_stat_database``, read after the workers exit);
how often a backend was seen waiting for a lock (``pg_stat_activity`` sampled every
20 ms: samples with a lock waiter, of all); and how many runs each worker recorded.

``--executor fake``: the scheduling throughput without processes or network. Each local
target runs nothing (``FakeExecutor``: exit 0 at once, the same cap of 64, the schedulers'
clock); reported as executions recorded per second (wall, from M), per scheduler CPU
second and per CPU second of schedulers and PostgreSQL together.

An experiment, not the product: a design ``N:nocounts`` runs N workers with the triggers
that count runs per minute and status (``store/run_counts.py``, migrations 0022/0041) off,
to size what the counts cost: before migration 0041 a row lock every run write took on the
minute's count rows, which all workers shared; since, each shard has its own rows and
what is left is the triggers' CPU.

``bare:guarded`` is bare asyncio spawning what a cluster's local run is: ``sh -c`` with
the target's generation mark checked first, then ``exec /bin/sh -c true``
(``executors.watchdog.guarded_command``), to tell the scheduler's share of the children's
CPU from the script's.

Run by hand (``--designs`` picks among ``bare,bare:guarded,1,2,...,N:nocounts``;
``--repeat`` interleaves them)::

    .venv/bin/python bench/workers_bench.py --runs 1000 --designs bare,bare:guarded,1,2 --repeat 3
    .venv/bin/python bench/workers_bench.py --executor fake --runs 10000 --designs 1,2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    after_bulk_load,
    catch_up_sequences,
    children_of,
    core_table,
    loadavg,
    percentile,
    quiet_production_logging,
    running_postgres,
    table,
    work_dir,
)

if TYPE_CHECKING:
    from fleetcron.app import App
    from fleetcron.scheduler.service import Scheduler

#: The node's name, endpoint and the variable that carries the master key to the workers.
NODE_NAME = "bench"
ENDPOINT = "http://bench.test:8080"
KEY_VARIABLE = "FLEETCRON_BENCH_MASTER_KEY"
#: How long before the start instant the parent names it (every worker is ready then).
LEAD_S = 0.5
#: How often the lock sampler looks (seconds).
SAMPLE_S = 0.02
#: The goals of issue 29 for local runs, against bare asyncio.
GOAL_WALL, GOAL_CHILDREN, GOAL_P99_S = 1.3, 1.5, 1.0


# -- the installation ----------------------------------------------------------------------


@dataclass(frozen=True)
class Install:
    """What the parent and every worker share: the database, the data directory, the
    master key, the machine id (so one node id), the shard count, the minute M, and
    settings every process sets besides (``extra``: the SSH caps of a fleet bench)."""

    url: str
    directory: str
    master_key: str
    shards: int
    minute: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def due(self) -> datetime:
        return datetime.fromisoformat(self.minute)

    def open(self, node_name: str, clock: Any) -> App:
        from pydantic import SecretStr

        from fleetcron.app import App
        from fleetcron.config import Settings

        directory = Path(self.directory)
        data_dir = directory / node_name.replace("/", "-")
        data_dir.mkdir(exist_ok=True)
        machine_id = directory / "machine-id"
        if not machine_id.exists():
            machine_id.write_text(os.urandom(16).hex() + "\n")
        settings = Settings(
            data_dir=data_dir,
            database_url=self.url,
            master_key=SecretStr(self.master_key),
            cluster=True,
            endpoint=ENDPOINT,
            machine_id_file=machine_id,
            node_name=node_name,
            shards=self.shards,
            shutdown_grace_s=5.0,
            allow_local_targets=True,
            local_allow_root=True,
            **self.extra,
        )
        return App.open(settings, clock=clock)


def new_install(url: str, shards: int, extra: dict[str, Any] | None = None) -> Install:
    from fleetcron.crypto import generate_key

    minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=5)
    return Install(
        url,
        str(work_dir("fleetcron-workers-bench-")),
        generate_key().decode(),
        shards,
        minute.isoformat(),
        dict(extra or {}),
    )


def set_up(install: Install, runs: int) -> None:
    """The schema, the node approved and owning every shard, the targets and the job."""
    app = install.open(NODE_NAME, clock=lambda: install.due - timedelta(seconds=30))
    try:
        node_owning_every_shard(app)
        add_targets(app, runs)
        add_job(app)
        after_bulk_load(app)
    finally:
        app.close()


def node_owning_every_shard(app: App) -> None:
    """The schema, then this installation's node announced, approved and handed every
    shard (as ``fleetcron cluster`` does)."""
    from fleetcron.app import SYSTEM
    from fleetcron.coordination.node import Node
    from fleetcron.services.cluster import status as cluster

    app.db.upgrade()
    node = Node(app)
    cluster.announce(app, node)
    cluster.approve(app, SYSTEM, node.identity)
    cluster.request_transfer(app, SYSTEM, node.identity.node_id)


def add_targets(app: App, n: int) -> None:
    """``n`` local targets, ids 1 to n, each in its shard (as ``target add`` writes it)."""
    from sqlalchemy import insert, select

    from fleetcron.core.shards import shard_of
    from fleetcron.store.schema import ClusterSettings, Target

    now = app.now()
    with app.db.engine.begin() as conn:
        shards = int(conn.scalar(select(ClusterSettings.shards)) or 0)
        assert shards == app.settings.shards, f"the installation has {shards} shards"
        rows = [
            {
                "id": i,
                "name": f"box{i:05d}",
                "kind": "local",
                "labels": {"role": "bench"},
                "notes": "",
                "paired": True,
                "paired_at": now,
                "created_at": now,
                "updated_at": now,
                "shard": shard_of(i, shards),
            }
            for i in range(1, n + 1)
        ]
        conn.execute(insert(core_table(Target)), rows)
        catch_up_sequences(conn, ("targets",))


def add_job(app: App) -> None:
    from fleetcron.app import SYSTEM
    from fleetcron.services.jobs import edit as jobs
    from fleetcron.services.jobs.edit import JobSpec

    jobs.add_job(app, SYSTEM, "everywhere", JobSpec("* * * * *", "true"), bulk=True)


# -- one worker process ----------------------------------------------------------------------


@dataclass
class StartClock:
    """The real clock, shifted so that it reads M at the common start instant (unix time)
    once the parent names it; before that, M - 10 min at this process's start (so a slow
    start never reaches M early)."""

    minute: datetime
    at: float = field(default_factory=lambda: time.time() + 600.0)

    def __call__(self) -> datetime:
        return self.minute + timedelta(seconds=time.time() - self.at)


@dataclass(frozen=True)
class WorkerReport:
    """What one worker measured, from the start instant to its runs recorded: CPU seconds
    of the process, of its event loop's thread and its database thread, of its children
    (the group watchdog's included, and also alone)."""

    index: int
    dispatched: int
    tick_s: float
    done_at: float
    cpu_s: float
    loop_cpu_s: float
    db_cpu_s: float
    children_cpu_s: float
    watchdog_cpu_s: float


@dataclass(frozen=True)
class CpuNow:
    """CPU seconds so far: the process, its waited-for children, the calling thread (the
    event loop's) and the database thread."""

    own: float
    children: float
    loop: float
    db: float

    @classmethod
    def of(cls, scheduler: Scheduler) -> CpuNow:
        import resource

        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        (db_thread,) = scheduler._db._threads  # the scheduler's one database thread
        assert db_thread.ident is not None
        return cls(
            me.ru_utime + me.ru_stime,
            kids.ru_utime + kids.ru_stime,
            time.thread_time(),
            time.clock_gettime(time.pthread_getcpuclockid(db_thread.ident)),
        )


async def tick_and_wait(scheduler: Scheduler, index: int) -> WorkerReport:
    """At the start instant: one tick (it claims in batches until nothing is due), then
    every run recorded."""
    from overhead_bench import watchdog_cpu

    before, t0 = CpuNow.of(scheduler), time.perf_counter()
    stats = await scheduler.tick()
    tick_s = time.perf_counter() - t0
    await scheduler.idle()
    done_at, after = time.time(), CpuNow.of(scheduler)
    watchdog_s = watchdog_cpu(scheduler)
    return WorkerReport(
        index=index,
        dispatched=stats.dispatched,
        tick_s=tick_s,
        done_at=done_at,
        cpu_s=after.own - before.own,
        loop_cpu_s=after.loop - before.loop,
        db_cpu_s=after.db - before.db,
        children_cpu_s=after.children - before.children + watchdog_s,
        watchdog_cpu_s=watchdog_s,
    )


def build(install: Install, worker: Any, clock: StartClock, executor: str) -> Scheduler:
    """The worker's scheduler as ``fleetcron scheduler --workers N`` builds it, its heap
    settled as ``serve`` settles it; with ``executor == "fake"`` its local targets run
    nothing (the same cap of 64, the scheduler's clock)."""
    from fleetcron import heap
    from fleetcron.metrics import Metrics
    from fleetcron.scheduler.assembly import build_scheduler

    name = NODE_NAME if worker is None else worker.name(NODE_NAME)
    scheduler = build_scheduler(install.open(name, clock), Metrics(), worker=worker)
    if executor == "fake":
        from fleetcron.executors.fake import FakeExecutor

        assert scheduler.executors is not None
        fake = FakeExecutor(clock=clock, concurrency=64)
        scheduler.executors = {**scheduler.executors, "local": fake}
    heap.settle()
    return scheduler


async def worker_main(worker_of: str, executor: str) -> None:
    """A worker: build, start, one housekeeping round, "ready"; read the start instant;
    at it tick and wait for the runs; print its :class:`WorkerReport` as JSON."""
    from fleetcron.core.members import Worker

    quiet_production_logging()
    install = Install(**json.loads(sys.stdin.readline()))
    install = Install(**{**asdict(install), "master_key": os.environ[KEY_VARIABLE]})
    index, count = (int(part) for part in worker_of.split("/"))
    clock = StartClock(install.due)
    scheduler = build(install, Worker(index, count) if count > 1 else None, clock, executor)
    await scheduler.start()
    assert scheduler.maintenance is not None
    await scheduler._in_db(scheduler.maintenance)
    print("ready", flush=True)
    clock.at = float(await asyncio.to_thread(sys.stdin.readline))
    await asyncio.sleep(max(0.0, clock.at - time.time()))
    report = await tick_and_wait(scheduler, index)
    print(json.dumps(asdict(report)), flush=True)
    await scheduler.shutdown()
    scheduler.app.close()


# -- the parent: a design's measurement -----------------------------------------------------


@dataclass
class LockSampler:
    """Samples, every :data:`SAMPLE_S`, the backends of the database waiting for a lock,
    and what each was running (the statement's first words)."""

    conninfo: str
    samples: int = 0
    waiting: int = 0
    most: int = 0
    statements: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> LockSampler:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()

    def _sample(self) -> None:
        import psycopg

        query = (
            "SELECT wait_event, regexp_replace(left(query, 90), '\\s+', ' ', 'g') "
            "FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            while not self._stop.wait(SAMPLE_S):
                rows = conn.execute(query).fetchall()
                self.samples += 1
                self.waiting += bool(rows)
                self.most = max(self.most, len(rows))
                self.statements.update(f"{event}: {text}" for event, text in rows)

    def summary(self) -> str:
        return f"{self.waiting}/{self.samples} (max {self.most})"


@dataclass(frozen=True)
class Server:
    """The PostgreSQL cluster: its postmaster (for its CPU) and how to connect."""

    handle: Any
    postmaster: int

    def conninfo(self, db: str) -> str:
        return str(self.handle.conninfo(db))

    def cpu(self) -> float:
        """CPU seconds of the postmaster and its live backends, plus those of the backends
        that exited meanwhile (the postmaster's reaped children: a pool closes connections
        beyond its size as they come back)."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in [self.postmaster, *children_of(self.postmaster)]:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
            if pid == self.postmaster:
                total += int(fields[13]) + int(fields[14])
        return total / ticks

    def run_counts_off(self, db: str) -> None:
        """The experiment ``N:nocounts``: the triggers that count runs per minute and
        status off (on PostgreSQL the only triggers on ``runs``); the counts go stale."""
        import psycopg

        with psycopg.connect(self.conninfo(db), autocommit=True) as conn:
            conn.execute("ALTER TABLE runs DISABLE TRIGGER USER")

    def transactions(self, db: str) -> int:
        import psycopg

        query = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s"
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(query, (db,)).fetchone()
        return int(row[0]) if row else 0


def spawn(install: Install, worker_of: str, executor: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, KEY_VARIABLE: install.master_key}
    argv = [sys.executable, __file__, "--worker-of", worker_of, "--executor", executor]
    with log.open("a") as err:
        proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
        )
    assert proc.stdin is not None
    shared = {**asdict(install), "master_key": ""}
    proc.stdin.write(json.dumps(shared) + "\n")
    proc.stdin.flush()
    return proc


def read_line(proc: subprocess.Popen[str], log: Path) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"a worker exited ({proc.wait()}); its log:\n{log.read_text()[-3000:]}")
    return line


@dataclass(frozen=True)
class Design:
    """One measurement: ``workers`` scheduler processes (0: bare asyncio), and an option:
    ``nocounts`` (an experiment: N workers with the run-count triggers off, to size the
    lock they take on the minute's count rows, which all workers share) or ``guarded``
    (bare asyncio spawning the script a cluster's local run is: the target's mark checked,
    then ``exec /bin/sh -c true``)."""

    workers: int
    executor: str
    option: str = ""

    @property
    def label(self) -> str:
        if self.workers == 0:
            guarded = ", the cluster's guarded script" if self.option == "guarded" else ""
            return f"bare asyncio (no scheduler){guarded}"
        label = f"fleetcron, {self.workers} worker{'s' if self.workers > 1 else ''}"
        if self.option == "nocounts":
            return f"{label}, EXPERIMENT: run-count triggers off"
        return label

    @property
    def script(self) -> str:
        """What bare asyncio spawns with ``/bin/sh -c``."""
        if self.option != "guarded":
            return "true"
        from fleetcron.executors.watchdog import guarded_command

        return guarded_command("true", 1, "bench")


def run_workers(install: Install, design: Design, server: Server, db: str) -> dict[str, Any]:
    """Start the workers, name the start instant once all are ready, collect their reports;
    PostgreSQL's CPU and lock waits over the same span, its transactions after."""
    log = Path(install.directory) / "workers.log"
    n = design.workers
    procs = [spawn(install, f"{i}/{n}", design.executor, log) for i in range(n)]
    for proc in procs:
        read_line(proc, log)
    xact0 = server.transactions(db)
    start = time.time() + LEAD_S
    with LockSampler(server.conninfo(db)) as locks:
        pg0 = server.cpu()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{start!r}\n")
            proc.stdin.flush()
        reports = [WorkerReport(**json.loads(read_line(p, log))) for p in procs]
        pg_s = server.cpu() - pg0
    for proc in procs:
        if proc.wait(timeout=60) != 0:
            raise SystemExit(f"a worker failed; its log:\n{log.read_text()[-3000:]}")
    return {
        "total_s": max(r.done_at for r in reports) - start,
        "cpu_s": sum(r.cpu_s for r in reports),
        "loop_cpu_s": sum(r.loop_cpu_s for r in reports),
        "db_cpu_s": sum(r.db_cpu_s for r in reports),
        "watchdog_cpu_s": sum(r.watchdog_cpu_s for r in reports),
        "children_cpu_s": sum(r.children_cpu_s for r in reports),
        "pg_cpu_s": pg_s,
        "xacts": server.transactions(db) - xact0,
        "locks": locks.summary(),
        "lock_statements": locks.statements,
        "tick_ms": "/".join(f"{r.tick_s * 1000:.0f}" for r in reports),
    }


def recorded(install: Install, runs: int) -> dict[str, Any]:
    """The runs as recorded: lateness, successes, runs per worker (the node they name)."""
    from sqlalchemy import select

    from fleetcron.store.schema import Run

    app = install.open(NODE_NAME, clock=lambda: datetime.now(UTC))
    try:
        with app.db.read() as session:
            rows = session.execute(
                select(Run.status, Run.started_at, Run.scheduled_for, Run.node)
            ).all()
    finally:
        app.close()
    ok = sum(r.status == "succeeded" for r in rows)
    if len(rows) != runs or ok != runs:
        raise SystemExit(f"{len(rows)} runs recorded, {ok} succeeded, of {runs}")
    per_node = Counter(r.node for r in rows)
    return {
        "lateness": [(r.started_at - r.scheduled_for).total_seconds() for r in rows],
        "per_worker": "/".join(str(per_node[k]) for k in sorted(per_node)),
    }


def measure(design: Design, server: Server, args: argparse.Namespace, n: int) -> dict[str, Any]:
    """One design on a fresh database (bare asyncio needs none)."""
    if design.workers == 0:
        from overhead_bench import bare_asyncio

        result = asyncio.run(bare_asyncio(args.runs, script=design.script))
        return {
            **result,
            "pg_cpu_s": None,
            "xacts": None,
            "locks": "-",
            "tick_ms": "-",
            "per_worker": "-",
        }
    db = f"workers{n}"
    install = new_install(server.handle.create_database(db), args.shards)
    set_up(install, args.runs)
    if design.option == "nocounts":
        server.run_counts_off(db)
    result = run_workers(install, design, server, db)
    return {**result, **recorded(install, args.runs)}


# -- the parent: the tables -----------------------------------------------------------------


def per_run(value: float | None, runs: int, scale: float = 1000.0, digits: int = 2) -> str:
    return "-" if value is None else f"{value / runs * scale:.{digits}f}"


def threads(r: dict[str, Any], runs: int) -> str:
    """The event loop's and the database thread's share of the scheduler CPU per run."""
    if "loop_cpu_s" not in r:
        return "-"
    return f"{per_run(r['loop_cpu_s'], runs)} / {per_run(r['db_cpu_s'], runs)}"


def local_row(design: Design, i: int, r: dict[str, Any], runs: int) -> list[object]:
    lateness = r["lateness"]
    return [
        design.label,
        i + 1,
        f"{r['total_s']:.2f}",
        f"{percentile(lateness, 50):.3f}",
        f"{percentile(lateness, 99):.3f}",
        f"{max(lateness):.3f}",
        per_run(r["cpu_s"], runs),
        threads(r, runs),
        per_run(r["children_cpu_s"], runs),
        "-" if "watchdog_cpu_s" not in r else f"{r['watchdog_cpu_s'] * 1000:.0f}",
        per_run(r["pg_cpu_s"], runs),
        per_run(r["xacts"], runs, 1.0),
        r["locks"],
        r["per_worker"],
        r["tick_ms"],
    ]


LOCAL_HEADERS = [
    "design",
    "#",
    "minute to all recorded s",
    "lateness p50 s",
    "lateness p99 s",
    "lateness max s",
    "scheduler CPU ms / run",
    "of which loop / DB thread",
    "children CPU ms / run",
    "of which watchdog ms",
    "PostgreSQL CPU ms / run",
    "transactions / run",
    "lock-wait samples",
    "runs per worker",
    "first tick ms (per worker)",
]


def fake_row(design: Design, i: int, r: dict[str, Any], runs: int) -> list[object]:
    both = r["cpu_s"] + r["pg_cpu_s"]
    return [
        design.label,
        i + 1,
        f"{r['total_s']:.2f}",
        f"{runs / r['total_s']:,.0f}",
        f"{runs / r['cpu_s']:,.0f}",
        f"{runs / both:,.0f}",
        per_run(r["cpu_s"], runs),
        threads(r, runs),
        per_run(r["pg_cpu_s"], runs),
        per_run(r["xacts"], runs, 1.0),
        f"{percentile(r['lateness'], 99):.3f}",
        r["locks"],
        r["per_worker"],
        r["tick_ms"],
    ]


FAKE_HEADERS = [
    "design",
    "#",
    "minute to all recorded s",
    "executions / s (wall)",
    "per scheduler CPU s",
    "per CPU s (schedulers + PostgreSQL)",
    "scheduler CPU ms / run",
    "of which loop / DB thread",
    "PostgreSQL CPU ms / run",
    "transactions / run",
    "lateness p99 s",
    "lock-wait samples",
    "runs per worker",
    "first tick ms (per worker)",
]


def goals(results: list[tuple[Design, dict[str, Any]]]) -> list[str]:
    """Issue 29's goals for local runs: each N-worker design of the product against the
    bare floor (``bare``), medians over the repeats."""
    from statistics import median

    def med(design: Design, key: str) -> float:
        return float(median(r[key] for d, r in results if d == design))

    bare = Design(0, "local")
    if bare not in {d for d, _ in results}:
        return []
    lines = []
    for design in dict.fromkeys(d for d, _ in results if d.workers and not d.option):
        wall = med(design, "total_s") / med(bare, "total_s")
        kids = med(design, "children_cpu_s") / med(bare, "children_cpu_s")
        p99 = median(percentile(r["lateness"], 99) for d, r in results if d == design)
        lines.append(
            f"{design.label}: all recorded {wall:.2f}x bare (goal <= {GOAL_WALL}x: "
            f"{'met' if wall <= GOAL_WALL else 'NOT met'}); children CPU {kids:.2f}x "
            f"(goal <= {GOAL_CHILDREN}x: {'met' if kids <= GOAL_CHILDREN else 'NOT met'}); "
            f"p99 lateness {p99:.3f} s (goal < {GOAL_P99_S} s: "
            f"{'met' if p99 < GOAL_P99_S else 'NOT met'})"
        )
        guarded = Design(0, "local", "guarded")
        if guarded in {d for d, _ in results}:
            ratio = med(design, "children_cpu_s") / med(guarded, "children_cpu_s")
            lines.append(f"  children CPU against bare asyncio's guarded script: {ratio:.2f}x")
    return lines


def lock_report(results: list[tuple[Design, dict[str, Any]]]) -> list[str]:
    """The statements seen waiting for a lock, per design (samples, most first)."""
    lines = []
    for design in dict.fromkeys(d for d, _ in results):
        seen: Counter[str] = Counter()
        for d, r in results:
            if d == design:
                seen.update(r.get("lock_statements", {}))
        lines += [
            f"{design.label}: {n} samples waiting in {text}" for text, n in seen.most_common(5)
        ]
    return lines


def designs_of(args: argparse.Namespace) -> list[Design]:
    names = args.designs.split(",")
    if args.executor == "fake" and any(name.startswith("bare") for name in names):
        raise SystemExit("--executor fake: no bare design (nothing to spawn)")
    designs = []
    for name in names:
        workers, _, option = name.partition(":")
        allowed = ("", "guarded") if workers == "bare" else ("", "nocounts")
        if option not in allowed or not (workers == "bare" or workers.isdigit()):
            raise SystemExit(f"--designs: {name!r} is not bare, bare:guarded, N or N:nocounts")
        designs.append(Design(0 if workers == "bare" else int(workers), args.executor, option))
    return designs


def parent_main(args: argparse.Namespace) -> None:
    designs = designs_of(args)
    print(f"load average at start: {loadavg()}")
    what = "local runs of `true`" if args.executor == "local" else "no-op runs (fake executor)"
    print(f"{args.runs} {what}, one bulk job, {args.shards} shards, PostgreSQL, cluster mode")
    print(f"command: .venv/bin/python bench/workers_bench.py {' '.join(sys.argv[1:])}")
    results: list[tuple[Design, dict[str, Any]]] = []
    rows: list[list[object]] = []
    row = local_row if args.executor == "local" else fake_row
    with running_postgres() as handle:
        if handle is None:
            raise SystemExit("PostgreSQL binaries not found")
        pid = int((handle.data_dir / "postmaster.pid").read_text().split()[0])  # type: ignore[attr-defined]
        server = Server(handle, pid)
        for i in range(args.repeat):
            for design in designs:
                r = measure(design, server, args, len(results))
                results.append((design, r))
                rows.append(row(design, i, r, args.runs))
                print(
                    f"  {design.label} #{i + 1}: {r['total_s']:.2f} s (load {loadavg()})",
                    flush=True,
                )
    print()
    print(table(LOCAL_HEADERS if args.executor == "local" else FAKE_HEADERS, rows))
    for line in goals(results):
        print(line)
    print("\nlock waits (wait event: statement):")
    for line in lock_report(results) or ["none seen"]:
        print(f"  {line}")
    print(f"\nload average at end: {loadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="targets, one run each")
    parser.add_argument("--designs", default="bare,1,2", help="bare and worker counts")
    parser.add_argument("--repeat", type=int, default=1, help="fresh database each time")
    parser.add_argument("--shards", type=int, default=64, help="FLEETCRON_SHARDS")
    parser.add_argument(
        "--executor",
        choices=("local", "fake"),
        default="local",
        help="fake: run nothing, measure the scheduling throughput (no bare design)",
    )
    parser.add_argument("--worker-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_of is not None:
        asyncio.run(worker_main(args.worker_of, args.executor))
    else:
        parent_main(args)


if __name__ == "__main__":
    main()
