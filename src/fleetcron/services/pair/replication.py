"""The replicated pair's replication: setup (both directions at once) and status.

``setup`` runs on the node whose database holds the data (the *first* side) and reaches the
peer's database with an admin connection. It checks both servers, then, in this order:

1. a publication ``fleetcron`` on each side over fleetcron's tables
   (:func:`fleetcron.store.replication.replicated_tables`);
2. every id sequence counts by 2: odd here, even on the peer, each above the largest id
   either side holds, so an insert on one side never takes an id the other can take;
3. the peer subscribes to this side with ``copy_data = true`` (it receives every row this
   side has), then this side subscribes to the peer with ``copy_data = false`` (the peer
   was checked to be empty); both with ``origin = none``, so rows are not sent back.

Checks, each failing with what to change: both servers PostgreSQL 16 or newer (for
``origin = none``), ``wal_level = logical``, two free replication slots and WAL senders
(one for the subscription, one for its initial copy), two different clusters (a clone of
this side's cluster would share its system identifier and so its node identities), both
schemas at this version's Alembic head, and a peer without rows in fleetcron's tables.
Running it again on a pair already set up changes nothing and reports so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, create_engine
from sqlalchemy.engine import make_url

from fleetcron.app import Actor, App
from fleetcron.core.topology import Topology
from fleetcron.errors import ConfigError, Conflict, CoordinationError, InvalidInput, StoreError
from fleetcron.masking import mask_dsn
from fleetcron.services.audit import AuditNote, record_failure
from fleetcron.store import replication as sql
from fleetcron.store.db import HEAD_REVISION, Database

log = logging.getLogger(__name__)

__all__ = [
    "MIN_VERSION_NUM",
    "ReplicationStatus",
    "SetupResult",
    "conninfo_of",
    "setup",
    "status",
]

MIN_VERSION_NUM = 160000
"""``origin = none`` came with PostgreSQL 16."""
FREE_SLOTS_NEEDED = 2
TAKEOVER_NEEDS_VERIFIED_TARGETS = (
    "in a replicated pair the survivor knows only the claims that reached its database: "
    "the old owner's last ones may not have, so it cannot wait for them. Check that no "
    "command of the old owner still runs (or wait its longest timeout plus the claim "
    "margin), then take over with --targets-verified"
)


def conninfo_of(url: str) -> str:
    """A libpq connection string for a SQLAlchemy PostgreSQL URL (for a subscription)."""
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise InvalidInput(
            f"peer_database_url: {mask_dsn(url)!r} is not a database URL",
            field="peer_database_url",
            value=mask_dsn(url),
            allowed="postgresql+psycopg://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
        ) from exc
    if not parsed.drivername.startswith("postgresql") or not parsed.database:
        raise InvalidInput(
            f"peer_database_url: {mask_dsn(url)!r} is not a PostgreSQL database URL",
            field="peer_database_url",
            value=mask_dsn(url),
            allowed="postgresql+psycopg://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
        )
    parts = {
        "host": parsed.host,
        "port": parsed.port,
        "user": parsed.username,
        "password": parsed.password,
        "dbname": parsed.database,
    }
    return " ".join(f"{k}={v}" for k, v in parts.items() if v is not None)


@dataclass
class SideReport:
    side: str
    system_identifier: str
    version_num: int
    publication_created: bool = False
    subscription: str = ""
    subscription_created: bool = False
    copy_data: bool = False
    sequences: dict[str, int] = field(default_factory=dict)
    """Each id sequence's next value."""
    tables_added: list[str] = field(default_factory=list)
    """Tables added to an existing publication (a migration created them)."""


@dataclass
class SetupResult:
    this: SideReport
    peer: SideReport
    tables: list[str]

    @property
    def changed(self) -> bool:
        return any(
            s.publication_created or s.subscription_created or s.tables_added
            for s in (self.this, self.peer)
        )


def _check_server(side: str, facts: sql.ServerFacts, *, has_sub: bool) -> None:
    if facts.version_num < MIN_VERSION_NUM:
        raise ConfigError(
            f"{side}: PostgreSQL {facts.version_num // 10000} cannot replicate both ways "
            "without sending rows back; the replicated pair needs PostgreSQL 16 or newer "
            "(for `origin = none`) on both nodes"
        )
    if facts.wal_level != "logical":
        raise ConfigError(
            f"{side}: wal_level is {facts.wal_level!r}; set wal_level = logical in "
            "postgresql.conf and restart PostgreSQL"
        )
    need = 0 if has_sub else FREE_SLOTS_NEEDED
    free_slots = facts.max_replication_slots - facts.used_slots
    if free_slots < need:
        raise ConfigError(
            f"{side}: {free_slots} free replication slot(s) of max_replication_slots = "
            f"{facts.max_replication_slots}; {need} are needed (raise it and restart)"
        )
    free_senders = facts.max_wal_senders - facts.used_senders
    if free_senders < need:
        raise ConfigError(
            f"{side}: {free_senders} free WAL sender(s) of max_wal_senders = "
            f"{facts.max_wal_senders}; {need} are needed (raise it and restart)"
        )


