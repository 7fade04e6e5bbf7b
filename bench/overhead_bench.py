"""Scheduler overhead: 1,000 local runs of ``true`` due in the same minute.

1,000 local targets and one bulk job ``* * * * *`` running ``true`` (or, with
``--individual``, 1,000 individual jobs, one per target): 1,000 assignments due at minute
M. A real :class:`~fleetcron.scheduler.service.Scheduler` built as ``fleetcron serve``
builds a standalone one (housekeeping, Prometheus metrics), with the product's settings
(local concurrency 64, claim batch 500), on a database in a temporary directory; log lines
at INFO formatted as ``fleetcron serve`` does but written to /dev/null.

Two ways to reach the minute:

* ``--mode tick`` (default): the scheduler's clock is the real clock shifted to read
  M + 0 s at the moment ``tick()`` is called; it then runs at real speed, so every
  timestamp recorded is a real duration after M. Measures the scheduler alone.
* ``--mode serve``: the real clock and the real ``serve()`` loop (tick every 1 s), the
  job created just before the next wall-clock minute. Adds the loop's tick phase (0 to
  1 s after the minute) to every number.

Reported per database: the time from M until the last of the 1,000 runs is recorded
(``Scheduler.idle()`` returned and every run has ``finished_at``), the first tick's
duration, and the dispatch lateness of each run (its recorded ``started_at`` minus its
``scheduled_for``) at p50, p99 and max. Client CPU is this process's user+sys time over
the same span; children CPU is the ``true`` processes and their shells, with the CPU of
the local executor's group watchdog (a detached process, read from ``/proc/<pid>/stat``)
added and also shown alone.

Experiments (not the product's behaviour, to size possible fixes): ``--cache-passwd``
makes the local executor's ``pwd.getpwuid`` lookup (once per run) a cached one.

Run by hand: ``.venv/bin/python bench/overhead_bench.py [--backends sqlite,postgresql]
[--mode tick|serve] [--individual] [--runs 1000] [--repeat 3]
[--cache-passwd] [--executor local|fake]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import func, insert, select

import fleetcron.executors.local
from _common import (
    ShiftedClock,
    core_table,
    job_row,
    loadavg,
    make_app,
    percentile,
    production_scheduler,
    quiet_production_logging,
    running_postgres,
    table,
    work_dir,
)
from fleetcron.app import SYSTEM, App
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.store.schema import Assignment, Job, Run, Target


def install_experiments(args: argparse.Namespace) -> list[str]:
    """Bench-only changes that size a possible fix; returns their names for the output."""
    names = []
    if args.cache_passwd:
        import pwd

        class CachedPwd:
            getpwuid = staticmethod(functools.cache(pwd.getpwuid))

        # the module's own reference to pwd, so only the local executor sees the cache
        setattr(fleetcron.executors.local, "pwd", CachedPwd)  # noqa: B010
        names.append("cached getpwuid")
    return names


def add_targets(app: App, n: int, now: datetime) -> None:
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(core_table(Target)),
            [
                {
                    "name": f"box{i:04d}",
                    "kind": "local",
                    "labels": {"role": "bench"},
                    "notes": "",
                    "paired": True,
                    "paired_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(n)
            ],
        )


def add_jobs(app: App, n: int, now: datetime, individual: bool) -> None:
    """One bulk job over every target, or one individual job per target."""
    if not individual:
        jobs.add_job(app, SYSTEM, "everywhere", JobSpec("* * * * *", "true"), bulk=True)
        return
    nxt = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    with app.db.engine.begin() as conn:
        ids = list(conn.execute(select(Target.id).order_by(Target.id)).scalars())
        conn.execute(
            insert(core_table(Job)),
            [
                job_row(
                    now,
                    name=f"job{i:04d}",
                    origin="individual",
                    schedule="* * * * *",
                    timezone="UTC",
                    command="true",
                    target_id=tid,
                )
                for i, tid in enumerate(ids)
            ],
        )
        job_ids = list(conn.execute(select(Job.id).order_by(Job.id)).scalars())
        conn.execute(
            insert(core_table(Assignment)),
            [
                {
                    "job_id": jid,
                    "target_id": tid,
                    "enabled": True,
                    "next_fire_at": nxt,
                    "created_at": now,
                    "updated_at": now,
                }
                for jid, tid in zip(job_ids, ids, strict=True)
            ],
        )


async def bare_asyncio(n: int, cap: int = 64, script: str = "true") -> dict[str, Any]:
    """The floor: spawn the same n ``/bin/sh -c true`` with asyncio under the same cap, with
    pipes for stdout/stderr and a new session each, as the local executor does; no
    scheduler, no database, no logging. "Lateness" is each spawn's start after t0.
    ``script``: another ``sh -c`` script than ``true``."""
    slots = asyncio.Semaphore(cap)
    t0 = time.monotonic()

    async def one() -> float:
        async with slots:
            started = time.monotonic() - t0
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                script,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            await proc.communicate()
            if proc.returncode != 0:
                raise SystemExit("bare spawn failed")
            return started

    cpu0 = cpu()
    t = time.perf_counter()
    lateness = await asyncio.gather(*(one() for _ in range(n)))
    total_s = time.perf_counter() - t
    cpu1 = cpu()
    return {
        "total_s": total_s,
        "tick_s": None,
        "cpu_s": cpu1[0] - cpu0[0],
        "children_cpu_s": cpu1[1] - cpu0[1],
        "lateness": list(lateness),
        "finished": n,
        "succeeded": n,
    }


def recorded(app: App, minute: datetime) -> dict[str, Any]:
    with app.db.read() as session:
        rows = session.execute(
            select(Run.status, Run.started_at, Run.finished_at, Run.scheduled_for).where(
                Run.scheduled_for == minute
            )
        ).all()
        assert session.scalar(select(func.count()).select_from(Run)) == len(rows)
    lateness = [(r.started_at - r.scheduled_for).total_seconds() for r in rows]
    return {
        "runs": len(rows),
        "finished": sum(r.finished_at is not None for r in rows),
        "succeeded": sum(r.status == "succeeded" for r in rows),
        "lateness": lateness,
        "last_finish": max((r.finished_at - minute).total_seconds() for r in rows),
    }


def cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def watchdog_cpu(scheduler: Scheduler) -> float:
    """User+sys CPU of the local executor's group watchdog so far (it is started by the
    first local run and detached, so ``RUSAGE_CHILDREN`` never counts it; the process
    that launched it is counted there); 0 for a tree without one."""
    local = (scheduler.executors or {}).get("local")
    pid = getattr(getattr(getattr(local, "executor", None), "group_watch", None), "pid", None)
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def the_scheduler(app: App, executor: str) -> Scheduler:
    """The production scheduler; with ``executor == "fake"`` its local targets run nothing
    (:class:`~fleetcron.executors.fake.FakeExecutor`, exit 0 at once, the same cap of 64),
    so what is measured is the dispatch path alone: claim, task, request, log lines,
    recording."""
    scheduler: Scheduler = production_scheduler(app)
    if executor == "fake":
        from fleetcron.executors.fake import FakeExecutor

        assert scheduler.executors is not None
        scheduler.executors = {**scheduler.executors, "local": FakeExecutor(concurrency=64)}
    return scheduler


async def run_tick_mode(
    app: App, clock: ShiftedClock, minute: datetime, executor: str = "local"
) -> dict[str, Any]:
    scheduler = the_scheduler(app, executor)
    await scheduler.start()
    assert scheduler.maintenance is not None
    await scheduler._in_db(scheduler.maintenance)  # its first round, as serve() would have
    cpu0 = cpu()
    clock.restart(minute)
    t0 = time.perf_counter()
    stats = await scheduler.tick()
    tick_s = time.perf_counter() - t0
    await scheduler.idle()
    total_s = time.perf_counter() - t0
    cpu1 = cpu()
    watchdog_s = watchdog_cpu(scheduler)
    await scheduler.shutdown()
    return {
        "total_s": total_s,
        "tick_s": tick_s,
        "dispatched": stats.dispatched,
        "cpu_s": cpu1[0] - cpu0[0],
        "children_cpu_s": cpu1[1] - cpu0[1] + watchdog_s,
        "watchdog_cpu_s": watchdog_s,
    }


async def run_serve_mode(app: App, minute: datetime) -> dict[str, Any]:
    scheduler: Scheduler = production_scheduler(app)
    stop = asyncio.Event()
    serving = asyncio.create_task(scheduler.serve(stop))
    # CPU from 0.3 s before the minute (an idle loop costs next to nothing), then the first
    # tick after the minute claims everything; wait for it, then for the runs
    await asyncio.sleep(max(0.0, (minute - datetime.now(UTC)).total_seconds() - 0.3))
    cpu0 = cpu()
    while scheduler.last_tick is None or scheduler.last_tick < minute:
        await asyncio.sleep(0.01)
    first_tick = scheduler.last_tick
    await scheduler.idle()
    total_s = (datetime.now(UTC) - minute).total_seconds()
    cpu1 = cpu()
    stop.set()
    await serving
    return {
        "total_s": total_s,
        "tick_s": (first_tick - minute).total_seconds(),  # tick phase: when it looked
        "dispatched": None,
        "cpu_s": cpu1[0] - cpu0[0],
        "children_cpu_s": cpu1[1] - cpu0[1],
    }


async def measure(url: str, data_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    if args.mode == "tick":
        minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        clock = ShiftedClock(minute - timedelta(seconds=30))
        app = make_app(url, data_dir, clock=clock)
    else:
        app = make_app(url, data_dir, clock=lambda: datetime.now(UTC))
        # leave at least 5 s to create the job before the minute it fires in
        while datetime.now(UTC).second >= 55:
            await asyncio.sleep(0.5)
        minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    try:
        setup_at = app.now()
        add_targets(app, args.runs, setup_at)
        add_jobs(app, args.runs, setup_at, args.individual)
        if args.mode == "tick":
            result = await run_tick_mode(app, clock, minute, args.executor)
        else:
            result = await run_serve_mode(app, minute)
        result.update(recorded(app, minute))
        return result
    finally:
        app.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--mode", choices=("tick", "serve"), default="tick")
    parser.add_argument("--individual", action="store_true", help="1 job per target")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1, help="fresh database each time")
    parser.add_argument("--cache-passwd", action="store_true")
    parser.add_argument(
        "--executor",
        choices=("local", "fake"),
        default="local",
        help="fake: run nothing, measure the dispatch path alone (tick mode; no bare row)",
    )
    args = parser.parse_args()
    quiet_production_logging()
    experiments = install_experiments(args)
    print(f"load average at start: {loadavg()}")
    design = "individual jobs" if args.individual else "one bulk job"
    print(f"{args.runs} local runs of `true` ({design}), mode={args.mode}")
    if experiments:
        print(f"EXPERIMENT (not the product as shipped): {', '.join(experiments)}")
    rows: list[list[object]] = []
    work = work_dir("fleetcron-overhead-bench-")
    backends = args.backends.split(",")
    async with contextlib.AsyncExitStack() as stack:
        server = stack.enter_context(running_postgres()) if "postgresql" in backends else None
        extra = [] if args.executor == "fake" else ["bare"]
        runs = [(b, i) for i in range(args.repeat) for b in [*backends, *extra]]
        for backend, i in runs:
            where = f"{backend}{i}"
            if backend == "bare":
                r = await bare_asyncio(args.runs)
            elif backend == "sqlite":
                url = f"sqlite:///{work / where / 'fleetcron.db'}"
            elif server is None:
                print("PostgreSQL binaries not found: skipping PostgreSQL")
                continue
            else:
                url = server.create_database(f"overhead{i}")  # type: ignore[attr-defined]
            if backend != "bare":
                r = await measure(url, work / where, args)
            if r["finished"] != args.runs or r["succeeded"] != args.runs:
                raise SystemExit(f"{backend}: {r['finished']} finished, {r['succeeded']} ok")
            lateness = r["lateness"]
            rows.append(
                [
                    "bare asyncio (no scheduler)" if backend == "bare" else f"fleetcron, {backend}",
                    i + 1,
                    f"{r['total_s']:.2f}",
                    "-" if r["tick_s"] is None else f"{r['tick_s'] * 1000:.0f}",
                    f"{percentile(lateness, 50):.3f}",
                    f"{percentile(lateness, 99):.3f}",
                    f"{max(lateness):.3f}",
                    f"{r['cpu_s']:.2f}",
                    f"{r['cpu_s'] / args.runs * 1000:.2f}",
                    f"{r['children_cpu_s']:.2f}",
                    f"{r['children_cpu_s'] / args.runs * 1000:.2f}",
                    "-" if "watchdog_cpu_s" not in r else f"{r['watchdog_cpu_s'] * 1000:.0f}",
                ]
            )
            print(f"  {backend} #{i + 1}: {r['total_s']:.2f} s", flush=True)
    print()
    tick_label = "first tick ms" if args.mode == "tick" else "tick phase ms"
    print(
        table(
            [
                "design",
                "#",
                "minute to all recorded s",
                tick_label,
                "lateness p50 s",
                "lateness p99 s",
                "lateness max s",
                "scheduler CPU s",
                "CPU ms / run",
                "children CPU s",
                "children CPU ms / run",
                "of which watchdog ms",
            ],
            rows,
        )
    )
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    asyncio.run(main())
