"""Cost of a project's health (the dashboard's) beside the whole install's.

The fleet of ``health_bench.py`` (``--targets`` local targets with ``--jobs`` individual
jobs each and ``--runs`` runs per assignment, all within the day; one target in a hundred
unreachable, one assignment in a hundred failing), split in two projects: the jobs of every
other target, and those targets, move to project ``team2``. Timed, in CPU seconds of this
process (user + system; SQLite runs in it, so that is all the work; the machine is shared,
so no wall time), the median of ``--calls``:

- the day's runs by status of the whole install, from the per-minute counts
  (``store/run_counts.counts_since``: what the dashboard read before);
- the day's runs of one project, counted from its jobs' runs (``services/health/scope.py``
  ``day_counts``: ``ix_runs_job_slot`` read from the index alone);
- one whole ``health.summary`` of the install and of one project.

Run by hand: ``.venv/bin/python bench/health_project_bench.py [--targets 1000] [--jobs 10]
[--runs 5] [--calls 9]`` (SQLite).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import func, insert, select, update

from _common import core_table, databases, loadavg, make_app, median, own_cpu, table
from fleetcron.app import Actor, App
from fleetcron.services.health import report as health
from fleetcron.services.health.scope import Scope, day_counts
from fleetcron.store import run_counts
from fleetcron.store.schema import Job, Project, Run, Target
from health_bench import START, fill

ADMIN = Actor("bench", "admin")


def split(app: App) -> int:
    """Move every other target and its jobs into a new project; its id."""
    with app.db.session() as session:
        pid = session.execute(
            insert(core_table(Project))
            .values(name="team2", description="", created_by="bench", created_at=START)
            .returning(core_table(Project).c.id)
        ).scalar_one()
        session.execute(update(Target).where(Target.id % 2 == 0).values(project_id=pid))
        session.execute(update(Job).where(Job.target_id % 2 == 0).values(project_id=pid))
    return int(pid)


def cpu_of(call: Callable[[], object], calls: int) -> float:
    """The median CPU seconds of ``calls`` calls (one first, untimed: caches warm)."""
    call()
    spent = []
    for _ in range(calls):
        before = own_cpu()
        call()
        spent.append(own_cpu() - before)
    return median(spent)


def measure(app: App, pid: int, calls: int) -> list[tuple[str, str, str]]:
    since = START - timedelta(hours=1)

    def counted(scope: Scope | None) -> Callable[[], dict[str, int]]:
        def read() -> dict[str, int]:
            with app.db.read() as session:
                if scope is None:
                    return run_counts.counts_since(session, since)
                return day_counts(session, since, scope)

        return read

    with app.db.read() as session:
        runs = session.scalar(select(func.count(Run.id))) or 0
        own = (
            session.scalar(
                select(func.count(Run.id)).where(
                    Run.job_id.in_(select(Job.id).where(Job.project_id == pid))
                )
            )
            or 0
        )
    rows = [
        ("day's runs, install (run_counts)", counted(None), runs),
        ("day's runs, one project (runs of its jobs)", counted(Scope(pid)), own),
        ("summary, install", lambda: health.summary(app, ADMIN), runs),
        ("summary, one project", lambda: health.summary(app, ADMIN, project="team2"), own),
    ]
    return [(what, f"{n:,}", f"{cpu_of(call, calls) * 1000:.1f} ms") for what, call, n in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=9)
    args = parser.parse_args()
    print(f"load average before: {loadavg()}")
    for _backend, url, directory in databases("sqlite", "health-project-bench"):
        app = make_app(url, directory, clock=lambda: START + timedelta(hours=1))
        fill(app, args.targets, args.jobs, args.runs)
        pid = split(app)
        rows = measure(app, pid, args.calls)
        app.close()
        print(table(["what (SQLite)", "runs counted", "CPU per call (median)"], rows))
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
