"""What a scheduler tick finds waiting, read in one statement.

A tick has four kinds of work: due slots (:meth:`RunStore.claim_due`), rolled-out slots'
pending rows (:func:`fleetcron.store.run_rollouts.advance`), queued runs
(:meth:`RunStore.claim_queued`) and, while runs are live, stop requests
(:meth:`RunStore.stop_requests`). Each is a transaction of its own that first reads
whether it has anything to do. Most ticks find nothing: read one after the other, an idle
tick was four transactions (three of them write transactions, which on SQLite take the
single writer lock). :func:`tick_work` asks the four questions in one read-only statement,
and the tick opens only the transactions whose work is there.

The conditions are written here once and used both by that statement and by the
transactions that take the work, so the two cannot disagree. Skipping is safe: the
statement only tells a tick that a transaction would have found nothing at that moment;
what appears just after it is found by the next tick, as it would have been had it
appeared just after the transaction's own read. Every write still goes through the guard.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Select, bindparam, false, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from fleetcron.core.statuses import RunStatus
from fleetcron.store.schema import Assignment, Run, Target

#: A scheduler's conditions on a shard column: the work it starts (``RunStore.mine``).
Mine = Callable[[ColumnElement[int] | InstrumentedAttribute[int]], list[ColumnElement[bool]]]
#: A moment: a value, or the statement's parameter ``now``.
When = datetime | ColumnElement[datetime]
#: The tick's moment in :func:`question` (bound at each tick).
NOW: ColumnElement[datetime] = bindparam("now")


def due(now: When, mine: Mine) -> list[ColumnElement[bool]]:
    """An enabled assignment whose slot has come (the ``next_fire_at`` index), on this
    scheduler's shards (``Target.shard``: the assignments joined to their targets)."""
    return [Assignment.enabled.is_(True), Assignment.next_fire_at <= now, *mine(Target.shard)]


def queued(now: When, mine: Mine) -> list[ColumnElement[bool]]:
    """A queued run (asked for by hand, retried, or deferred by a blackout window) whose
    ``not_before`` has come, on this scheduler's shards."""
    return [
        Run.status == RunStatus.QUEUED,
        or_(Run.not_before.is_(None), Run.not_before <= now),
        *mine(Run.shard),
    ]


def pending(mine: Mine) -> list[ColumnElement[bool]]:
    """A rolled-out slot's row waiting for its wave, on this scheduler's shards."""
    return [Run.status == RunStatus.PENDING, *mine(Run.shard)]


def stop_asked(node: str) -> list[ColumnElement[bool]]:
    """A running run of ``node`` somebody asked to stop."""
    return [
        Run.status == RunStatus.RUNNING,
        Run.node == node,
        Run.stop_requested_at.is_not(None),
    ]


@dataclass(frozen=True)
class TickWork:
    """Which of a tick's transactions have something to do."""

    due: bool
    rollouts: bool
    queued: bool
    stops: bool


def question(node: str, mine: Mine, *, live: bool) -> Select[bool, bool, bool, bool]:
    """The four questions as one statement, the tick's moment a parameter (``now``): a
    scheduler builds it once for its shards, not at every tick (``live``: whether it has
    runs in flight, the only ones a stop request can be for)."""
    stops = select(Run.id).where(*stop_asked(node)).exists() if live else false()
    return select(
        select(Assignment.id)
        .join(Target, Target.id == Assignment.target_id)
        .where(*due(NOW, mine))
        .exists(),
        select(Run.id).where(*pending(mine)).exists(),
        select(Run.id).where(*queued(NOW, mine)).exists(),
        stops,
    )


def tick_work(session: Session, asked: Select[bool, bool, bool, bool], now: datetime) -> TickWork:
    """The answers to :func:`question` at ``now``."""
    row = session.execute(asked, {"now": now}).one()
    return TickWork(*(bool(value) for value in row))
