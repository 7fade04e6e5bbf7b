"""What the ownership guard costs per run-writing transaction at 1, 4 and 64 shards, on a
real PostgreSQL.

For each shard count (``FLEETCRON_SHARDS``) a fresh database and one cluster node, the
owner of every shard, with one ``* * * * *`` job on ``N`` local targets (N = 1 and 50: a
target's shard is its id's hash, so 50 targets fall on many of the 64 shards). Measured,
per transaction:

* ``verdict, every shard``: a transaction that only takes the guard's verdict under lock
  (:meth:`~fleetcron.coordination.guard.CoordinatedGuard.verdict`: every shard's row
  locked, the node registry read, every shard evaluated) and commits, as completions,
  retries and rollouts did before they named their runs' shards;
* ``verdict, one shard``: the same over one shard (``of_shards``: its row alone locked
  and evaluated, the others counted), as a claim of runs of one shard does;
* ``verdict, its run's shard read first``: a completion's guard (and a cancel's, an
  interruption's): the run's shard read from its row, then the verdict over that shard;
* ``claim N``: the scheduler's claim of one slot of the ``N`` assignments
  (:meth:`~fleetcron.store.runs.RunStore.claim_due`: the due rows, the verdict under lock,
  the older generations' claims, ``N`` runs and their execution claims inserted, the
  assignments advanced), the clock moved on a minute each time: the rows of its runs'
  shards locked (``of_shards``), and, beside it, ``every row locked`` as the guard did
  before (a guard that leaves ``of_shards`` out).

Reported per transaction, the median of the rounds in which the cases take turns: CPU
time (user + sys) of this process, CPU time of the PostgreSQL server's processes (read
from /proc: the backends and the background workers), and the write-ahead log written
(``pg_current_wal_insert_lsn()`` before and after, so the server's background writes in
between are counted too). CPU figures are from a shared, loaded machine.

Run by hand: ``.venv/bin/python bench/guard_bench.py [transactions per case]``.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from _common import (
    loadavg,
    make_app,
    median,
    own_cpu,
    running_postgres,
    server_cpu,
    table,
    work_dir,
)
from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, App
from fleetcron.coordination.guard import CoordinatedGuard
from fleetcron.core.ownership import Verdict

ENDPOINT = "http://bench.example:8080"
ROUNDS = 10
SHARD_COUNTS = (1, 4, 64)
BATCHES = (1, 50)


def wal_bytes(app: App) -> int:
    """The server's write-ahead log position, in bytes from its start."""
    from sqlalchemy import text

    with app.db.read() as session:
        return int(session.scalar(text("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")) or 0)


@dataclass
class Sample:
    cpu: float
    db: float
    wal: float


@dataclass
class EveryRowGuard(CoordinatedGuard):
    """The guard as it was before ``of_shards``: every shard's row locked and decided."""

    def verdict(self, session: Any, *, of_shards: Collection[int] | None = None) -> Verdict:
        return super().verdict(session)


@dataclass
class Fleet:
    """One node owning every one of ``shards`` shards, with a job on ``targets`` targets."""

    app: App
    clock: FakeClock
    store: Any
    before: Any
    guard: Any
    shards: int
    targets: int
    spread: int
    run_id: int = 0

    def verdict(self) -> None:
        with self.app.db.session() as session:
            assert self.guard.verdict(session).may_claim

    def verdict_of_one(self) -> None:
        with self.app.db.session() as session:
            assert self.guard.verdict(session, of_shards={0}).may_claim

    def verdict_of_its_run(self) -> None:
        """A completion's guard: its run's shard read, then the verdict over that shard."""
        from fleetcron.store.run_guard import shards_of_runs

        if not self.run_id:  # one run to complete (the warm-up claims it)
            self.run_id = min(
                d.run_id for d in self.store.claim_due(self.clock.advance(seconds=60)).dispatches
            )
        with self.app.db.session() as session:
            shards = shards_of_runs(self.guard, session, [self.run_id])
            assert self.guard.verdict(session, of_shards=shards).may_claim

    def claim(self) -> None:
        claimed = self.store.claim_due(self.clock.advance(seconds=60))
        assert len(claimed.dispatches) == self.targets, claimed

    def claim_before(self) -> None:
        claimed = self.before.claim_due(self.clock.advance(seconds=60))
        assert len(claimed.dispatches) == self.targets, claimed


