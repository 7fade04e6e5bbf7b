"""The job page's reads go through each assignment's runs by the (assignment, slot,
attempt) index, whatever other indexes the runs table has.

The adversary: an index that starts with the status (as a search index might), on a
database without statistics (as most are). Given a bare ``status = 'failed'`` term,
SQLite's planner takes that index for "the newest failure of this assignment" and walks
every failed run of the table. The job page compares the status of the failures as an
expression no index serves, and finds the newest success through the partial index of the
successes (migration 0024), whose predicate it repeats. The negative control shows the
check sees the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import text

from fleetcron.app import Actor, App
from fleetcron.services.fleet import grid as fleet_grid
from fleetcron.services.fleet import job_page as job_fleet
from fleetcron.services.fleet.job_page import TargetQuery
from fleetcron.services.health import assignments as job_health
from fleetcron.services.health import report as health
from fleetcron.services.jobs import slots as job_slots
from integration.web.test_job_fleet import (
    JOB,
    history,
    postgres_history,
    postgres_source,
    sqlite_history,
    sqlite_source,
)
from sql_statements import statements_with_parameters

__all__ = [  # the fixtures, used by name
    "history",
    "postgres_history",
    "postgres_source",
    "sqlite_history",
    "sqlite_source",
]

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
ADVERSARY = "ix_test_status_first"


@pytest.fixture
def status_first_index(app: App, history: list[datetime]) -> Iterator[None]:
    """The index, created after statistics that describe a large fleet (500,000 runs, 100
    per assignment) were gathered, so the planner knows nothing of it: the situation of a
    database analyzed once and upgraded since."""
    with app.db.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
        conn.execute(text("DELETE FROM sqlite_stat1 WHERE tbl = 'runs'"))
        conn.execute(
            text(
                "INSERT INTO sqlite_stat1 VALUES ('runs', 'sqlite_autoindex_runs_1', "
                "'500000 100 1 1'), ('runs', NULL, '500000')"
            )
        )
        conn.execute(text(f"CREATE INDEX {ADVERSARY} ON runs (status, scheduled_for, id)"))
        conn.execute(text("ANALYZE sqlite_schema"))  # the planner rereads the statistics
    yield


def plans_of(app: App, read: Callable[[], object]) -> list[str]:
    """The query plan lines of every statement ``read()`` issues."""
    with statements_with_parameters(app) as statements:
        read()
    lines = []
    with app.db.engine.connect() as conn:
        for statement, parameters in statements:
            if statement.lstrip().upper().startswith(("SELECT", "WITH")):
                plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
                lines += [str(row[3]) for row in plan]
    return lines


def test_the_targets_view_never_walks_the_runs_by_status(
    app: App, viewer: Actor, history: list[datetime], status_first_index: None
) -> None:
    def read() -> None:
        job_fleet.job_targets(app, viewer, JOB)
        job_fleet.job_targets(app, viewer, JOB, TargetQuery(sort="streak", statuses=["failed"]))
        job_slots.job_slots(app, viewer, JOB)
        fleet_grid.job_counts(app, viewer)

    lines = plans_of(app, read)

    assert any("sqlite_autoindex_runs_1" in line for line in lines)  # the slot index is used
    assert [line for line in lines if "(status=" in line] == []


def plan_tree(app: App, statement: str, parameters: Any) -> list[tuple[str, list[str]]]:
    """Each line of the statement's plan with the lines it sits under, innermost first."""
    with app.db.engine.connect() as conn:
        rows = list(conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
    detail = {row[0]: str(row[3]) for row in rows}
    parent = {row[0]: row[1] for row in rows}
    out = []
    for node, line in detail.items():
        above, at = [], parent[node]
        while at in detail:
            above.append(detail[at])
            at = parent[at]
        out.append((line, above))
    return out


def test_every_failure_streak_is_a_seek_from_the_newest_success(
    app: App, viewer: Actor, history: list[datetime], status_first_index: None
) -> None:
    """The job page, a job's health and the health summary read the failure streak (the
    failures since the newest success) through one function, whose runs are aliased
    ``ok_run`` (the newest success) and ``streak_run`` (the failures). In each statement
    the newest success is looked up once per assignment, in a materialized CTE (not again
    for every run the streak counts), as a seek of the partial index of the successes (not
    a walk back over the streak), the failures are a seek of the slot index from it (not
    the whole history), and nothing walks the adversary index."""
    with statements_with_parameters(app) as seen:
        job_health.assignment_health(app, viewer, JOB)
        health.summary(app, viewer, detail=True)
        job_fleet.job_targets(app, viewer, JOB, TargetQuery(statuses=["failed"]))
    streak_reads = [(s, p) for s, p in seen if "streak_run" in s and "ok_run" in s]
    plans = [plan_tree(app, s, p) for s, p in streak_reads]
    lines = [line for plan in plans for line, _ in plan]
    success_lookups = [above for plan in plans for line, above in plan if " ok_run " in line]
    streak_seeks = [line for line in lines if " streak_run " in line]

    assert len(streak_reads) == 3  # one statement each
    assert len(success_lookups) >= 3
    assert all(any(a.startswith("MATERIALIZE") for a in above) for above in success_lookups)
    ok_lines = [line for line in lines if " ok_run " in line]
    assert all("ix_runs_assignment_succeeded" in line for line in ok_lines), ok_lines
    assert streak_seeks and all("scheduled_for>" in line for line in streak_seeks), streak_seeks
    assert [line for line in lines if ADVERSARY in line] == []


def test_negative_control_a_bare_status_term_takes_the_status_index(
    app: App, history: list[datetime], status_first_index: None
) -> None:
    bare = (
        "SELECT (SELECT runs.scheduled_for FROM runs WHERE runs.assignment_id = assignments.id"
        " AND runs.status = 'failed' ORDER BY runs.scheduled_for DESC, runs.attempt DESC"
        " LIMIT 1) FROM assignments"
    )

    def read() -> None:
        with app.db.engine.connect() as conn:
            conn.execute(text(bare)).all()

    lines = plans_of(app, read)
    assert any("(status=" in line for line in lines), lines
