"""Helpers shared by the scheduler benchmarks (tick, fan-out, overhead).

Benchmarks are run by hand and print to stdout only. They reuse the test fixtures'
throwaway servers (``tests/fixtures``): a real sshd on loopback and, when its binaries
are installed, a real PostgreSQL cluster started with initdb/pg_ctl.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from sqlalchemy import Table

    from fleetcron.app import App

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
# fleetcron itself is imported inside the helpers that need it, so a baseline measured in
# its own process (bench/fanout_bench.py) does not carry its memory.


def work_dir(prefix: str) -> Path:
    """A fresh temporary directory, removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as the kernel prints them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: int = 1) -> str:
    """A Markdown table; columns from index ``right`` on are right-aligned."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---:" if i >= right else "---" for i in range(len(headers))) + "|")
    lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


@dataclass
class ShiftedClock:
    """The real clock, moved so that it reads ``start`` now and then runs at real speed.

    Lets a benchmark tick "at the minute" without waiting for one, while every timestamp
    the scheduler and executors record keeps real durations.
    """

    start: datetime

    def __post_init__(self) -> None:
        self._t0 = time.monotonic()

    def __call__(self) -> datetime:
        return self.start + timedelta(seconds=time.monotonic() - self._t0)

    def restart(self, start: datetime) -> None:
        self.start, self._t0 = start, time.monotonic()


def production_scheduler(app: App) -> Any:
    """A standalone scheduler built as ``fleetcron serve`` builds it
    (``fleetcron.scheduler.assembly.build_scheduler``): housekeeping before every tick,
    Prometheus metrics observed, the app's clock, the standard executors; then the heap
    settled as ``serve`` settles it once what it serves with is built (``heap.settle``:
    the start-up frozen, young objects collected every 20,000 allocations)."""
    from fleetcron import heap
    from fleetcron.metrics import Metrics
    from fleetcron.scheduler.assembly import build_scheduler

    assert not app.settings.cluster
    scheduler = build_scheduler(app, Metrics())
    heap.settle()
    return scheduler


def core_table(model: Any) -> Table:
    """The Core table of an ORM model, for bulk inserts."""
    from sqlalchemy import Table

    return cast(Table, model.__table__)


def quiet_production_logging() -> None:
    """INFO log lines formatted like ``fleetcron serve``'s, written to /dev/null, so the
    benchmark pays for them without printing them."""
    import logging

    from fleetcron.logs import configure_logging

    configure_logging("text")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process


def make_app(
    database_url: str, data_dir: Path, clock: Callable[[], datetime], **settings: object
) -> App:
    """An App on ``database_url`` with a fresh master key; the schema is migrated."""
    from pydantic import SecretStr

    from fleetcron.app import App
    from fleetcron.config import Settings
    from fleetcron.crypto import generate_key

    # The benchmarks run local targets (off by default in a real install).
    values: dict[str, object] = {
        "shutdown_grace_s": 5.0,
        "allow_local_targets": True,
        "local_allow_root": True,
        **settings,
    }
    app = App.open(
        Settings(
            data_dir=data_dir,
            database_url=database_url,
            master_key=SecretStr(generate_key().decode()),
            **values,  # type: ignore[arg-type]
        ),
        clock=clock,
    )
    app.db.upgrade()
    return app


@contextlib.contextmanager
def running_postgres() -> Iterator[object | None]:
    """A throwaway PostgreSQL cluster (as the test fixture starts it), or None if absent."""
    from fixtures import postgres as pg

    bin_dir = pg.find_bin_dir()
    if bin_dir is None:
        yield None
        return
    run_as = pg._service_user() if os.geteuid() == 0 else None
    data_dir = pg._init_cluster(bin_dir, run_as)
    server = None
    try:
        for attempt in range(3):
            server = pg.PostgresServer(
                pg.HOST, pg._free_port(), pg.SUPERUSER, bin_dir, data_dir, run_as
            )
            try:
                server.start()
                break
            except RuntimeError as exc:
                if attempt == 2 or "Address already in use" not in str(exc):
                    raise
        yield server
    finally:
        if server is not None and server.is_running():
            server.stop("immediate")
        shutil.rmtree(data_dir.parent, ignore_errors=True)


def databases(backends: str, prefix: str) -> Iterator[tuple[str, str, Path]]:
    """Each backend of ``backends`` (comma separated: ``sqlite``, ``postgresql``) as
    ``(backend, database URL, work directory)``: a new SQLite file, or a database on a
    throwaway PostgreSQL cluster that runs while the caller's loop body does. PostgreSQL is
    skipped with a line when its binaries are not installed."""
    for backend in backends.split(","):
        with running_postgres() if backend == "postgresql" else contextlib.nullcontext() as server:
            directory = work_dir(f"{prefix}-{backend}-")
            if backend == "postgresql":
                if server is None:
                    print("PostgreSQL binaries not found; skipped")
                    continue
                url = server.create_database("bench")  # type: ignore[attr-defined]
            else:
                url = f"sqlite:///{directory / 'bench.db'}"
            yield backend, url, directory


def counting_off(conn: Any) -> None:
    """In a bulk load's transaction on PostgreSQL: the run-count triggers off until
    :func:`after_bulk_load`, which counts anew. A plain executemany insert sends a statement
    per row, and each statement's trigger then updates the same count row, which in one
    transaction walks that row's growing chain of versions (the store inserts its runs a
    few hundred to a statement). SQLite's triggers update their row in place and stay on."""
    from sqlalchemy import text

    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE runs DISABLE TRIGGER USER"))


