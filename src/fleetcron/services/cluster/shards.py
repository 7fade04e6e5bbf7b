"""What an operator sees of the shards and the members: read-only views.

:func:`shard_view` reads each shard's ownership row (owner, generation, draining, lease)
with the targets on it and its runs in flight, in three statements whatever the shard
count (the rows, then one ``GROUP BY shard`` over the targets and one over the active
runs), and the operator's pins (one more; two more when there are pins: the pinned nodes
and the live members, to say why a pin is ignored). :func:`member_view` lists the members
registered in ``cluster_members`` with their heartbeat on the database clock. Neither
writes. A standalone node (SQLite) has one shard, shown even before its ownership row
exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.coordination.guard import db_now
from fleetcron.coordination.node import Node
from fleetcron.coordination.shard_moves import pins as pins_of
from fleetcron.coordination.shard_moves import placed_nodes
from fleetcron.coordination.shard_rows import shard_count, shard_rows
from fleetcron.core.members import member_name, pin_ignored
from fleetcron.core.statuses import ACTIVE, RunStatus
from fleetcron.metrics import MemberReading, ShardReading
from fleetcron.services.cluster.pins import pin_standings
from fleetcron.store.schema import ClusterMember, ClusterOwnership, Run, Target

__all__ = [
    "MemberLine",
    "ShardLine",
    "ShardsView",
    "member_readings",
    "member_view",
    "shard_readings",
    "shard_view",
]


@dataclass(frozen=True)
class ShardLine:
    """One shard as status shows it. ``lease_expires_in_s``: seconds until its lease
    expires by the database clock (negative: expired that long ago; None: no lease)."""

    shard: int
    owner: str | None
    generation: int
    draining: bool
    lease_expires_in_s: float | None
    targets: int = 0
    #: Its runs executing now (``running``), and those waiting to start (queued, pending).
    running: int = 0
    waiting: int = 0
    #: The node an operator pinned it to (``cluster shard move``), and why the placement
    #: ignores that pin now (None: it follows it, or there is no pin).
    pinned_to: str | None = None
    pin_ignored: str | None = None
    #: With the members placement: the node the placement puts it on now (None: no
    #: eligible node, or one owner for every shard). Another owner than this one means
    #: the shard is moving there, or, if it stays so, that the nodes disagree.
    placed_on: str | None = None

    @property
    def misplaced(self) -> bool:
        """Owned elsewhere than where the members placement puts it."""
        return self.placed_on is not None and self.owner != self.placed_on


@dataclass(frozen=True)
class ShardsView:
    """Every shard, in shard order; ``this_node``: the node reading (None: standalone)."""

    count: int
    this_node: str | None
    shards: list[ShardLine] = field(default_factory=list)

    def owned_here(self, line: ShardLine) -> bool:
        """Whether this node runs the shard's jobs (a standalone node runs every shard)."""
        return self.this_node is None or line.owner == self.this_node


@dataclass(frozen=True)
class MemberLine:
    """One registered member (a scheduler process) and its heartbeat lease."""

    name: str
    node_id: str
    worker: int
    weight: float
    heartbeat_age_s: float
    lease_expires_in_s: float
    live: bool


def shard_view(app: App, actor: Actor, node: Node | None) -> ShardsView:
    """Each shard's owner, generation, lease, targets, runs in flight and pin (read-only),
    as ``node`` reads them (None: a standalone node)."""
    actor.authorize("cluster.read")
    view = _read_view(app, node.identity.node_id if node is not None else None)
    return _with_placement(app, _with_pins(app, view))


def _with_placement(app: App, view: ShardsView) -> ShardsView:
    """With the members placement, the view with each shard's placed node (four
    statements: the members, the owners, the shard count and the pins)."""
    if not app.settings.cluster or app.settings.shard_placement != "members":
        return view
    with app.db.read() as session:
        placed = placed_nodes(session)
    return replace(
        view, shards=[replace(line, placed_on=placed.get(line.shard)) for line in view.shards]
    )


def _with_pins(app: App, view: ShardsView) -> ShardsView:
    """The view with each pinned shard's node and why its pin is ignored: one statement,
    and two more when there are pins (the pinned nodes and the live members)."""
    with app.db.read() as session:
        pins = pins_of(session)
        standings = pin_standings(session, pins.values())
    if not pins:
        return view
    lines = [
        replace(
            line,
            pinned_to=pins[line.shard],
            pin_ignored=pin_ignored(standings.get(pins[line.shard])),
        )
        if line.shard in pins
        else line
        for line in view.shards
    ]
    return replace(view, shards=lines)


