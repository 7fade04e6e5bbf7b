"""Health on a large fleet (SQLite and PostgreSQL): the work of one summary grows with the
failing assignments, not with the fleet. It used to probe every assignment's newest
finished run (3.5-7.4 s at 250,000 assignments and a million runs, docs/benchmarks.md);
now each assignment carries its newest finished run's status (``store/run_newest.py``) and
the failing ones come from the index on it.

"Work" is measured by the database itself, re-running the statements the summary issued:
on PostgreSQL the rows read from ``runs`` by every scan node (EXPLAIN ANALYZE, sequential
scans off as at the real size), on SQLite
the virtual-machine steps (a progress handler); the day's run counts, which read the day's
runs by design, are left out. No clock is read."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, insert

from fleetcron.app import Actor, App
from fleetcron.services.health import report as health
from fleetcron.store import run_newest
from fleetcron.store.schema import Assignment, Job, Run, Target
from sql_statements import statements_with_parameters

VIEWER = Actor("victor", "viewer")
_IDS = itertools.count(1)


def table(model: Any) -> Table:
    return cast(Table, model.__table__)


def add_fleet(app: App, job: str, n_targets: int, failing: set[int]) -> int:
    """``n_targets`` targets, one job on all of them, three finished runs per assignment;
    the assignments of the targets numbered in ``failing`` fail their newest two. Returns
    the job's id (target and assignment ``t`` have ``id + t``)."""
    now = app.now()
    base = next(_IDS) * 100_000
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(table(Target)),
            [
                {"id": base + t, "name": f"{job}-t{t:04d}", "kind": "local", "paired": True}
                | {"labels": {}, "notes": "", "created_at": now, "updated_at": now}
                for t in range(n_targets)
            ],
        )
        conn.execute(
            insert(table(Job)),
            {"id": base, "name": job, "origin": "bulk", "schedule": "* * * * *"}
            | {"timezone": "UTC", "command": "true", "selector": {}, "timeout_s": 60}
            | {"created_by": "t", "updated_by": "t", "created_at": now, "updated_at": now},
        )
        conn.execute(
            insert(table(Assignment)),
            [
                {"id": base + t, "job_id": base, "target_id": base + t, "enabled": True}
                | {"next_fire_at": now + timedelta(minutes=1)}
                | {"created_at": now, "updated_at": now}
                for t in range(n_targets)
            ],
        )
        runs = []
        for t in range(n_targets):
            for k in range(3):
                slot = now - timedelta(minutes=3 - k)
                bad = t in failing and k > 0
                runs.append(
                    {"assignment_id": base + t, "job_id": base, "target_id": base + t}
                    | {"job_name": job, "target_name": f"{job}-t{t:04d}", "origin": "bulk"}
                    | {"command": "true", "scheduled_for": slot, "trigger": "schedule"}
                    | {"attempt": 1, "status": "failed" if bad else "succeeded"}
                    | {"exit_code": 1 if bad else 0, "started_at": slot}
                    | {"finished_at": slot + timedelta(seconds=1), "node": "t"}
                    | {"actor": "system", "created_at": slot}
                )
        conn.execute(insert(table(Run)), runs)
    refresh_assignments(app, [base + t for t in range(n_targets)])
    return base


def refresh_assignments(app: App, ids: list[int]) -> None:
    """The newest-run columns of assignments whose runs were inserted here in bulk (the
    run store keeps them with its own writes)."""
    with app.db.session() as session:
        run_newest.refresh(session, ids)


def database_work(app: App, call: Callable[[], object]) -> int:
    """What the statements ``call`` issues cost the database (see the module docstring)."""
    with statements_with_parameters(app) as issued:
        call()
    queries = [
        (s, p)
        for s, p in issued
        if s.lstrip().upper().startswith(("SELECT", "WITH")) and not is_day_count(s)
    ]
    assert queries
    raw = app.db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if app.db.dialect == "postgresql":
            # A table this small is cheaper to scan whole; at the real size the planner
            # reads the indexes, and so does this measure.
            cursor.execute("ANALYZE runs")
            cursor.execute("SET LOCAL enable_seqscan = off")
            total = 0
            for statement, parameters in queries:
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
                fetched = cursor.fetchone()
                assert fetched is not None
                plan = fetched[0]
                plan = json.loads(plan) if isinstance(plan, str) else plan
                total += _runs_rows(plan[0]["Plan"])
            raw.rollback()
            return total
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        raw.driver_connection.set_progress_handler(count, 10)  # type: ignore[union-attr]
        try:
            for statement, parameters in queries:
                cursor.execute(statement, parameters).fetchall()
        finally:
            raw.driver_connection.set_progress_handler(None, 0)  # type: ignore[union-attr]
        return steps[0]
    finally:
        raw.close()


def is_day_count(statement: str) -> bool:
    """The summary's runs of the last 24 hours by status: a count that reads the day's
    runs (through the status index) by design, left out of the measure."""
    return "GROUP BY runs.status" in statement


def _runs_rows(node: dict[str, Any]) -> int:
    """Rows the scan nodes of ``runs`` produced (and removed by their filter), all loops."""
    own = 0
    if node.get("Relation Name") == "runs":
        own = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
    return own + sum(_runs_rows(child) for child in node.get("Plans", []))


def test_a_summary_costs_the_same_however_many_healthy_assignments_there_are(
    app: App,
) -> None:
    add_fleet(app, "small", 20, failing={3, 7})
    small = health.summary(app, VIEWER)
    assert {(p.job, p.target, p.failures) for p in small.problems} == {
        ("small", "small-t0003", 2),
        ("small", "small-t0007", 2),
    }
    small_work = database_work(app, lambda: health.summary(app, VIEWER))
    add_fleet(app, "large", 400, failing=set())  # 400 healthy assignments more, 1,200 runs
    large = health.summary(app, VIEWER)
    assert [(p.job, p.target) for p in large.problems] == [
        (p.job, p.target) for p in small.problems
    ]
    large_work = database_work(app, lambda: health.summary(app, VIEWER))
    assert large_work < small_work * 1.5, (small_work, large_work)
    # Negative control: the same measure does grow with the assignments when every one is
    # probed (the job page's per-assignment health reads each assignment's runs): twenty
    # times the assignments, several times the work.
    per_small = database_work(app, lambda: health.assignment_health(app, VIEWER, "small"))
    per_large = database_work(app, lambda: health.assignment_health(app, VIEWER, "large"))
    assert per_large > per_small * 3, (per_small, per_large)


def test_an_assignment_whose_newest_run_succeeded_is_not_failing(app: App) -> None:
    """The candidates are the assignments with any failed run; the newest run decides."""
    base = add_fleet(app, "mixed", 5, failing={1, 2})
    slot = app.now()
    with app.db.engine.begin() as conn:  # t0001 recovers: a success after its failures
        conn.execute(
            insert(table(Run)),
            {"assignment_id": base + 1, "job_id": base, "target_id": base + 1}
            | {"job_name": "mixed", "target_name": "mixed-t0001", "origin": "bulk"}
            | {"command": "true", "scheduled_for": slot, "trigger": "schedule", "attempt": 1}
            | {"status": "succeeded", "exit_code": 0, "started_at": slot}
            | {"finished_at": slot + timedelta(seconds=1), "node": "t", "actor": "system"}
            | {"created_at": slot},
        )
    refresh_assignments(app, [base + 1])
    result = health.summary(app, VIEWER)
    assert [(p.target, p.failures) for p in result.problems] == [("mixed-t0002", 2)]