def _check_schema(side: str, url: str) -> None:
    database = Database(url)
    try:
        current = database.current_revision()
    finally:
        database.engine.dispose()
    if current != HEAD_REVISION:
        raise ConfigError(
            f"{side}: the schema is at revision {current or '(none)'}, this version needs "
            f"{HEAD_REVISION}: run `fleetcron db upgrade` on that node first (both databases "
            "must be at the same revision before replication starts)"
        )


def _has_subscription(conn: Connection, name: str) -> bool:
    return any(s.name == name for s in sql.subscription_state(conn))


def setup(
    app: App,
    actor: Actor,
    peer_database_url: str,
    *,
    peer_conninfo: str | None = None,
    this_conninfo: str | None = None,
) -> SetupResult:
    """Set up replication both ways between this node's database and the peer's.

    ``peer_database_url``: how this machine reaches the peer's database (an admin
    connection). ``peer_conninfo``: how this node's PostgreSQL server reaches the peer's
    (default: ``replication_peer_dsn``, else derived from the URL). ``this_conninfo``: how
    the peer's server reaches this one (default: derived from this node's database URL)."""
    note = AuditNote("cluster.replication.setup", detail={"peer": mask_dsn(peer_database_url)})
    actor.authorize("cluster.manage")
    try:
        result = _setup(app, peer_database_url, peer_conninfo, this_conninfo)
    except (ConfigError, Conflict, InvalidInput, StoreError) as exc:
        record_failure(app, actor, note, exc)
        raise
    from fleetcron.services.audit import record

    note.detail.update(
        {
            "subscriptions": [result.this.subscription, result.peer.subscription],
            "changed": result.changed,
        }
    )
    with app.db.session() as session:
        record(session, app, actor, note, success=True)
    log.info(
        "replication set up with the peer (changed: %s)",
        result.changed,
        extra={"action": "cluster.replication.setup"},
    )
    return result


def _wait_for_copy(conn: Connection, name: str, *, timeout_s: float) -> None:
    """Wait until every table of subscription ``name`` is copied and in sync."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = next(s for s in sql.subscription_state(conn) if s.name == name)
        if state.tables_not_ready == 0:
            return
        if time.monotonic() > deadline:
            raise StoreError(
                f"the peer has not finished copying this node's data after {timeout_s:g} s "
                f"({state.tables_not_ready} table(s) left, {state.sync_errors} copy error(s)); "
                "see the peer's PostgreSQL log, then run setup again"
            )
        time.sleep(0.2)


@dataclass(frozen=True)
class _Sides:
    """Both databases during setup: the connections and what is reported of each."""

    here: Connection
    there: Connection
    this: SideReport
    peer: SideReport


def _setup(
    app: App,
    peer_url: str,
    peer_conninfo: str | None,
    this_conninfo: str | None,
    copy_timeout_s: float = 300,
) -> SetupResult:
    _check_topology(app)
    this_url = app.settings.database_url or ""
    to_peer = peer_conninfo or app.settings.replication_peer_dsn or conninfo_of(peer_url)
    to_this = this_conninfo or conninfo_of(this_url)
    _check_schema("this node", this_url)
    _check_schema("the peer", peer_url)
    tables = sql.replicated_tables()
    peer_engine = create_engine(peer_url, isolation_level="AUTOCOMMIT")
    this_engine = app.db.engine.execution_options(isolation_level="AUTOCOMMIT")
    try:
        with this_engine.connect() as here, peer_engine.connect() as there:
            mine, theirs = sql.server_facts(here), sql.server_facts(there)
            _check_distinct_clusters(mine, theirs)
            their_sub = sql.subscription_name(theirs.database, mine.system_identifier)
            my_sub = sql.subscription_name(mine.database, theirs.system_identifier)
            _check_server("this node", mine, has_sub=_has_subscription(here, my_sub))
            _check_server("the peer", theirs, has_sub=_has_subscription(there, their_sub))
            if not _has_subscription(there, their_sub):
                _check_peer_empty(there, tables)
                sql.drop_migration_seeds(there)
            sides = _Sides(
                here,
                there,
                SideReport("this node", mine.system_identifier, mine.version_num),
                SideReport("the peer", theirs.system_identifier, theirs.version_num),
            )
            _ensure_ownership_row(app)
            _publish(sides, tables)
            sides.peer.subscription, sides.this.subscription = their_sub, my_sub
            _subscribe(sides, to_this=to_this, to_peer=to_peer, copy_timeout_s=copy_timeout_s)
            _refresh_for_added_tables(sides)
    except (ConfigError, Conflict, InvalidInput):
        raise
    except Exception as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"replication setup failed: {exc}") from exc
    finally:
        peer_engine.dispose()
    return SetupResult(sides.this, sides.peer, tables)


def _check_topology(app: App) -> None:
    if app.settings.topology is not Topology.REPLICATED_PAIR:
        raise ConfigError(
            "replication setup is for the replicated pair: set FLEETCRON_TOPOLOGY="
            "replicated-pair (and FLEETCRON_CLUSTER=true) on both nodes"
        )


def _check_distinct_clusters(mine: sql.ServerFacts, theirs: sql.ServerFacts) -> None:
    """The two nodes' databases must not be copies of one cluster (their node identities
    would be shared)."""
    if mine.system_identifier == theirs.system_identifier:
        raise ConfigError(
            "this node and the peer run on PostgreSQL clusters with the same system "
            f"identifier ({mine.system_identifier}): one is a copy of the other. The "
            "peer needs a cluster of its own (initdb), or node identities would be "
            "shared"
        )


def _check_peer_empty(there: Connection, tables: Sequence[str]) -> None:
    """Setup copies this node's data to the peer, which must hold none of its own."""
    filled = sql.rows_in(there, tables)
    if filled:
        listed = ", ".join(f"{t} ({n})" for t, n in sorted(filled.items()))
        raise Conflict(
            f"the peer's database already holds rows in {listed}: setup copies "
            "this node's data there, so the peer must start from an empty database "
            "migrated with `fleetcron db upgrade` (do not start the peer's "
            "fleetcron before setup)"
        )


