"""Blackout windows as the core reads them: the rows in force, made plain
(:class:`~fleetcron.core.blackouts.Window`), and the subject of a dispatch row.

Read once per claim transaction (a handful of rows, through the ``expires_at`` index);
the rule itself is :mod:`fleetcron.core.blackouts`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, or_, select
from sqlalchemy.orm import Session

from fleetcron.core.blackouts import Scope, Subject, Window
from fleetcron.core.labels import parse_selector
from fleetcron.store.schema import Blackout


def as_window(row: Blackout) -> Window:
    """The plain window of a stored row."""
    return Window(
        id=row.id,
        name=row.name,
        scope=Scope(
            row.job_name, row.target_name, parse_selector(row.selector), project=row.project_id
        ),
        zone=row.zone,
        kind="once" if row.kind == "once" else "cron",
        start=datetime.fromisoformat(row.start_wall) if row.start_wall else None,
        end=datetime.fromisoformat(row.end_wall) if row.end_wall else None,
        cron=row.cron,
        duration=timedelta(seconds=row.duration_s) if row.duration_s else None,
        until=row.until,
        lifted_at=row.lifted_at,
    )


def in_force(session: Session, now: datetime) -> list[Window]:
    """The windows not lifted and not expired at ``now``, by id."""
    rows = session.scalars(
        select(Blackout)
        .where(
            Blackout.lifted_at.is_(None),
            or_(Blackout.expires_at.is_(None), Blackout.expires_at > now),
        )
        .order_by(Blackout.id)
    )
    return [as_window(row) for row in rows]


def subject_of(row: Row[Any], default_zone: str) -> Subject:
    """The assignment of a dispatch row, as the blackout rule sees it: its job's project
    too, so that only that project's windows cover it."""
    return Subject(
        job=row.job_name,
        target=row.target_name,
        labels=dict(row.target_labels or {}),
        zone=row.target_timezone or default_zone,
        project=row.job_project,
    )
