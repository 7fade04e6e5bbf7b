"""Audit retention in the same budgeted rounds as the runs' (SQLite and PostgreSQL): each
chunk of ``prune_batch`` events is its own transaction, a round with a time budget stops
between chunks once it is spent and the next round continues, until every event older
than ``audit_retention_days`` is gone; nothing inside the window is touched. Before, the
audit pass deleted its whole backlog in one round, whatever the budget. Time comes from an
injected counter, never from the wall clock."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.services.runs import retention
from fleetcron.store.schema import AuditEvent
from integration.monitoring.test_retention_rounds import Ticks, settings

ADMIN = Actor("admin", "admin")
RETENTION_DAYS = 30


def add_events(app: App, n: int, *, days_ago: float) -> set[int]:
    """``n`` audit events, a second apart, the newest ``days_ago`` days old."""
    newest = app.now() - timedelta(days=days_ago)
    rows = [
        {
            "at": newest - timedelta(seconds=k),
            "actor": "olivia",
            "action": "job.edit",
            "success": True,
            "detail": {"k": k},
        }
        for k in range(n)
    ]
    with app.db.engine.begin() as conn:
        result = conn.execute(
            insert(AuditEvent.__table__).returning(AuditEvent.__table__.c.id),  # type: ignore[arg-type]
            rows,
        )
        return {int(i) for i in result.scalars()}


def event_ids(app: App) -> set[int]:
    with app.db.read() as session:
        return set(session.scalars(select(AuditEvent.id)))


def test_a_big_backlog_is_pruned_over_several_rounds_and_the_window_is_kept(app: App) -> None:
    settings(app, prune_batch=100, audit_retention_days=RETENTION_DAYS)
    seeded = event_ids(app)  # the test users' (recorded now)
    old = add_events(app, 1230, days_ago=RETENTION_DAYS + 1)
    inside = add_events(app, 40, days_ago=RETENTION_DAYS - 0.5)
    recent = add_events(app, 5, days_ago=1)
    rounds = []
    for _ in range(20):
        # 1 s a read: the round starts at t (deadline t+2.5); the runs' passes find nothing
        # (the count pass asks at t+1), the audit pass's first chunk always runs and its
        # second asks at t+2; at t+3 the round is over: two chunks of 100 a round.
        result = retention.prune(app, ADMIN, budget_s=2.5, clock=Ticks(1.0))
        rounds.append((result.audit_events, result.complete))
        if result.complete:
            break

    assert rounds == [(200, False)] * 6 + [(30, True)]
    left = event_ids(app)
    assert not old & left
    assert inside | recent | seeded <= left
    # What is left besides them: one retention.prune note per round.
    assert len(left - inside - recent - seeded) == len(rounds)
    idle = retention.prune(app, ADMIN, budget_s=2.5, clock=Ticks(1.0))
    assert (idle.audit_events, idle.complete) == (0, True)


def test_without_a_budget_one_round_prunes_the_whole_backlog(app: App) -> None:
    """Negative control: the rounds above stopped because of their budget."""
    settings(app, prune_batch=100, audit_retention_days=RETENTION_DAYS)
    old = add_events(app, 1230, days_ago=RETENTION_DAYS + 1)
    inside = add_events(app, 40, days_ago=RETENTION_DAYS - 0.5)

    result = retention.prune(app, ADMIN)

    assert (result.audit_events, result.complete) == (1230, True)
    assert not old & event_ids(app) and inside <= event_ids(app)


def test_a_dry_run_counts_the_backlog_and_deletes_nothing(app: App) -> None:
    settings(app, prune_batch=100, audit_retention_days=RETENTION_DAYS)
    add_events(app, 250, days_ago=RETENTION_DAYS + 1)
    before = event_ids(app)

    result = retention.prune(app, ADMIN, dry_run=True)

    assert (result.audit_events, result.complete) == (250, True)
    assert event_ids(app) == before
