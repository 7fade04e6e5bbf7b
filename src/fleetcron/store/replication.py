"""PostgreSQL logical replication between the two databases of a replicated pair.

Each node of the pair has its own PostgreSQL (16 or newer). fleetcron's tables travel in one
publication per side (``fleetcron``) and one subscription per side to the peer's, created
with ``origin = none`` so a row applied from the peer is not sent back to it. Both
directions are one ordered stream each: the commits of one database arrive at the other in
commit order, the ownership row with the runs and claims written before it.

Ids never collide: every id sequence of a replicated table counts in steps of 2, odd on the
side that was set up first, even on the other (:func:`set_sequence_parity`). Tables that are
only meaningful where they were written (the replay cache of signed requests) are left out
(:data:`LOCAL_TABLES`).

Everything here is the SQL; checks, order and messages are
:mod:`fleetcron.services.pair.replication`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from fleetcron.errors import StoreError
from fleetcron.masking import mask_dsn
from fleetcron.store.schema import Base

__all__ = [
    "LOCAL_TABLES",
    "MIGRATION_SEEDS",
    "PUBLICATION",
    "SequenceState",
    "SubscriptionState",
    "create_publication",
    "create_subscription",
    "drop_migration_seeds",
    "id_sequences",
    "replicated_tables",
    "sequence_state",
    "server_facts",
    "set_sequence_parity",
    "subscription_name",
    "subscription_state",
]

PUBLICATION = "fleetcron"
"""The publication on each side; the subscription on the other side reads it."""

LOCAL_TABLES = frozenset({"cluster_nonces"})
"""Tables kept per node: the nonces of signed requests a node has seen. A signed request is
meant for one node; a request replayed to both nodes is refused by each (its nonce is in
that node's own cache), and two nodes recording the same nonce never collide."""


def replicated_tables() -> list[str]:
    """fleetcron's tables that travel between the two databases, in a stable order."""
    return sorted(name for name in Base.metadata.tables if name not in LOCAL_TABLES)


def subscription_name(dbname: str, publisher_system_id: str) -> str:
    """The subscription (and its slot on the publisher): unique per database and peer, so
    two installations on one cluster never share a slot name."""
    digest = hashlib.sha256(f"{dbname}:{publisher_system_id}".encode()).hexdigest()[:12]
    return f"fleetcron_sub_{digest}"


@dataclass(frozen=True)
class ServerFacts:
    system_identifier: str
    version_num: int
    wal_level: str
    max_replication_slots: int
    used_slots: int
    max_wal_senders: int
    used_senders: int
    database: str


def server_facts(conn: Connection) -> ServerFacts:
    row = conn.execute(
        text(
            "SELECT (SELECT system_identifier::text FROM pg_control_system()),"
            " current_setting('server_version_num')::int,"
            " current_setting('wal_level'),"
            " current_setting('max_replication_slots')::int,"
            " (SELECT count(*) FROM pg_replication_slots),"
            " current_setting('max_wal_senders')::int,"
            " (SELECT count(*) FROM pg_stat_replication),"
            " current_database()"
        )
    ).one()
    return ServerFacts(str(row[0]), *row[1:])


def create_publication(conn: Connection, tables: Sequence[str]) -> bool:
    """Create the publication over ``tables`` unless it exists; True when created."""
    exists = conn.execute(
        text("SELECT 1 FROM pg_publication WHERE pubname = :n"), {"n": PUBLICATION}
    ).first()
    if exists:
        return False
    names = ", ".join(f'public."{t}"' for t in tables)
    conn.execute(text(f'CREATE PUBLICATION "{PUBLICATION}" FOR TABLE {names}'))
    return True


def add_missing_tables(conn: Connection, tables: Sequence[str]) -> list[str]:
    """Add to the existing publication the ``tables`` it lacks (a migration made them)."""
    missing = sorted(set(tables) - set(published_tables(conn)))
    if missing:
        names = ", ".join(f'public."{t}"' for t in missing)
        conn.execute(text(f'ALTER PUBLICATION "{PUBLICATION}" ADD TABLE {names}'))
    return missing


def refresh_subscription(conn: Connection, name: str) -> None:
    """Let the subscription see the tables added to the peer's publication (no copy: a
    migration creates them empty on both sides)."""
    conn.execute(text(f'ALTER SUBSCRIPTION "{name}" REFRESH PUBLICATION WITH (copy_data = false)'))


def published_tables(conn: Connection) -> list[str]:
    return sorted(
        conn.execute(
            text("SELECT tablename FROM pg_publication_tables WHERE pubname = :n"),
            {"n": PUBLICATION},
        ).scalars()
    )


def create_subscription(conn: Connection, name: str, conninfo: str, *, copy_data: bool) -> bool:
    """Subscribe to the peer's publication, ``origin = none``; True when created."""
    exists = conn.execute(
        text("SELECT 1 FROM pg_subscription WHERE subname = :n"), {"n": name}
    ).first()
    if exists:
        return False
    quoted = conninfo.replace("'", "''")
    try:
        conn.execute(
            text(
                f'CREATE SUBSCRIPTION "{name}" CONNECTION \'{quoted}\' PUBLICATION "{PUBLICATION}"'
                f" WITH (origin = none, copy_data = {'true' if copy_data else 'false'},"
                " disable_on_error = false)"
            )
        )
    except DBAPIError as exc:
        # The statement holds the connection string: say what failed without it.
        raise StoreError(
            f"cannot create the subscription {name} to {mask_dsn(conninfo)}: "
            f"{str(exc.orig).replace(conninfo, mask_dsn(conninfo))}"
        ) from None
    return True


MIGRATION_SEEDS = {"projects": "name = 'default' AND created_by = 'system'"}
"""Rows every migrated database holds from its migrations alone (the ``default`` project of
migration 0035), by table: on an empty peer they are not data of its own. Setup leaves
them out of its emptiness check and drops them on the peer before the copy brings this
node's (same name, same id)."""


def rows_in(conn: Connection, tables: Iterable[str]) -> dict[str, int]:
    """Tables that hold rows besides their migration seeds, with a count."""
    found: dict[str, int] = {}
    for table in tables:
        seeds = MIGRATION_SEEDS.get(table)
        where = f" WHERE NOT ({seeds})" if seeds else ""
        count = int(
            conn.execute(text(f'SELECT count(*) FROM public."{table}"{where}')).scalar_one()
        )
        if count:
            found[table] = count
    return found


def drop_migration_seeds(conn: Connection) -> None:
    """Delete an empty peer's migration seeds (:data:`MIGRATION_SEEDS`); the copy brings
    this node's."""
    for table, seeds in MIGRATION_SEEDS.items():
        conn.execute(text(f'DELETE FROM public."{table}" WHERE {seeds}'))


@dataclass(frozen=True)
class SequenceState:
    sequence: str
    table: str
    column: str
    increment: int
    next_value: int
    """The value the next ``nextval`` returns."""


def id_sequences(conn: Connection, tables: Sequence[str]) -> list[tuple[str, str, str]]:
    """(sequence, table, column) of each id sequence owned by one of ``tables``."""
    rows = conn.execute(
        text(
            "SELECT s.relname, t.relname, a.attname FROM pg_depend d"
            " JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'"
            " JOIN pg_class t ON t.oid = d.refobjid"
            " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid"
            " JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = 'public'"
            " WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')"
            " ORDER BY t.relname"
        )
    ).all()
    wanted = set(tables)
    return [(r[0], r[1], r[2]) for r in rows if r[1] in wanted]


def sequence_state(conn: Connection, tables: Sequence[str]) -> list[SequenceState]:
    states = []
    for seq, table, column in id_sequences(conn, tables):
        row = conn.execute(
            text(
                "SELECT increment_by, start_value, last_value FROM pg_sequences"
                " WHERE schemaname = 'public' AND sequencename = :s"
            ),
            {"s": seq},
        ).one()
        increment, start, last = int(row[0]), int(row[1]), row[2]
        next_value = start if last is None else int(last) + increment
        states.append(SequenceState(seq, table, column, increment, next_value))
    return states


def max_id(conn: Connection, table: str, column: str) -> int:
    value = conn.execute(text(f'SELECT max("{column}") FROM public."{table}"')).scalar()
    return int(value or 0)


def set_sequence_parity(
    conn: Connection, tables: Sequence[str], parity: int, floors: dict[str, int]
) -> list[SequenceState]:
    """Make every id sequence of ``tables`` count by 2 from the smallest number of
    ``parity`` (1 odd, 0 even) above the largest id on either side (``floors``: the peer's
    largest id per table) and above where it stands now."""
    for seq, table, column in id_sequences(conn, tables):
        current = next(s for s in sequence_state(conn, [table]) if s.sequence == seq)
        floor = max(max_id(conn, table, column), floors.get(table, 0), current.next_value - 1)
        start = floor + 1
        if start % 2 != parity % 2:
            start += 1
        conn.execute(
            text(
                f'ALTER SEQUENCE public."{seq}" INCREMENT BY 2 MINVALUE 1'
                f" START WITH {start} RESTART WITH {start}"
            )
        )
    return sequence_state(conn, tables)


@dataclass(frozen=True)
class SubscriptionState:
    name: str
    enabled: bool
    worker_running: bool
    received_lsn: str | None
    last_message_age_s: float | None
    """Seconds since the last message from the peer's walsender (None: never)."""
    apply_errors: int
    sync_errors: int
    conflicts: dict[str, int] = field(default_factory=dict)
    tables_not_ready: int = 0


@dataclass(frozen=True)
class SlotState:
    """The slot on this server that the peer's subscription reads."""

    name: str
    active: bool
    lag_bytes: int | None
    """WAL written here that the peer has not confirmed applying."""
    replay_lag_s: float | None


_CONFLICT_COLUMNS = (
    "confl_insert_exists",
    "confl_update_origin_differs",
    "confl_update_exists",
    "confl_update_missing",
    "confl_delete_origin_differs",
    "confl_delete_missing",
    "confl_multiple_unique_conflicts",
)


def subscription_state(conn: Connection) -> list[SubscriptionState]:
    """This database's subscriptions: enabled, worker, errors, conflicts (PostgreSQL 18
    counts conflicts per kind; older versions have none of those columns)."""
    conflict_columns = _conflict_columns(conn)
    extra = "".join(f", st.{c}" for c in conflict_columns)
    rows = conn.execute(
        text(
            "SELECT s.subname, s.subenabled,"
            " (SELECT count(*) FROM pg_stat_subscription w"
            "   WHERE w.subid = s.oid AND w.pid IS NOT NULL AND w.relid IS NULL) > 0,"
            " (SELECT max(w.received_lsn)::text FROM pg_stat_subscription w"
            "   WHERE w.subid = s.oid),"
            " (SELECT extract(epoch FROM clock_timestamp() - max(w.last_msg_receipt_time))"
            "   FROM pg_stat_subscription w WHERE w.subid = s.oid),"
            " coalesce(st.apply_error_count, 0), coalesce(st.sync_error_count, 0),"
            " (SELECT count(*) FROM pg_subscription_rel r"
            "   WHERE r.srsubid = s.oid AND r.srsubstate <> 'r')"
            f"{extra}"
            " FROM pg_subscription s"
            " JOIN pg_database d ON d.oid = s.subdbid AND d.datname = current_database()"
            " LEFT JOIN pg_stat_subscription_stats st ON st.subid = s.oid"
            " ORDER BY s.subname"
        )
    ).all()
    return [_subscription(r, conflict_columns) for r in rows]


def _conflict_columns(conn: Connection) -> list[str]:
    """The conflict counters this server's ``pg_stat_subscription_stats`` has (none
    before PostgreSQL 18)."""
    columns = set(
        conn.execute(
            text(
                "SELECT attname FROM pg_attribute"
                " WHERE attrelid = 'pg_catalog.pg_stat_subscription_stats'::regclass"
            )
        ).scalars()
    )
    return [c for c in _CONFLICT_COLUMNS if c in columns]


def _subscription(r: Sequence[Any], conflict_columns: list[str]) -> SubscriptionState:
    """One row of :func:`subscription_state`'s query, its conflict counters last."""
    conflicts = {
        c.removeprefix("confl_"): int(v or 0) for c, v in zip(conflict_columns, r[8:], strict=True)
    }
    return SubscriptionState(
        name=r[0],
        enabled=bool(r[1]),
        worker_running=bool(r[2]),
        received_lsn=r[3],
        last_message_age_s=None if r[4] is None else float(r[4]),
        apply_errors=int(r[5]),
        sync_errors=int(r[6]),
        conflicts=conflicts,
        tables_not_ready=int(r[7]),
    )


def slot_state(conn: Connection, names: Sequence[str] | None = None) -> list[SlotState]:
    """Logical slots of this database (the peer's subscription reads them)."""
    rows = conn.execute(
        text(
            "SELECT sl.slot_name, sl.active,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), sl.confirmed_flush_lsn)::bigint,"
            " (SELECT extract(epoch FROM max(r.replay_lag)) FROM pg_stat_replication r"
            "   WHERE r.pid = sl.active_pid)"
            " FROM pg_replication_slots sl"
            " WHERE sl.database = current_database() AND sl.slot_type = 'logical'"
            " AND sl.slot_name LIKE 'fleetcron_sub_%'"
            " ORDER BY sl.slot_name"
        )
    ).all()
    return [
        SlotState(
            r[0],
            bool(r[1]),
            None if r[2] is None else int(r[2]),
            None if r[3] is None else float(r[3]),
        )
        for r in rows
        if names is None or r[0] in names
    ]


def set_subscription_enabled(conn: Connection, name: str, enabled: bool) -> None:
    conn.execute(text(f'ALTER SUBSCRIPTION "{name}" {"ENABLE" if enabled else "DISABLE"}'))


def as_dict(state: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(state)