def _publish(sides: _Sides, tables: Sequence[str]) -> None:
    """Publish the tables on both sides and give each side its own parity of ids, above
    the highest id either holds."""
    here, there = sides.here, sides.there
    sides.this.publication_created = sql.create_publication(here, tables)
    sides.peer.publication_created = sql.create_publication(there, tables)
    # After an upgrade that added tables: publish them on both sides.
    sides.this.tables_added = sql.add_missing_tables(here, tables)
    sides.peer.tables_added = sql.add_missing_tables(there, tables)
    floors = {
        t: max(sql.max_id(here, t, c), sql.max_id(there, t, c))
        for _, t, c in sql.id_sequences(here, tables)
    }
    for report, conn, parity in ((sides.this, here, 1), (sides.peer, there, 0)):
        states = sql.set_sequence_parity(conn, tables, parity, floors)
        report.sequences = {s.sequence: s.next_value for s in states}


def _subscribe(sides: _Sides, *, to_this: str, to_peer: str, copy_timeout_s: float) -> None:
    """The peer subscribes to this node with a copy of its data; once the copy is done,
    this node subscribes to the peer without one."""
    sides.peer.copy_data = True
    sides.peer.subscription_created = sql.create_subscription(
        sides.there, sides.peer.subscription, to_this, copy_data=True
    )
    # The copy reads the tables whole, whatever their origin: a row the peer wrote
    # and this side had received would be copied back to it. So this side starts
    # reading the peer only once the peer's copy is complete (nothing writes on the
    # peer until setup returns: its fleetcron is not started before).
    _wait_for_copy(sides.there, sides.peer.subscription, timeout_s=copy_timeout_s)
    sides.this.subscription_created = sql.create_subscription(
        sides.here, sides.this.subscription, to_peer, copy_data=False
    )


def _refresh_for_added_tables(sides: _Sides) -> None:
    """A subscription that existed before tables were added reads them once refreshed."""
    if sides.this.tables_added and not sides.peer.subscription_created:
        sql.refresh_subscription(sides.there, sides.peer.subscription)
    if sides.peer.tables_added and not sides.this.subscription_created:
        sql.refresh_subscription(sides.here, sides.this.subscription)


def _ensure_ownership_row(app: App) -> None:
    """The pair's one ownership row is made here, on the first node, before the copy."""
    from fleetcron.coordination.ownership_change import ensure_ownership_row
    from fleetcron.coordination.shard_rows import fixed_shards

    with app.db.session() as session:
        ensure_ownership_row(session, app.now(), shards=fixed_shards(app, session))


@dataclass
class ReplicationStatus:
    topology: Topology
    subscriptions: list[dict[str, Any]]
    slots: list[dict[str, Any]]
    sequences_ok: bool
    problems: list[str]

    @property
    def healthy(self) -> bool:
        return not self.problems