def recount_runs(app: App) -> None:
    """After a load with :func:`counting_off`: the triggers on again, every count anew."""
    from sqlalchemy import text

    from fleetcron.store import run_counts

    with app.db.session() as session:
        if app.db.dialect == "postgresql":
            session.execute(text("ALTER TABLE runs ENABLE TRIGGER USER"))
        run_counts.recount(session)


def after_bulk_load(app: App) -> None:
    """After rows were inserted in bulk (outside the store): every assignment's newest-run
    columns computed from its runs (the store keeps them with its own writes:
    ``store/run_newest.py``), the run counts made anew (their triggers off during the load
    on PostgreSQL: :func:`counting_off`), then the planner's statistics (``ANALYZE``), checkpoint
    (PostgreSQL) and ``sync``."""
    from sqlalchemy import text

    from fleetcron.store import run_newest

    with app.db.session() as session:
        run_newest.refresh_all(session)
    recount_runs(app)
    if app.db.dialect == "postgresql":
        with app.db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
            conn.execute(text("CHECKPOINT"))
    else:
        with app.db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    # The load's writes reach the disk before anything is timed: else the measurements
    # share the machine with the write-back of a gigabyte of fresh pages.
    os.sync()


def job_row(created: datetime, **fields: object) -> dict[str, object]:
    """A row of ``jobs`` for a bulk insert: the options a job gets from ``job add`` without
    flags (no retries, overlap allowed, no catch-up), made by "bench" at ``created``;
    ``fields`` gives the rest (name, origin, schedule, timezone, command, target_id...)."""
    return {
        "notes": "",
        "selector": {},
        "timeout_s": 300,
        "overlap": "allow",
        "catchup": "none",
        "jitter_s": 0,
        "retries": 0,
        "retry_on": ["connect_error"],
        "retry_backoff_s": 30,
        "created_by": "bench",
        "updated_by": "bench",
        "created_at": created,
        "updated_at": created,
        **fields,
    }


def catch_up_sequences(
    conn: Any, tables: Sequence[str] = ("targets", "jobs", "assignments")
) -> None:
    """On PostgreSQL, move each table's id sequence past the ids a bulk insert gave
    explicitly (they leave the sequence behind, and the next ordinary insert would collide)."""
    from sqlalchemy import text

    for name in tables:
        conn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                f"(SELECT max(id) FROM {name}))"
            )
        )


class _GcTime:
    """CPU seconds spent in the cyclic garbage collector, by every thread of this process,
    and how many full collections it made (``gc.callbacks``; installed at import)."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.full = 0
        self._started = threading.local()
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started.at = time.thread_time()
            return
        self.cpu_s += time.thread_time() - getattr(self._started, "at", time.thread_time())
        self.full += info["generation"] == 2


GC_TIME = _GcTime()


@dataclass(frozen=True)
class Usage:
    """CPU seconds (user + system) of this process, of the calling thread alone, and the
    process's peak resident memory; CPU seconds in the garbage collector and its full
    collections so far."""

    cpu_s: float
    maxrss_mb: float
    thread_s: float = 0.0
    gc_s: float = 0.0
    gc_full: int = 0

    @classmethod
    def now(cls) -> Usage:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return cls(
            ru.ru_utime + ru.ru_stime,
            ru.ru_maxrss / 1024,
            time.thread_time(),
            GC_TIME.cpu_s,
            GC_TIME.full,
        )


def children_of(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may contain spaces
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def wait_for_no_children(pid: int, timeout_s: float = 30.0) -> None:
    """Wait until the process ``pid`` (an sshd) has no children left (sessions closed)."""
    deadline = time.monotonic() + timeout_s
    while children_of(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def own_cpu() -> float:
    """CPU seconds (user + system) of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the postmaster and its children (backends, background workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in [postmaster, *children_of(postmaster)]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks
