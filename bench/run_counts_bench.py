"""Cost of health's day of run counts (``store/run_counts.counts_since``) by how the count
rows are laid out, and of the compaction that folds them (migration 0041).

A day of counts, 1,440 minutes × ``--statuses`` statuses, written straight into
``run_counts`` (no runs: this measures the read of the counts) as:

* ``compacted``: one row per minute and status (shard -1), what the housekeeping leaves
  and the layout of migration 0022 (one row per minute and status) before it;
* ``by shard``: one row per minute, status and shard for ``--shards`` shards (64), what the
  triggers write when every shard runs every minute and nothing is folded.

Reported per backend: the rows, the median of ``--calls`` calls of ``counts_since`` over the
day (wall, and the CPU of this process and, on PostgreSQL, of the session's backend, read
from ``/proc``: the machine may be loaded), then the compaction of the ``by shard`` day
into the ``compacted`` one (``compact`` in batches of 500 rows, a transaction each, as the
housekeeping runs it): its CPU per 1,000 rows folded.

Run by hand: ``.venv/bin/python bench/run_counts_bench.py [--shards 64] [--statuses 3]
[--calls 7] [--backends sqlite,postgresql]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import delete, insert, text

from _common import core_table, databases, loadavg, make_app, median, own_cpu, table
from fleetcron.app import App
from fleetcron.services.runs.count_compaction import BATCH
from fleetcron.store import run_counts
from fleetcron.store.schema import RunCount

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STATUSES = ("succeeded", "failed", "connect_error", "timed_out", "missed")


def fill(app: App, *, shards: list[int], statuses: int) -> int:
    rows = [
        {"minute": NOW - timedelta(minutes=m), "status": s, "shard": shard, "n": 1}
        for m in range(1, 1441)
        for s in STATUSES[:statuses]
        for shard in shards
    ]
    with app.db.engine.begin() as conn:
        conn.execute(delete(core_table(RunCount)))
        for start in range(0, len(rows), 20_000):
            conn.execute(insert(core_table(RunCount)), rows[start : start + 20_000])
    return len(rows)


class Cpu:
    """On PostgreSQL, the CPU seconds of the database's backends (the pool's connections)."""

    def __init__(self, app: App) -> None:
        self.app = app

    def server(self) -> float:
        if self.app.db.dialect != "postgresql":
            return 0.0
        query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        with self.app.db.engine.connect() as conn:
            pids = [int(pid) for pid in conn.execute(text(query)).scalars()]
        total = 0
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")


def timed(app: App, call: Callable[[], object], calls: int) -> tuple[float, float, float]:
    """Median wall ms, then client and server CPU ms per call."""
    cpu = Cpu(app)
    walls: list[float] = []
    client0, server0 = own_cpu(), cpu.server()
    for _ in range(calls):
        start = time.perf_counter()
        call()
        walls.append((time.perf_counter() - start) * 1000)
    client, server = own_cpu() - client0, cpu.server() - server0
    return median(walls), client * 1000 / calls, server * 1000 / calls


def day_counts(app: App) -> dict[str, int]:
    with app.db.read() as session:
        return run_counts.counts_since(session, NOW - timedelta(days=1))


def compact_all(app: App) -> None:
    before = NOW - timedelta(minutes=5)
    while True:
        with app.db.session() as session:
            if run_counts.compact(session, before=before, limit=BATCH) < BATCH:
                return


def one_backend(
    backend: str, url: str, directory: Path, args: argparse.Namespace
) -> list[list[object]]:
    app = make_app(url, directory / "data", clock=lambda: NOW)
    out: list[list[object]] = []
    try:
        for layout, shards in (
            ("compacted", [-1]),
            (f"by shard ({args.shards})", list(range(args.shards))),
        ):
            n = fill(app, shards=shards, statuses=args.statuses)
            wall, client, server = timed(app, lambda: day_counts(app), args.calls)
            out.append([backend, layout, f"{n:,}", f"{wall:.1f}", f"{client:.1f}", f"{server:.1f}"])
        expected = day_counts(app)
        wall, client, server = timed(app, lambda: compact_all(app), 1)
        assert day_counts(app) == expected
        folded = n - 1440 * args.statuses
        out.append([
            backend, "compaction of the by-shard day", f"{folded:,} folded", f"{wall:.0f}",
            f"{client * 1000 / folded:.2f} per 1,000", f"{server * 1000 / folded:.2f} per 1,000",
        ])  # fmt: skip
    finally:
        app.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--statuses", type=int, default=3)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    print(f"load average at start: {loadavg()}")
    rows: list[list[object]] = []
    for backend, url, directory in databases(args.backends, "run-counts"):
        rows.extend(one_backend(backend, url, directory, args))
    headers = [
        "backend",
        "count rows",
        "rows",
        "median ms (wall)",
        "client CPU ms",
        "server CPU ms",
    ]
    print(table(headers, rows))
    print(f"load average at end: {loadavg()}")


if __name__ == "__main__":
    main()
