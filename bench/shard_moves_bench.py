"""Shard moves between nodes (``FLEETCRON_SHARD_PLACEMENT=members``): how long a drain
and a join take, per shard and in all.

Three nodes on a throwaway PostgreSQL (the test fixture's server, fsync off), 64 shards
(``--shards``), each node an ``App`` of its own (its own machine id, endpoint and
connection pool) in this process, each driven by the product's lease step on a thread of
its own: ``cluster.Lease`` with the members placement, as ``fleetcron scheduler`` builds
it for worker 0 of a node (``shared``, ``places_shards``, its member row renewed in the
lease's transaction), called every ``FLEETCRON_LEASE_RENEW_S`` (``--renew-s``, the
product's default 10 s; each node's first step at a random offset within one period, as
independent processes start). A move is timed when the step that made it returns (its
log line, ``action=cluster.shard_move``). No scheduler runs: a run in flight is an
execution claim of the shard (with its running run) whose deadline is ``--run-s`` ahead,
which is how a drain sees a run until it ends.

Scenarios, one after the other on the same nodes, repeated ``--repeat`` times:

* **join**: alpha and beta hold every shard; gamma's scheduler starts (its member row, its
  steps). Timed from its start to gamma holding its share (every shard placed on it
  handed over: each drained by its owner at the owner's next step, handed over at the one
  after, once no claim of it is unfinished).
* **drain**: ``cluster drain gamma`` (``set_drained``, audited) at t0, gamma's runs all
  ended; timed to every shard of gamma handed over.
* **drain, runs in flight**: the same with a claim on each of gamma's shards that ends
  ``--run-s`` after t0: a shard is handed over at the first step of its owner after that.
* after each drain gamma is undrained and joins again (timed as a join).
* **killed, runs in flight**: gamma's process dies (its steps stop: no renewal of its
  member row or its shards' leases) with a claim on each of its shards ending ``--run-s``
  after t0; timed from its death to each shard's takeover by alpha or beta (its member row
  lapses, then the shard's ownership lease; the claims are revoked, and the new owner
  starts the shard once they have ended: "runs may start" is the later of the two). Then
  gamma starts again and joins (timed as a join).

Per scenario: the per-shard latency (t0 to that shard's handoff) p50, p90, max, and the
total (t0 to the last shard handed over); the steps each node made meanwhile and the
median step's database time and CPU (thread CPU of the stepping thread).

Run::

    .venv/bin/python bench/shard_moves_bench.py --repeat 2
    .venv/bin/python bench/shard_moves_bench.py --renew-s 2 --run-s 5 --repeat 2
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import loadavg, median, percentile, running_postgres, table, work_dir

if TYPE_CHECKING:
    from fleetcron.app import App
    from fleetcron.services.cluster.lease import Lease

NAMES = ("alpha", "beta", "gamma")
LEASE_S = 30.0
TIMEOUT_S = 300.0


class Moves(logging.Handler):
    """Every move the nodes' steps made, with when its step returned (the lease step's
    log line; nothing in the product is instrumented)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[tuple[float, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "action", None) == "cluster.shard_move":
            args = record.args
            assert isinstance(args, tuple)
            shard, kind = args[0], args[1]
            assert isinstance(shard, int)
            self.seen.append((time.monotonic(), shard, str(kind)))

    def since(self, t0: float, kind: str) -> dict[int, float]:
        """Each shard's first move of ``kind`` after ``t0``: seconds after it."""
        out: dict[int, float] = {}
        for at, shard, k in list(self.seen):
            if at >= t0 and k == kind and shard not in out:
                out[shard] = at - t0
        return out


@dataclass
class Stepper:
    """A node's lease step every ``period`` seconds on a thread of its own, as its
    scheduler's housekeeping calls it; the wall and thread-CPU time of each."""

    lease: Lease
    period: float
    steps: list[tuple[float, float, float]] = field(default_factory=list)  # at, wall, cpu
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.stop.clear()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        if self.stop.wait(random.uniform(0, self.period)):
            return
        while True:
            t0, c0 = time.monotonic(), time.thread_time()
            self.lease.step()
            self.steps.append((t0, time.monotonic() - t0, time.thread_time() - c0))
            if self.stop.wait(self.period):
                return


@dataclass
class BenchNode:
    app: App
    node_id: str
    stepper: Stepper
    membership: Any


def open_node(url: str, directory: Path, name: str, *, shards: int, renew_s: float) -> BenchNode:
    """A node as ``fleetcron scheduler`` (worker 0 of 1) starts it with the members
    placement: announced, approved, its lease step placing shards."""
    import secrets

    from pydantic import SecretStr

    from fleetcron.app import App
    from fleetcron.config import Settings
    from fleetcron.core.members import Worker
    from fleetcron.services.cluster import status as cluster
    from fleetcron.services.cluster.lease import Lease
    from fleetcron.services.cluster.workers import WorkerMembership

    machine_id = directory / f"{name}.machine-id"
    machine_id.write_text(secrets.token_hex(16) + "\n")
    settings = Settings(
        data_dir=directory / name,
        database_url=url,
        master_key=SecretStr((directory / "master.key").read_text()),
        cluster=True,
        endpoint=f"http://{name}.bench:8080",
        machine_id_file=machine_id,
        node_name=name,
        shards=shards,
        shard_placement="members",
        lease_s=LEASE_S,
        lease_renew_s=renew_s,
    )
    app = App.open(settings)
    app.db.upgrade()
    node = cluster.Node(app)
    cluster.announce(app, node)
    from fleetcron.app import SYSTEM

    cluster.approve(app, SYSTEM, node.identity)
    membership = WorkerMembership(app, node.identity.node_id, Worker(0, 1))
    lease = Lease(app, node, shared=True, places_shards=True, also_renew=membership.renew_in)
    return BenchNode(app, node.identity.node_id, Stepper(lease, renew_s), membership)


def owned(app: App) -> dict[str | None, int]:
    """Shards per owner (``None``: unowned), and under ``"draining"`` how many drain."""
    from collections import Counter

    from sqlalchemy import select

    from fleetcron.store.schema import ClusterOwnership

    with app.db.read() as session:
        rows = session.execute(
            select(ClusterOwnership.owner_node_id, ClusterOwnership.draining)
        ).all()
    counts = Counter(o for o, _ in rows)
    counts["draining"] = sum(bool(d) for _, d in rows)
    return dict(counts)


def holds_share(node: BenchNode, share: int) -> Callable[[], bool]:
    def done() -> bool:
        o = owned(node.app)
        return o.get(node.node_id, 0) >= share and not o["draining"]

    return done


def wait_until(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():  # sleep-in-loop: polling the database for the nodes' moves
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def runs_in_flight(app: App, node_id: str, seconds: float) -> int:
    """A running run and its live claim on each shard ``node_id`` owns, ending (its
    claim's deadline) ``seconds`` from now by the database clock."""
    from sqlalchemy import select

    from fleetcron.coordination.guard import db_now
    from fleetcron.store.schema import ClusterOwnership, ExecutionClaim, Run

    with app.db.session() as session:
        rows = session.execute(
            select(ClusterOwnership.shard, ClusterOwnership.generation).where(
                ClusterOwnership.owner_node_id == node_id
            )
        ).all()
        now = db_now(session)
        for shard, generation in rows:
            run = Run(
                assignment_id=100_000 + shard,
                job_id=1,
                target_id=1,
                job_name="bench",
                target_name="bench",
                origin="bulk",
                command="sleep",
                scheduled_for=now,
                trigger="schedule",
                status="running",
                node=node_id,
                actor="system",
                created_at=now,
                shard=shard,
            )
            session.add(run)
            session.flush()
            session.add(
                ExecutionClaim(
                    run_id=run.id,
                    node_id=node_id,
                    shard=shard,
                    generation=generation,
                    created_at=now,
                    deadline_at=now + timedelta(seconds=seconds),
                    state="live",
                )
            )
        return len(rows)


@dataclass
class Result:
    scenario: str
    round: int
    moved: list[float]
    drained: list[float]
    steps: int
    step_ms: float
    step_cpu_ms: float
    #: A takeover: when each shard may start again (its takeover, or its old claims'
    #: end if later).
    may_start: list[float] = field(default_factory=list)

    def row(self) -> list[str]:
        m = self.moved or [0.0]
        return [
            self.scenario,
            str(self.round),
            str(len(self.moved)),
            f"{percentile(self.drained, 50):.2f}" if self.drained else "-",
            f"{percentile(m, 50):.2f}",
            f"{percentile(m, 90):.2f}",
            f"{max(m):.2f}",
            f"{max(self.may_start):.2f}" if self.may_start else "-",
            str(self.steps),
            f"{self.step_ms:.1f}",
            f"{self.step_cpu_ms:.1f}",
        ]


def measured(
    scenario: str,
    rnd: int,
    t0: float,
    moves: Moves,
    nodes: list[BenchNode],
    *,
    kind: str = "handoff",
) -> Result:
    steps = [s for n in nodes for s in n.stepper.steps if s[0] >= t0]
    return Result(
        scenario,
        rnd,
        sorted(moves.since(t0, kind).values()),
        sorted(moves.since(t0, "drain").values()),
        len(steps),
        median([s[1] for s in steps]) * 1000 if steps else 0.0,
        median([s[2] for s in steps]) * 1000 if steps else 0.0,
    )


def join(gamma: BenchNode, others: list[BenchNode], share: int) -> float:
    """gamma's scheduler starts; returns t0 once gamma holds its share, nothing draining."""
    t0 = time.monotonic()
    gamma.membership.join()
    gamma.stepper.start()
    wait_until("gamma's share", holds_share(gamma, share))
    return t0


def drain(gamma: BenchNode, run_s: float) -> tuple[float, int]:
    """``cluster drain gamma`` (with runs of ``run_s`` in flight on its shards if > 0);
    returns t0 once gamma holds nothing."""
    from fleetcron.app import SYSTEM
    from fleetcron.services.cluster.registry import set_drained

    runs = runs_in_flight(gamma.app, gamma.node_id, run_s) if run_s > 0 else 0
    t0 = time.monotonic()
    set_drained(gamma.app, SYSTEM, gamma.node_id, drained=True)
    wait_until("gamma drained", lambda: owned(gamma.app).get(gamma.node_id, 0) == 0)
    return t0, runs


def kill(gamma: BenchNode, run_s: float) -> tuple[float, int]:
    """gamma's process dies with runs of ``run_s`` in flight on its shards (its steps stop,
    nothing of it renews); returns t0 once the others took every shard of it over."""
    runs = runs_in_flight(gamma.app, gamma.node_id, run_s)
    t0 = time.monotonic()
    gamma.stepper.halt()
    wait_until("gamma's shards taken over", lambda: owned(gamma.app).get(gamma.node_id, 0) == 0)
    return t0, runs


def restart(gamma: BenchNode, share: int) -> float:
    """gamma's scheduler starts again; returns t0 once it holds its share again."""
    return join(gamma, [], share)


def undrain(gamma: BenchNode, share: int) -> float:
    from fleetcron.app import SYSTEM
    from fleetcron.services.cluster.registry import set_drained

    t0 = time.monotonic()
    set_drained(gamma.app, SYSTEM, gamma.node_id, drained=False)
    wait_until("gamma's share back", holds_share(gamma, share))
    return t0


def scenarios(nodes: list[BenchNode], moves: Moves, args: argparse.Namespace) -> list[Result]:
    alpha, beta, gamma = nodes
    share = args.shards // 3
    for n in (alpha, beta):
        n.membership.join()
        n.stepper.start()
    wait_until("alpha and beta holding every shard", lambda: None not in owned(alpha.app))
    results = []
    for rnd in range(1, args.repeat + 1):
        if rnd == 1:
            t0 = join(gamma, [alpha, beta], share)
            results.append(measured("join", rnd, t0, moves, nodes))
        t0, _ = drain(gamma, 0.0)
        results.append(measured("drain", rnd, t0, moves, nodes))
        t0 = undrain(gamma, share)
        results.append(measured("join (undrain)", rnd, t0, moves, nodes))
        t0, runs = drain(gamma, args.run_s)
        results.append(measured(f"drain, {runs} runs of {args.run_s:g} s", rnd, t0, moves, nodes))
        t0 = undrain(gamma, share)
        results.append(measured("join (undrain)", rnd, t0, moves, nodes))
        t0, runs = kill(gamma, args.run_s)
        killed = measured(
            f"killed, {runs} runs of {args.run_s:g} s", rnd, t0, moves, nodes, kind="takeover"
        )
        killed.may_start = [max(m, args.run_s) for m in killed.moved]
        results.append(killed)
        t0 = restart(gamma, share)
        results.append(measured("join (restart)", rnd, t0, moves, nodes))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--renew-s", type=float, default=10.0, help="FLEETCRON_LEASE_RENEW_S")
    parser.add_argument("--run-s", type=float, default=15.0, help="length of the runs in flight")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    if not 0 < args.renew_s < LEASE_S / 2:
        parser.error(f"--renew-s must be in (0, {LEASE_S / 2:g}), got {args.renew_s}")
    from _common import quiet_production_logging
    from fleetcron.crypto import generate_key

    quiet_production_logging()
    moves = Moves()
    lease_log = logging.getLogger("fleetcron.services.cluster.lease")
    lease_log.addHandler(moves)
    lease_log.setLevel(logging.INFO)
    print(f"load average at start: {loadavg()}")
    t_start, c_start = time.monotonic(), time.process_time()
    with running_postgres() as handle:
        if handle is None:
            raise SystemExit("PostgreSQL binaries not found")
        url = handle.create_database("moves")  # type: ignore[attr-defined]
        directory = work_dir("fleetcron-shard-moves-")
        (directory / "master.key").write_text(generate_key().decode())
        nodes: list[BenchNode] = []
        try:
            for name in NAMES:
                nodes.append(
                    open_node(url, directory, name, shards=args.shards, renew_s=args.renew_s)
                )
            results = scenarios(nodes, moves, args)
        finally:
            for n in nodes:
                n.stepper.halt()
                n.app.close()
    print(
        f"{args.shards} shards, 3 nodes, lease {LEASE_S:g} s renewed every {args.renew_s:g} s "
        f"(a step every period per node); times from t0 (the join, `cluster drain` or the death)"
    )
    print(
        table(
            [
                "scenario",
                "#",
                "shards moved",
                "drain started p50 s",
                "moved p50 s",
                "moved p90 s",
                "all moved s",
                "runs may start s",
                "steps (3 nodes)",
                "step ms (median, wall)",
                "step CPU ms",
            ],
            [r.row() for r in results],
            right=2,
        )
    )
    print(
        f"load average at end: {loadavg()}; {time.monotonic() - t_start:.0f} s, "
        f"this process's CPU {time.process_time() - c_start:.1f} s"
    )


if __name__ == "__main__":
    main()
