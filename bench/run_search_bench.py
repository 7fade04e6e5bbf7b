"""Server time of a runs search on a million runs, on SQLite and PostgreSQL: each filter
alone and together, output text (rare and common), deep pages by cursor against pages by
offset, and what the PostgreSQL trigram index costs the run writes.

The history: ``--jobs`` bulk jobs (default 50) on ``--targets`` targets (default 2,000),
``--runs`` slots each (default 10): a million runs, one slot a minute. Every run's stdout
names its job, target and a count ("bulk07 on host00042: processed 1234 items"); one run
in 100 failed (stderr "exit status 1"), one in 10,000 has "disk full" in its stderr. Rows
are inserted in bulk; the output index (PostgreSQL: the pg_trgm GIN index of migration
0017; SQLite: the FTS5 trigram table and its triggers, migration 0019) is built after the
fill (its build time is reported), and ``--writes`` more rows are inserted before and after
it, to show what it costs the writes.

Each search runs ``--requests`` times (after one warm-up) through
``services.run_search.search_runs``, as the API and the Runs page call it; p50 and p95.

    .venv/bin/python bench/run_search_bench.py [--targets 2000] [--jobs 50] [--runs 10] \\
        [--requests 10] [--writes 20000] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import insert, text

from _common import (
    core_table,
    counting_off,
    databases,
    loadavg,
    make_app,
    percentile,
    recount_runs,
    table,
)
from fleetcron.app import SYSTEM, App
from fleetcron.services.runs.reads import RunFilter
from fleetcron.services.runs.search import search_runs
from fleetcron.store.schema import SEARCH_TEXT_SQL, Run

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BATCH = 20_000


def run_row(i: int, n_targets: int, n_jobs: int, n_runs: int) -> dict[str, Any]:
    slot_index, rest = divmod(i, n_targets * n_jobs)
    job, target = divmod(rest, n_targets)
    slot = NOW - timedelta(minutes=n_runs - slot_index)
    failed = i % 100 == 7
    return {
        "assignment_id": rest + 1,
        "job_id": job + 1,
        "target_id": target + 1,
        "job_name": f"bulk{job:02d}",
        "target_name": f"host{target:05d}",
        "origin": "bulk",
        "command": f"/usr/local/bin/task-{job}",
        "scheduled_for": slot,
        "trigger": "schedule",
        "attempt": 1,
        "status": "failed" if failed else "succeeded",
        "exit_code": 1 if failed else 0,
        "stdout_head": f"bulk{job:02d} on host{target:05d}: processed {i % 9973} items\n",
        "stderr_head": ("disk full\n" if i % 10_000 == 4242 else "")
        + ("exit status 1\n" if failed else ""),
        "started_at": slot,
        "finished_at": slot + timedelta(seconds=1),
        "duration_ms": 1000 + i % 5000,
        "node": "bench",
        "actor": "system",
        "created_at": slot,
    }


def insert_rows(app: App, rows: Iterator[dict[str, Any]]) -> None:
    batch: list[dict[str, Any]] = []
    with app.db.engine.begin() as conn:
        counting_off(conn)  # counted anew after the load
        for row in rows:
            batch.append(row)
            if len(batch) == BATCH:
                conn.execute(insert(core_table(Run)), batch)
                batch = []
        if batch:
            conn.execute(insert(core_table(Run)), batch)
    recount_runs(app)


def analyze(app: App) -> None:
    if app.db.dialect == "postgresql":
        with app.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE runs"))
    else:
        with app.db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))


def has_trgm(app: App) -> bool:
    with app.db.engine.connect() as conn:
        return bool(
            conn.execute(
                text("SELECT 1 FROM pg_indexes WHERE indexname = 'ix_runs_search_trgm'")
            ).scalar()
        )


def drop_trgm(app: App) -> None:
    with app.db.engine.begin() as conn:
        conn.execute(text("DROP INDEX IF EXISTS ix_runs_search_trgm"))


_FTS = importlib.import_module("fleetcron.store.migrations.versions.0019_run_search_sqlite_fts")


def has_fts(app: App) -> bool:
    with app.db.engine.connect() as conn:
        return bool(
            conn.execute(text("SELECT 1 FROM sqlite_master WHERE name = 'runs_fts'")).scalar()
        )


def drop_fts(app: App) -> None:
    with app.db.engine.begin() as conn:
        for trigger in ("runs_fts_update", "runs_fts_delete", "runs_fts_insert"):
            conn.execute(text(f"DROP TRIGGER IF EXISTS {trigger}"))
        conn.execute(text("DROP TABLE IF EXISTS runs_fts"))


def create_fts(app: App) -> float:
    """The FTS5 table, its rebuild from the runs and the triggers, as migration 0019."""
    t0 = time.perf_counter()
    with app.db.engine.begin() as conn:
        for statement in _FTS.statements():
            conn.execute(text(statement))
    return time.perf_counter() - t0


def create_trgm(app: App) -> float:
    t0 = time.perf_counter()
    with app.db.engine.begin() as conn:
        conn.execute(
            text(
                "CREATE INDEX ix_runs_search_trgm ON runs USING gin "
                f"({SEARCH_TEXT_SQL} gin_trgm_ops)"
            )
        )
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any], requests: int) -> tuple[float, float, Any]:
    result = fn()  # warm-up
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return percentile(times, 50), percentile(times, 95), result


def searches(app: App, n_runs: int) -> list[tuple[str, Callable[[], Any]]]:
    hour_ago = NOW - timedelta(minutes=n_runs // 2)

    def page(f: RunFilter, **kw: Any) -> Callable[[], Any]:
        return lambda: search_runs(app, SYSTEM, f, **kw)

    def deep(f: RunFilter, pages: int) -> Callable[[], Any]:
        """Page ``pages`` read by key, from the cursor a client paging through would hold:
        that of the page before (taken here, untimed, by one read by offset)."""
        before = search_runs(app, SYSTEM, f, offset=(pages - 2) * 50)
        cursor = before.next_cursor
        return lambda: search_runs(app, SYSTEM, f, cursor=cursor)

    return [
        ("newest page, no filter", page(RunFilter())),
        ("one job", page(RunFilter(job="bulk07"))),
        ("one target", page(RunFilter(target="host00042"))),
        ("status failed", page(RunFilter(status="failed"))),
        (
            "job + target + status",
            page(RunFilter(job="bulk07", target="host00042", status="failed")),
        ),
        ("job + time range", page(RunFilter(job="bulk07", since=hour_ago, until=NOW))),
        ("text, rare (disk full)", page(RunFilter(grep="disk full"))),
        ("text, common (processed 12)", page(RunFilter(grep="processed 12"))),
        ("text + job", page(RunFilter(job="bulk07", grep="disk full"))),
        ("text, absent", page(RunFilter(grep="no such output"))),
        ("one job, page 200 by cursor", deep(RunFilter(job="bulk07"), 200)),
        ("one job, page 200 by offset", page(RunFilter(job="bulk07"), offset=199 * 50)),
        ("no filter, page 2,000 by cursor", deep(RunFilter(), 2000)),
        ("no filter, page 2,000 by offset", page(RunFilter(), offset=1999 * 50)),
    ]


def write_cost(app: App, start: int, writes: int, args: argparse.Namespace) -> float:
    """Runs recorded per second the way the run store records them: inserted without
    output when they start (a claim), then their output written when they finish (one
    executemany UPDATE, as ``RunStore.finish``), in batches like the fill's."""
    rows = [
        {**run_row(i, args.targets, args.jobs, args.runs), "assignment_id": 10_000_000 + i}
        for i in range(start, start + writes)
    ]
    outputs = [(r["stdout_head"], r["stderr_head"]) for r in rows]
    for r in rows:
        r["stdout_head"] = r["stderr_head"] = ""
    t0 = time.perf_counter()
    insert_rows(app, iter(rows))
    with app.db.engine.begin() as conn:
        first = conn.execute(text("SELECT max(id) FROM runs")).scalar_one() - writes + 1
        conn.execute(
            text("UPDATE runs SET stdout_head = :out, stderr_head = :err WHERE id = :rid"),
            [{"rid": first + k, "out": out, "err": err} for k, (out, err) in enumerate(outputs)],
        )
    return writes / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    for what in ("targets", "jobs", "runs", "requests", "writes"):
        if getattr(args, what) < 1:
            parser.error(f"--{what} must be at least 1, got {getattr(args, what)}")
    total = args.targets * args.jobs * args.runs
    print(f"load average at start: {loadavg()}", flush=True)
    rows: list[list[str]] = []
    notes: list[str] = []
    for backend, url, directory in databases(args.backends, "run-search-bench"):
        app = make_app(url, directory, clock=lambda: NOW)
        trgm = backend == "postgresql" and has_trgm(app)
        fts = backend == "sqlite" and has_fts(app)
        if trgm:
            drop_trgm(app)
        if fts:
            drop_fts(app)
        t0 = time.perf_counter()
        insert_rows(app, (run_row(i, args.targets, args.jobs, args.runs) for i in range(total)))
        filled = time.perf_counter() - t0
        print(f"  {backend}: {total:,} runs in {filled:.0f} s", flush=True)
        if trgm or fts:
            plain = write_cost(app, total, args.writes, args)
            built = create_trgm(app) if trgm else create_fts(app)
            indexed = write_cost(app, total + args.writes, args.writes, args)
            what = "trigram index" if trgm else "FTS5 trigram table"
            notes.append(
                f"{backend}: {what} built in {built:.0f} s over {total:,} runs; "
                f"runs recorded (started, then finished with output): {plain:,.0f}/s "
                f"without it, {indexed:,.0f}/s with it{'' if trgm else ' (its triggers)'}"
            )
            print("  " + notes[-1], flush=True)
        elif backend == "postgresql":
            notes.append(f"{backend}: pg_trgm not available; text search scans")
        analyze(app)
        for name, fn in searches(app, args.runs):
            p50, p95, found = timed(fn, args.requests)
            matched = f"{found.matched:,}{'+' if found.more else ''}"
            rows.append([backend, name, f"{p50:.1f}", f"{p95:.1f}", str(len(found.runs)), matched])
            print(f"  {rows[-1]}", flush=True)
        app.close()
    print()
    print(table(["backend", "search", "p50 ms", "p95 ms", "rows", "matched"], rows, right=2))
    print()
    for note in notes:
        print(f"- {note}")
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    main()