def shard_readings(app: App, node: Node | None) -> list[ShardReading]:
    """What the per-shard gauges show at scrape time (the view's queries, no actor: the
    metrics endpoint's own access rule applies)."""
    view = _with_placement(
        app, _read_view(app, node.identity.node_id if node is not None else None)
    )
    return [
        ShardReading(s.shard, s.generation, s.running, view.owned_here(s), s.misplaced)
        for s in view.shards
    ]


def _read_view(app: App, this_node: str | None) -> ShardsView:
    """The shards as ``this_node`` reads them: three statements whatever the count."""
    with app.db.read() as session:
        count = shard_count(session)
        rows = {r.shard: r for r in shard_rows(session, lock=False)}
        now = db_now(session) if rows else None
        targets = _targets_per_shard(session)
        running, waiting = _active_runs_per_shard(session)
    shards = sorted(set(range(count)) | set(rows))
    lines = [
        _line(s, rows.get(s), now, targets.get(s, 0), running.get(s, 0), waiting.get(s, 0))
        for s in shards
    ]
    return ShardsView(count, this_node, lines)


def _line(
    shard: int,
    row: ClusterOwnership | None,
    now: datetime | None,
    *counts: int,
) -> ShardLine:
    """A shard's line from its row (None: no row yet) and its counts (targets, running,
    waiting)."""
    targets, running, waiting = counts
    if row is None:
        return ShardLine(shard, None, 0, False, None, targets, running, waiting)
    left = (
        (row.lease_expires_at - now).total_seconds()
        if row.lease_expires_at is not None and now is not None
        else None
    )
    return ShardLine(
        shard, row.owner_node_id, row.generation, row.draining, left, targets, running, waiting
    )


def _targets_per_shard(session: Session) -> dict[int, int]:
    """How many targets each shard holds: one ``GROUP BY``."""
    query = select(Target.shard, func.count()).group_by(Target.shard)
    return {shard: n for shard, n in session.execute(query)}


def _active_runs_per_shard(session: Session) -> tuple[dict[int, int], dict[int, int]]:
    """Each shard's running runs and its queued or pending ones: one ``GROUP BY``."""
    query = (
        select(Run.shard, Run.status, func.count())
        .where(Run.status.in_(ACTIVE))
        .group_by(Run.shard, Run.status)
    )
    running: dict[int, int] = {}
    waiting: dict[int, int] = {}
    for shard, status, n in session.execute(query):
        into = running if status == RunStatus.RUNNING else waiting
        into[shard] = into.get(shard, 0) + n
    return running, waiting


def member_view(app: App, actor: Actor) -> list[MemberLine]:
    """Every registered member, live or not, by node and worker (read-only)."""
    actor.authorize("cluster.read")
    return _members(app)


def member_readings(app: App) -> list[MemberReading]:
    """What the per-member gauges show at scrape time (two statements, no actor: the
    metrics endpoint's own access rule applies)."""
    lines = _members(app)
    with app.db.read() as session:
        owned = dict(
            session.execute(
                select(ClusterOwnership.owner_node_id, func.count())
                .where(ClusterOwnership.owner_node_id.is_not(None))
                .group_by(ClusterOwnership.owner_node_id)
            ).all()
        )
    return [
        MemberReading(
            m.name,
            m.weight,
            m.live,
            m.heartbeat_age_s,
            int(owned.get(m.node_id, 0)) if m.worker == 0 else -1,
        )
        for m in lines
    ]


def _members(app: App) -> list[MemberLine]:
    with app.db.read() as session:
        rows = session.execute(
            select(
                ClusterMember.node_id,
                ClusterMember.worker,
                ClusterMember.weight,
                ClusterMember.heartbeat_at,
                ClusterMember.lease_expires_at,
            ).order_by(ClusterMember.node_id, ClusterMember.worker)
        ).all()
        now = db_now(session) if rows else None
    return [_member(*row, now=now) for row in rows]


def _member(
    node_id: str,
    worker: int,
    weight: float,
    heartbeat_at: datetime,
    lease_expires_at: datetime,
    *,
    now: datetime | None,
) -> MemberLine:
    left = (lease_expires_at - now).total_seconds() if now is not None else 0.0
    age = (now - heartbeat_at).total_seconds() if now is not None else 0.0
    return MemberLine(
        member_name(node_id, worker), node_id, worker, float(weight), age, left, left > 0
    )