def status(app: App, actor: Actor) -> ReplicationStatus:
    """This node's side of the replication: read-only (no writes, no peer connection)."""
    actor.authorize("cluster.read")
    if app.settings.topology is not Topology.REPLICATED_PAIR:
        return ReplicationStatus(app.settings.topology, [], [], True, [])
    tables = sql.replicated_tables()
    try:
        with app.db.engine.connect() as conn:
            subs = sql.subscription_state(conn)
            slots = sql.slot_state(conn)
            sequences = sql.sequence_state(conn, tables)
            published = sql.published_tables(conn)
            conn.rollback()
    except Exception as exc:
        raise StoreError(f"cannot read the replication state: {exc}") from exc
    problems = _publication_problems(tables, published)
    if not subs:
        problems.append("no subscription to the peer: run `fleetcron cluster replication setup`")
    for s in subs:
        problems.extend(_subscription_problems(s))
    if not slots:
        problems.append("the peer's subscription has no slot on this server")
    for slot in slots:
        if not slot.active:
            problems.append(f"slot {slot.name}: the peer is not reading it (down or cut off)")
    sequences_ok = _node_scoped(sequences)
    if not sequences_ok:
        problems.append(
            "id sequences are not node-scoped (each must count by 2, all of the same parity): "
            "ids made here could collide with the peer's"
        )
    return ReplicationStatus(
        app.settings.topology,
        [sql.as_dict(s) for s in subs],
        [sql.as_dict(s) for s in slots],
        sequences_ok,
        problems,
    )


def _publication_problems(tables: Sequence[str], published: Sequence[str]) -> list[str]:
    if not published:
        return ["no publication: run `fleetcron cluster replication setup`"]
    if published != tables:
        missing = sorted(set(tables) - set(published))
        return [f"the publication lacks table(s) {', '.join(missing)}"]
    return []


def _subscription_problems(s: sql.SubscriptionState) -> list[str]:
    """What keeps one subscription from bringing the peer's writes here."""
    problems: list[str] = []
    if not s.enabled:
        problems.append(
            f"subscription {s.name} is disabled: nothing arrives from the peer "
            "(ownership changes included)"
        )
    elif not s.worker_running:
        problems.append(
            f"subscription {s.name} has no running apply worker: it cannot reach the "
            "peer or keeps failing to apply a change (see the PostgreSQL log)"
        )
    if (s.apply_errors or s.sync_errors) and not (s.enabled and s.worker_running):
        # The counters are cumulative: past errors of a worker that runs again (a cut
        # link that healed) are history, shown in the subscription's counts.
        problems.append(
            f"subscription {s.name} failed to apply {s.apply_errors} time(s) and to copy "
            f"{s.sync_errors} time(s) since the statistics were reset"
        )
    if s.conflicts.get("insert_exists") or s.conflicts.get("multiple_unique_conflicts"):
        problems.append(
            f"subscription {s.name} met a row that already exists here "
            f"({s.conflicts}): a write outside fleetcron's write paths; replication "
            "stops at it until it is resolved"
        )
    if s.tables_not_ready:
        problems.append(f"subscription {s.name}: {s.tables_not_ready} table(s) still copying")
    return problems


def _node_scoped(sequences: Sequence[sql.SequenceState]) -> bool:
    """Whether every id sequence counts by 2, all of one parity (the peer has the other)."""
    parities = {s.next_value % 2 for s in sequences}
    return bool(sequences) and all(s.increment == 2 for s in sequences) and len(parities) == 1


def rejoin_problems(app: App) -> list[str]:
    """Why a returning node of a replicated pair may not start its scheduler yet: what it
    has not received from the peer (a newer owner and generation may be among it). Empty
    for a shared database, or when replication from the peer runs and is current."""
    if app.settings.topology is not Topology.REPLICATED_PAIR:
        return []
    with app.db.engine.connect() as conn:
        subs = sql.subscription_state(conn)
        conn.rollback()
    if not subs:
        return ["there is no subscription to the peer: nothing of the peer's arrives here"]
    problems = []
    for s in subs:
        if not s.enabled:
            problems.append(f"subscription {s.name} is disabled")
        elif not s.worker_running:
            problems.append(f"subscription {s.name} is not applying (peer unreachable or errors)")
    if problems:
        return problems
    # Positive confirmation: the peer's own database, asked over a signed query, has no
    # newer owner or generation than this one.
    from fleetcron.services.pair.peer import local_ownership, peer_ownership

    try:
        endpoint, peer_owner, peer_generation = peer_ownership(app)
    except CoordinationError as exc:
        return [f"cannot confirm the current owner and generation with the peer: {exc.message}"]
    owner, generation = local_ownership(app)
    if peer_generation > generation or (peer_generation == generation and peer_owner != owner):
        problems.append(
            f"the peer ({endpoint}) has owner {peer_owner} at generation {peer_generation}; "
            f"this database has {owner} at generation {generation}: not received yet"
        )
    return problems
