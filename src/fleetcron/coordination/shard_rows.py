"""The shards' ownership rows: the shard count fixed at creation, and the rows of all
shards read, locked, changed and renewed together.

Each shard has its own row in ``cluster_ownership`` (owner, generation, draining, lease),
and the guard decides per shard (:func:`fleetcron.core.ownership.evaluate_shards`). With
one owner (the default placement) a handoff, a takeover or a failover moves all of them at
once, each shard's generation going up by one; with the members placement single shards
move (:mod:`fleetcron.coordination.shard_moves`). An owner renews every shard it owns in
one statement
(:func:`renew_leases`), so coordination costs do not grow with the shard count.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Select, Table, bindparam, func, select, update
from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.core.ownership import AllShards, ShardRow
from fleetcron.core.topology import Topology
from fleetcron.errors import Conflict
from fleetcron.store.schema import ClusterOwnership, ClusterSettings

__all__ = [
    "DEFAULT_SHARDS",
    "Ownership",
    "fix_shard_count",
    "fixed_count",
    "fixed_shards",
    "lease_until",
    "locked_shards",
    "owned_generations",
    "renew_leases",
    "shard_count",
    "shard_rows",
    "sole_owner",
]

#: The shard count of a new PostgreSQL installation (``FLEETCRON_SHARDS`` unset).
DEFAULT_SHARDS = 64


def shard_count(session: Session) -> int:
    """The installation's shard count; 1 while none is fixed yet (nothing sharded exists)."""
    return fixed_count(session) or 1


def fixed_count(session: Session) -> int | None:
    """The shard count fixed at creation; None while none is fixed yet."""
    return session.scalar(select(ClusterSettings.shards))


def fix_shard_count(session: Session, wanted: int | None, *, single: bool, now: datetime) -> int:
    """The shard count, fixed now when it is not yet: ``wanted`` (``FLEETCRON_SHARDS``), or
    the default (1 when ``single``: SQLite, a replicated pair). A ``wanted`` other than the
    fixed count is refused: the count never changes after the installation is created."""
    fixed = fixed_count(session)
    if fixed is None:
        fixed = 1 if single else (wanted or DEFAULT_SHARDS)
        session.add(ClusterSettings(id=1, shards=fixed, created_at=now))
        session.flush()
    elif wanted is not None and wanted != fixed:
        raise Conflict(
            f"FLEETCRON_SHARDS is {wanted}, but this installation was created with {fixed} "
            f"shard(s), which never changes; unset FLEETCRON_SHARDS or set it to {fixed}"
        )
    return int(fixed)


def fixed_shards(app: App, session: Session) -> int:
    """:func:`fix_shard_count` with this installation's settings (``FLEETCRON_SHARDS``).
    SQLite and a replicated pair (each node its own database: no members to share shards
    between) have one shard."""
    single = app.db.dialect == "sqlite" or app.settings.topology is Topology.REPLICATED_PAIR
    return fix_shard_count(session, app.settings.shards, single=single, now=app.now())


def owned_generations(session: Session, node_id: str) -> frozenset[tuple[int, int]]:
    """The ``(shard, generation)`` of every ownership row naming ``node_id`` its owner,
    unlocked: every pair a verdict can find the node owning (it may find fewer: a lapsed
    lease, a node refused), read in one indexed statement without evaluating anything."""
    rows = session.execute(
        select(ClusterOwnership.shard, ClusterOwnership.generation).where(
            ClusterOwnership.owner_node_id == node_id
        )
    )
    return frozenset((int(shard), int(generation)) for shard, generation in rows)


def shard_rows(session: Session, *, lock: bool) -> list[ClusterOwnership]:
    """Every shard's ownership row in shard order (locked in that order: two lockers never
    wait for each other in a cycle)."""
    query = select(ClusterOwnership).order_by(ClusterOwnership.shard)
    if lock:
        query = query.with_for_update()
    return list(session.scalars(query))


def _locked_shards_statement() -> Select[Any]:
    """The statement of :func:`locked_shards`, built once (its values are bound)."""
    every = cast(Table, ClusterOwnership.__table__).alias("every")
    count = select(func.count()).select_from(every)
    return (
        select(
            ClusterOwnership.shard,
            ClusterOwnership.owner_node_id,
            ClusterOwnership.generation,
            ClusterOwnership.draining,
            ClusterOwnership.lease_expires_at,
            count.scalar_subquery(),
            count.where(every.c.shard >= 0, every.c.shard < bindparam("shards")).scalar_subquery(),
            count.where(every.c.owner_node_id == bindparam("me")).scalar_subquery(),
        )
        .where(ClusterOwnership.shard.in_(bindparam("only", expanding=True)))
        .order_by(ClusterOwnership.shard)
        .with_for_update(of=ClusterOwnership)
    )


