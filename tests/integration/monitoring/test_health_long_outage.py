"""An outage as long as a real one: health reads a fixed amount of it, on SQLite and
PostgreSQL.

A target of 50 minute-jobs down for a day has 72,000 connection errors since a run last
reached it. Health finds that last reach and the outage's start through two partial
indexes on the runs (migration 0023), each a seek, and counts the failed connections up to
``ATTEMPTS_COUNTED`` (the line then says "more than"). Here the limit is lowered so that a
few slots exceed it; the plans are checked on SQLite, with a control that shows the index is
not used when the status is a bound parameter. The fixture clock starts at 2026-03-02
09:00:30 UTC.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.health import failures as health_failures
from fleetcron.services.health import report as health
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run, Target
from integration.monitoring.test_health_by_cause import REFUSED, every_minute_on, record_slot
from sql_statements import statements_with_parameters

DOWN = ("connect_error", REFUSED, 0)
UP = ("succeeded", None, 0)


def outage_of(app: App, clock: FakeClock, slots: int) -> None:
    """Target ``pbx`` with jobs a and b, reached once, then ``slots`` slots of refusals."""
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    every_minute_on(app, "pbx", "a", "b")
    clock.advance(seconds=31)
    record_slot(app, clock, {"a": UP, "b": UP})
    for _ in range(slots):
        clock.advance(minutes=1)
        record_slot(app, clock, {"a": DOWN, "b": DOWN})


def test_failed_connections_past_the_limit_are_said_to_be_more(
    app: App, viewer: Actor, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health_failures, "ATTEMPTS_COUNTED", 3)
    outage_of(app, clock, slots=3)  # 6 failed connections
    started = clock.now - timedelta(minutes=2)

    [line] = health.summary(app, viewer).grouped

    assert (line.kind, line.since, line.failures) == ("unreachable", started, 3)
    assert line.detail.endswith("; more than 3 failed connection(s)")


def test_failed_connections_up_to_the_limit_are_counted_exactly(
    app: App, viewer: Actor, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: at the limit, the exact number."""
    monkeypatch.setattr(health_failures, "ATTEMPTS_COUNTED", 4)
    outage_of(app, clock, slots=2)  # 4 failed connections

    [line] = health.summary(app, viewer).grouped

    assert (line.kind, line.failures) == ("unreachable", 4)
    assert line.detail.endswith("; 4 failed connection(s)")


def test_a_target_never_reached_is_down_since_its_first_failed_connection(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    every_minute_on(app, "pbx", "a")
    clock.advance(seconds=31)
    first = clock.now
    record_slot(app, clock, {"a": DOWN})
    clock.advance(minutes=1)
    record_slot(app, clock, {"a": DOWN})

    [line] = health.summary(app, viewer).grouped

    assert (line.kind, line.since, line.failures) == ("unreachable", first, 2)


def plan_of(app: App, statement: str, parameters: object) -> list[str]:
    with app.db.engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)  # type: ignore[arg-type]
        return [str(row[3]) for row in rows]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_last_reach_and_the_outage_are_read_through_the_partial_indexes(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    outage_of(app, clock, slots=2)
    with statements_with_parameters(app) as seen:
        health.summary(app, viewer)

    lines = [line for s, p in seen if s.lstrip().startswith("WITH") for line in plan_of(app, s, p)]

    assert any("ix_runs_target_reached" in line for line in lines)
    assert any("ix_runs_target_connect_error" in line for line in lines)
    assert not any("ix_runs_target_started" in line for line in lines)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_negative_control_a_bound_status_cannot_use_the_partial_index(
    app: App, clock: FakeClock
) -> None:
    """Why health writes the statuses into its statements: with the same query bound, the
    planner cannot know the status matches the index's predicate."""
    outage_of(app, clock, slots=1)
    bound = (
        select(Run.started_at)
        .join(Target, Target.id == Run.target_id)
        .where(Target.name == "pbx", Run.status.in_(["succeeded", "failed", "timed_out"]))
        .order_by(Run.started_at.desc())
        .limit(1)
    )
    with statements_with_parameters(app) as seen, app.db.read() as session:
        session.execute(bound).all()

    [(statement, parameters)] = [(s, p) for s, p in seen if s.lstrip().startswith("SELECT")]
    assert not any("ix_runs_target_reached" in line for line in plan_of(app, statement, parameters))
