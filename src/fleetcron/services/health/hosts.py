"""Hosts a new connection cannot reach, as health lists them.

The host probe (``services/targets/reach.py``) stores on each SSH target what a fresh
connection found; this reads the targets it found down, counted in full and listed up to
a limit, for :func:`fleetcron.services.health.report.summary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from fleetcron.core.reach import DOWN
from fleetcron.services.health.scope import EVERY, Scope
from fleetcron.store.planner import written_in
from fleetcron.store.schema import Target


@dataclass(frozen=True)
class HostLine:
    """One target a new connection cannot reach, for health."""

    target: str
    reach: str
    since: datetime | None
    at: datetime | None
    error: str | None


def hosts_down(
    session: Session, limit: int | None, scope: Scope = EVERY
) -> tuple[int, list[HostLine]]:
    """How many SSH targets (of those the jobs in ``scope`` may run on) the newest probe
    found down, and the first ``limit`` of them (longest down first)."""
    # Written into the statement, so that the planner uses the partial index.
    is_down_now = and_(written_in(Target.reach, list(DOWN)), scope.targets())
    total = session.scalar(select(func.count()).select_from(Target).where(is_down_now)) or 0
    rows = session.execute(
        select(Target.name, Target.reach, Target.reach_since, Target.reach_at, Target.reach_error)
        .where(is_down_now)
        .order_by(Target.reach_since, Target.name)
        .limit(limit)
    )
    return int(total), [
        HostLine(name, reach or "", since, at, error) for name, reach, since, at, error in rows
    ]


__all__ = ["HostLine", "hosts_down"]