_LOCKED_SHARDS = _locked_shards_statement()


def locked_shards(
    session: Session, only: Collection[int], node_id: str, shards: int
) -> tuple[list[ShardRow], AllShards | None]:
    """The rows of the shards ``only``, locked in shard order, and every shard's row
    counted without a lock (:class:`~fleetcron.core.ownership.AllShards`; None when none
    of ``only`` has a row), in one statement."""
    found = session.execute(
        _LOCKED_SHARDS, {"only": sorted(set(only)), "me": node_id, "shards": shards}
    ).all()
    rows = [ShardRow(*r[:5]) for r in found]
    return rows, AllShards(*found[0][5:]) if found else None


def sole_owner(session: Session) -> str | None:
    """The node that owns every shard, or None when none does (no owner yet, or the
    shards' owners differ)."""
    owners = set(session.scalars(select(ClusterOwnership.owner_node_id)))
    return owners.pop() if len(owners) == 1 else None


class Ownership:
    """The ownership rows of all shards, read and changed as one while a single node owns
    every shard. Reading an attribute reads shard 0's row (every shard has the same owner,
    draining state, transfer and lease); setting one sets it on every shard's row."""

    def __init__(self, rows: Sequence[ClusterOwnership]) -> None:
        if not rows:
            raise ValueError("no ownership rows")
        self.rows = list(rows)

    @property
    def generations(self) -> dict[int, int]:
        """Shard -> its generation."""
        return {r.shard: r.generation for r in self.rows}

    @property
    def generation(self) -> int:
        """The highest generation of any shard (what an operator is shown)."""
        return max(r.generation for r in self.rows)

    def advance(self) -> None:
        """Every shard's generation up by one: monotonic per shard."""
        for row in self.rows:
            row.generation += 1

    @property
    def owner_node_id(self) -> str | None:
        return self.rows[0].owner_node_id

    @owner_node_id.setter
    def owner_node_id(self, value: str | None) -> None:
        self._set(owner_node_id=value)

    @property
    def draining(self) -> bool:
        return any(r.draining for r in self.rows)

    @draining.setter
    def draining(self, value: bool) -> None:
        self._set(draining=value)

    @property
    def transfer_id(self) -> int | None:
        return self.rows[0].transfer_id

    @transfer_id.setter
    def transfer_id(self, value: int | None) -> None:
        self._set(transfer_id=value)

    @property
    def lease_expires_at(self) -> datetime | None:
        """The earliest lease of any shard (None: no lease)."""
        leases = [r.lease_expires_at for r in self.rows if r.lease_expires_at is not None]
        return min(leases, default=None)

    @lease_expires_at.setter
    def lease_expires_at(self, value: datetime | None) -> None:
        self._set(lease_expires_at=value)

    @property
    def updated_at(self) -> datetime:
        return self.rows[0].updated_at

    @updated_at.setter
    def updated_at(self, value: datetime) -> None:
        self._set(updated_at=value)

    def _set(self, **values: object) -> None:
        for row in self.rows:
            for name, value in values.items():
                setattr(row, name, value)


def renew_leases(session: Session, node_id: str, lease_s: float) -> bool | None:
    """Extend the lease of every shard ``node_id`` owns to ``lease_s`` from now by the
    database clock, in one ``UPDATE`` whatever the shard count (on PostgreSQL; elsewhere
    the clock is read first). Returns whether any of them is draining, or None when the
    node owns no shard (nothing was renewed)."""
    draining = session.scalars(
        update(ClusterOwnership)
        .where(ClusterOwnership.owner_node_id == node_id)
        .values(lease_expires_at=lease_until(session, lease_s))
        .returning(ClusterOwnership.draining)
        .execution_options(synchronize_session=False)
    ).all()
    return any(draining) if draining else None


def lease_until(session: Session, lease_s: float) -> Any:
    """``lease_s`` from now by the database clock: an expression evaluated in the
    statement that writes it on PostgreSQL (no read first); elsewhere the clock is read."""
    if session.get_bind().dialect.name == "postgresql":
        return func.clock_timestamp() + func.make_interval(0, 0, 0, 0, 0, 0, lease_s)
    return _db_now(session) + timedelta(seconds=lease_s)


def _db_now(session: Session) -> datetime:
    value = session.scalar(select(func.clock_timestamp()))
    if not isinstance(value, datetime):
        raise TypeError("the database returned no clock_timestamp()")
    return value
