"""Retention in bounded rounds (SQLite and PostgreSQL): each chunk of ``prune_batch`` rows
is its own transaction, a round with a time budget stops between chunks once it is spent
and the next round continues, until every old row is gone; runs inside the limits and
runs still active are never touched; a round with nothing to delete does not rank every
run. Time comes from an injected counter, never from the wall clock."""

from __future__ import annotations

import itertools
from datetime import timedelta

from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.scheduler.housekeeping import PRUNE_BUDGET_S, Housekeeping
from fleetcron.services.runs import retention
from fleetcron.store.schema import Run
from sql_statements import statements

ADMIN = Actor("admin", "admin")
_SLOTS = itertools.count()


class Ticks:
    """A monotonic clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def add_runs(
    app: App, assignment_id: int, n: int, *, days_ago: float, status: str = "succeeded"
) -> list[int]:
    """``n`` runs of one assignment, a minute apart, the newest ``days_ago`` days old."""
    newest = app.now() - timedelta(days=days_ago)
    rows = []
    for k in range(n):
        slot = newest - timedelta(minutes=n - k, seconds=next(_SLOTS) % 60)
        done = status not in ("queued", "running")
        rows.append(
            {"assignment_id": assignment_id, "job_id": 1, "target_id": 1}
            | {"job_name": "often", "target_name": "box", "origin": "individual"}
            | {"command": "true", "scheduled_for": slot, "trigger": "schedule", "attempt": 1}
            | {"status": status, "exit_code": 0 if done else None, "started_at": slot}
            | {"finished_at": slot + timedelta(seconds=1) if done else None}
            | {"node": "t", "actor": "system", "created_at": slot}
        )
    with app.db.engine.begin() as conn:
        result = conn.execute(
            insert(Run.__table__).returning(Run.__table__.c.id),  # type: ignore[arg-type]
            rows,
        )
        return [int(i) for i in result.scalars()]


def run_ids(app: App) -> set[int]:
    with app.db.read() as session:
        return set(session.scalars(select(Run.id)))


def settings(app: App, **values: int) -> None:
    for name, value in values.items():
        object.__setattr__(app.settings, name, value)


def test_budgeted_rounds_delete_every_old_run_and_nothing_else(app: App) -> None:
    settings(app, prune_batch=5)
    old = add_runs(app, 1, 23, days_ago=app.settings.retention_days + 1)
    recent = add_runs(app, 1, 5, days_ago=1)
    still_running = add_runs(app, 2, 1, days_ago=app.settings.retention_days + 1, status="running")
    rounds = []
    for _ in range(10):
        # 1 s a read: the round starts at t; its first chunk always runs, the next ones
        # ask at t+1 and t+2, and t+3 is past its 2.5 s budget: three chunks a round.
        result = retention.prune(app, ADMIN, budget_s=2.5, clock=Ticks(1.0))
        rounds.append((result.runs_by_age, result.complete))
        if result.complete:
            break
    assert rounds == [(15, False), (8, True)]
    assert run_ids(app) == {*recent, *still_running}
    assert not set(old) & run_ids(app)
    # Another round finds nothing and says so.
    idle = retention.prune(app, ADMIN, budget_s=2.5, clock=Ticks(1.0))
    assert (idle.total, idle.complete) == (0, True)


def test_without_a_budget_one_round_deletes_everything(app: App) -> None:
    """Negative control: the rounds above stopped because of their budget."""
    settings(app, prune_batch=5)
    add_runs(app, 1, 23, days_ago=app.settings.retention_days + 1)
    result = retention.prune(app, ADMIN)
    assert (result.runs_by_age, result.complete) == (23, True)


def test_the_per_assignment_cap_is_applied_in_budgeted_rounds(app: App) -> None:
    settings(app, prune_batch=3, retention_max_runs=4)
    crowded = add_runs(app, 1, 12, days_ago=1)  # oldest first
    other = add_runs(app, 2, 4, days_ago=1)  # at the cap: untouched
    counts = []
    for _ in range(10):
        result = retention.prune(app, ADMIN, budget_s=2.5, clock=Ticks(1.0))
        counts.append((result.runs_by_count, result.complete))
        if result.complete:
            break
    # The count pass asks the budget before its probe (t+1), then before its second chunk
    # (t+2); at t+3 the round is over: two chunks a round.
    assert counts == [(6, False), (2, True)]
    assert run_ids(app) == {*crowded[-4:], *other}


def test_a_round_with_nothing_to_delete_does_not_rank_the_runs(app: App) -> None:
    settings(app, retention_max_runs=5)
    add_runs(app, 1, 5, days_ago=1)
    add_runs(app, 2, 3, days_ago=1)
    with statements(app) as idle:
        assert retention.prune(app, ADMIN).total == 0
    assert not any("row_number" in s for s in idle), idle
    add_runs(app, 3, 40, days_ago=1)  # 35 beyond the cap
    with statements(app) as busy:
        assert retention.prune(app, ADMIN).runs_by_count == 35
    # Negative control: with runs beyond the cap, the ranking statement does run.
    assert any("row_number" in s for s in busy), busy


def test_housekeeping_continues_an_unfinished_round_at_its_next_call(app: App) -> None:
    settings(app, prune_batch=4)
    add_runs(app, 1, 19, days_ago=app.settings.retention_days + 1)
    kept = add_runs(app, 1, 3, days_ago=1)
    step = PRUNE_BUDGET_S / 2.5  # a round asks twice within its budget: three chunks
    housekeeping = Housekeeping(app, clock=Ticks(step))
    left = []
    for _ in range(4):
        housekeeping()
        left.append(len(run_ids(app)) - len(kept))
    # 12 rows a call until none is left; then retention waits for its hourly interval.
    assert left == [7, 0, 0, 0]
    assert run_ids(app) == set(kept)
    add_runs(app, 1, 2, days_ago=app.settings.retention_days + 2)
    housekeeping()
    assert len(run_ids(app)) == len(kept) + 2  # not due again within the hour