def fleet(url: str, shards: int, targets: int) -> Fleet:
    from sqlalchemy import distinct, func, select

    from fleetcron.coordination.node import Node
    from fleetcron.core.targets import TargetKind, TargetSpec
    from fleetcron.services.cluster import status as cluster
    from fleetcron.services.jobs import edit as jobs
    from fleetcron.services.jobs.edit import JobSpec
    from fleetcron.services.targets import edit as target_edit
    from fleetcron.store.runs import RunStore
    from fleetcron.store.schema import ClusterOwnership, Target

    directory = work_dir(f"guard-{shards}-{targets}-")
    clock = FakeClock(datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC))
    machine_id = directory / "machine-id"
    machine_id.write_text(secrets.token_hex(16) + "\n")
    app = make_app(
        url, directory, clock, cluster=True, endpoint=ENDPOINT, machine_id_file=machine_id,
        shards=shards,
    )  # fmt: skip
    node = Node(app)
    cluster.announce(app, node)
    cluster.approve(app, SYSTEM, node.identity)
    for i in range(targets):
        target_edit.add_target(app, SYSTEM, TargetSpec(f"t{i}", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(app, SYSTEM, node.identity.node_id)
    guard = node.guard()
    with app.db.read() as session:
        rows = session.scalar(select(func.count()).select_from(ClusterOwnership))
        spread = session.scalar(select(func.count(distinct(Target.shard)))) or 0
    assert rows == shards, (rows, shards)
    store = RunStore(app.db, node=node.identity.node_id, guard=guard)
    every_row = EveryRowGuard(**{f.name: getattr(guard, f.name) for f in fields(guard)})
    before = RunStore(app.db, node=node.identity.node_id, guard=every_row)
    return Fleet(app, clock, store, before, guard, shards, targets, spread)


def measure(app: App, postmaster: int, n: int, call: Callable[[], None]) -> Sample:
    wal0 = wal_bytes(app)
    cpu0, db0 = own_cpu(), server_cpu(postmaster)
    for _ in range(n):
        call()
    cpu, db = own_cpu() - cpu0, server_cpu(postmaster) - db0
    return Sample(cpu / n, db / n, (wal_bytes(app) - wal0) / n)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with running_postgres() as server:
        if server is None:
            print("PostgreSQL binaries not found")
            return
        postmaster = int(
            (server.data_dir / "postmaster.pid").read_text().split()[0]  # type: ignore[attr-defined]
        )
        cases: dict[tuple[int, str], tuple[Fleet, Callable[[], None]]] = {}
        for shards in SHARD_COUNTS:
            for targets in BATCHES:
                url = server.create_database(f"bench_{shards}_{targets}")  # type: ignore[attr-defined]
                f = fleet(url, shards, targets)
                if targets == 1:
                    cases[(shards, "verdict, every shard")] = (f, f.verdict)
                    cases[(shards, "verdict, one shard")] = (f, f.verdict_of_one)
                    cases[(shards, "verdict, its run's shard read first")] = (
                        f,
                        f.verdict_of_its_run,
                    )
                cases[(shards, f"claim {targets}")] = (f, f.claim)
                cases[(shards, f"claim {targets}, every row locked")] = (f, f.claim_before)
        for _, call in cases.values():  # warm-up: the pool's connection, first statements
            call()
        seen: dict[tuple[int, str], list[Sample]] = {key: [] for key in cases}
        for _ in range(ROUNDS):
            for key, (f, call) in cases.items():
                seen[key].append(measure(f.app, postmaster, n // ROUNDS, call))
        rows: list[list[Any]] = []
        for (shards, what), samples in seen.items():
            f = cases[(shards, what)][0]
            rows.append(
                [
                    what,
                    shards,
                    "-" if what.startswith("verdict") else f.spread,
                    f"{median([s.cpu for s in samples]) * 1e3:.2f} ms",
                    f"{median([s.db for s in samples]) * 1e3:.2f} ms",
                    f"{median([s.wal for s in samples]):,.0f} B",
                ]
            )
        print(f"{n} transactions per case, {ROUNDS} rounds (median); load average {loadavg()}")
        print(
            table(
                [
                    "transaction",
                    "shards",
                    "shards of its runs",
                    "CPU (fleetcron)",
                    "CPU (PostgreSQL)",
                    "WAL",
                ],
                sorted(rows, key=lambda r: (r[0], r[1])),
            )
        )
        for f, _ in cases.values():
            f.app.close()


if __name__ == "__main__":
    main()
