"""Retention of resolved incidents (SQLite and PostgreSQL): those resolved longer ago than
``incident_retention_days`` go, with their targets and notices, ``prune_batch`` per
transaction in the same budgeted rounds as the runs' and the audit events'; open ones and
those resolved inside the window stay. Time comes from an injected counter."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.config import Settings
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.services.alerts.channels import add_channel
from fleetcron.services.runs import retention
from fleetcron.store.schema import Incident, IncidentNotice, IncidentTarget, NotificationChannel
from integration.monitoring.test_retention_rounds import Ticks, settings

ADMIN = Actor("admin", "admin")


def add_incidents(app: App, n: int, *, resolved_days_ago: float | None) -> set[int]:
    """``n`` incidents (of job ids 1000+, one open per job and cause), each with a target
    and a notice; resolved that many days ago (None: open)."""
    channel = _channel(app)
    now = app.now()
    found: set[int] = set()
    with app.db.session() as session:
        base = 1000 + int(session.scalar(select(func.count()).select_from(Incident)) or 0)
        for k in range(n):
            resolved = (
                None
                if resolved_days_ago is None
                else now - timedelta(days=resolved_days_ago, seconds=k)
            )
            opened = (resolved or now) - timedelta(hours=1)
            incident = Incident(
                job_id=base + k,
                job_name=f"job{base + k}",
                cause="failing",
                status="open" if resolved is None else "resolved",
                opened_at=opened,
                resolved_at=resolved,
                previous_state="ok",
                reason="exit 3",
            )
            session.add(incident)
            session.flush()
            session.add(
                IncidentTarget(
                    incident_id=incident.id,
                    assignment_id=k + 1,
                    target_id=k + 1,
                    target_name=f"web{k}",
                    joined_at=opened,
                    last_seen_at=opened,
                    recovered_at=resolved,
                )
            )
            session.add(
                IncidentNotice(
                    incident_id=incident.id, channel_id=channel, notified=[k + 1], messages=2
                )
            )
            found.add(incident.id)
    return found


def _channel(app: App) -> int:
    with app.db.read() as session:
        existing = session.scalar(select(NotificationChannel.id))
    if existing is not None:
        return int(existing)
    return add_channel(app, ADMIN, "ops", WebhookSpec(url="https://hooks.example.com/x")).id


def kept(app: App) -> tuple[set[int], int, int]:
    """Incident ids, and how many targets and notices are left."""
    with app.db.read() as session:
        ids = set(session.scalars(select(Incident.id)))
        targets = session.scalar(select(func.count()).select_from(IncidentTarget)) or 0
        notices = session.scalar(select(func.count()).select_from(IncidentNotice)) or 0
    return ids, int(targets), int(notices)


def test_old_resolved_incidents_go_in_budgeted_rounds_with_their_targets_and_notices(
    app: App,
) -> None:
    settings(app, prune_batch=10, incident_retention_days=30)
    old = add_incidents(app, 45, resolved_days_ago=31)
    inside = add_incidents(app, 4, resolved_days_ago=29)
    still_open = add_incidents(app, 3, resolved_days_ago=None)
    rounds = []
    for _ in range(10):
        # 1 s a read: the round starts at t (deadline t+3.5); the runs' passes find
        # nothing (the count pass asks at t+1), the incidents' first chunk always runs, the
        # next ones ask at t+2 and t+3 (yes) and t+4 (no): three chunks of 10 a round.
        result = retention.prune(app, ADMIN, budget_s=3.5, clock=Ticks(1.0))
        rounds.append((result.incidents, result.complete))
        if result.complete:
            break

    assert rounds == [(30, False), (15, True)]
    ids, targets, notices = kept(app)
    assert ids == inside | still_open
    assert not old & ids
    assert (targets, notices) == (7, 7)


def test_a_dry_run_counts_and_the_default_keeps_ninety_days(app: App) -> None:
    # Negative control of the deletes above: a dry run deletes nothing; and under the
    # default (90 days) incidents resolved 31 days ago are kept.
    assert Settings.model_fields["incident_retention_days"].default == 90
    old = add_incidents(app, 12, resolved_days_ago=31)
    ancient = add_incidents(app, 3, resolved_days_ago=91)

    counted = retention.prune(app, ADMIN, dry_run=True)
    assert counted.incidents == 3 and kept(app)[0] == old | ancient

    pruned = retention.prune(app, ADMIN)
    assert (pruned.incidents, pruned.complete) == (3, True)
    assert kept(app) == (old, 12, 12)
