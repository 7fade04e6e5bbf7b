"""Connecting to the database, migrating it, and checking its schema is current.

SQLite (the embedded default) runs in WAL mode with a busy timeout and foreign keys
on; PostgreSQL is used as is. Migrations are Alembic's, shipped inside the package.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy import Engine, create_engine, delete, event, func, inspect, select, text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from fleetcron.errors import (
    Conflict,
    InvalidInput,
    SchemaOutOfDate,
    StoreError,
    TransientStoreError,
)

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

#: The newest migration; a test checks it is Alembic's head. Kept as a constant so that
#: every CLI command can check the schema without loading Alembic and the migrations.

HEAD_REVISION = "0042"

SQLITE_BUSY_TIMEOUT_MS = 10_000


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


#: The execution option that marks the engine of :meth:`Database.read` sessions.
READ_ONLY_OPTION = "fleetcron_read_only"


def _sqlite_begin(conn: Any) -> None:
    # A write transaction takes SQLite's single writer lock at BEGIN, not at the first
    # write, so two processes cannot both read "not yet fired" and then both insert.
    # A read transaction (Database.read) takes no writer lock: in WAL mode it reads its
    # snapshot while another connection writes.
    if conn.get_execution_options().get(READ_ONLY_OPTION):
        conn.exec_driver_sql("BEGIN")
    else:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def create_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 (under a umask of 077) unless it exists.

    An empty file is an empty SQLite database. SQLite gives the ``-wal`` and ``-shm``
    files it creates next to a database the database file's mode, so they are owner-only
    too, whatever the umask and the mode of the directory."""
    previous = os.umask(0o077)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    finally:
        os.umask(previous)


#: The lease the PostgreSQL session bounds are derived from when automatic failover is off
#: (a forced takeover still needs the old owner's locks released): 15 s idle, as before.
UNLEASED_BOUND_S = 30.0


@dataclass(frozen=True)
class SessionBounds:
    """How long any one PostgreSQL session of a node may hold or wait for a lock, and how
    fast a dead link is noticed (see :func:`session_bounds`)."""

    statement_timeout_ms: int
    idle_in_transaction_ms: int
    lock_timeout_ms: int
    keepalives_idle_s: int
    keepalives_interval_s: int
    keepalives_count: int
    tcp_user_timeout_ms: int

    def connect_args(self, application_name: str) -> dict[str, Any]:
        """libpq connection parameters: the server-side timeouts as ``options``, the
        client's TCP keepalives and user timeout, and the session's name."""
        options = " ".join(
            [
                "-c timezone=UTC",
                f"-c statement_timeout={self.statement_timeout_ms}",
                f"-c idle_in_transaction_session_timeout={self.idle_in_transaction_ms}",
                f"-c lock_timeout={self.lock_timeout_ms}",
            ]
        )
        return {
            "options": options,
            "application_name": application_name,
            "keepalives": 1,
            "keepalives_idle": self.keepalives_idle_s,
            "keepalives_interval": self.keepalives_interval_s,
            "keepalives_count": self.keepalives_count,
            "tcp_user_timeout": self.tcp_user_timeout_ms,
        }


def session_bounds(lease_s: float | None) -> SessionBounds:
    """The bounds of every PostgreSQL session of a node, derived from its lease ``L``
    (:data:`UNLEASED_BOUND_S` without automatic failover). The one place they are set.

    The arithmetic: a standby takes over once the owner's lease has expired, which is at
    most ``L`` after the owner's last renewal, itself before the owner was cut off. To get
    the ownership lock then, no lock of the cut-off owner may outlive that moment by much:

    - ``idle_in_transaction_session_timeout`` = ``statement_timeout`` = ``L/2``: a session
      cut off inside a transaction (idle, waiting for a statement that never arrives) or
      inside a statement is ended by the server, its locks released and its write rolled
      back, at most ``L/2`` after the cut, before the lease can expire (a live node issues
      its statements back to back, and no coordination statement takes ``L/2``);
    - ``lock_timeout`` = ``L/4``: a lock wait gives up and the caller's next round (the
      lease step every ``FLEETCRON_LEASE_RENEW_S``, the next tick) tries again, so no
      node waits on a lock without end and a retry comes well within the lease;
    - TCP keepalives after ``L/4`` idle, every ``L/8``, 3 probes, and ``tcp_user_timeout``
      ``L/2``: the node notices a silently dead link (no RST, no FIN) within about ``L/2``
      instead of the kernel's two hours (the server side needs ``tcp_keepalives_*`` too:
      docs/high-availability.md).

    Keepalive parameters are whole seconds, at least one. So a standby takes over at most
    ``L`` plus one lease step (``FLEETCRON_LEASE_RENEW_S``, how often it looks) after the
    cut; ``L/4`` and one more step if a look waits on a lock not yet released.
    """
    lease = lease_s if lease_s is not None else UNLEASED_BOUND_S
    half_ms = max(int(lease * 500), 100)
    return SessionBounds(
        statement_timeout_ms=half_ms,
        idle_in_transaction_ms=half_ms,
        lock_timeout_ms=max(int(lease * 250), 50),
        keepalives_idle_s=max(int(lease / 4), 1),
        keepalives_interval_s=max(int(lease / 8), 1),
        keepalives_count=3,
        tcp_user_timeout_ms=half_ms,
    )


def create_db_engine(
    url: str, bounds: SessionBounds | None = None, application_name: str = "fleetcron"
) -> Engine:
    """Create an engine for the URL with fleetcron's connection settings; on PostgreSQL
    every session gets ``bounds`` (none: unbounded, for migrations) and its name."""
    if url.startswith("sqlite"):
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            # The database holds password hashes and encrypted keys: owner only.
            path = Path(url.removeprefix("sqlite:///").partition("?")[0])
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        else:
            path = None
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        if path is not None:
            private = path

            # At the first connection, not before: opening an app creates no file.
            @event.listens_for(engine, "do_connect")
            def _private_file(*_args: Any) -> None:
                if not private.exists():
                    create_private_file(private)

        event.listen(engine, "connect", _sqlite_pragmas)

        # Let SQLAlchemy, not pysqlite, issue BEGIN so BEGIN IMMEDIATE takes effect.
        @event.listens_for(engine, "connect")
        def _no_pysqlite_begin(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None

        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # Timestamps are stored as UTC; comparing them with clock_timestamp() needs a UTC session.
    connect_args: dict[str, Any] = (
        bounds.connect_args(application_name)
        if bounds is not None
        else {"options": "-c timezone=UTC", "application_name": application_name}
    )
    engine = create_engine(
        url, pool_pre_ping=True, pool_size=10, max_overflow=20, connect_args=connect_args
    )
    return engine


#: Where a pooled connection records the ``application_name`` it was given.
APPLICATION_NAME_KEY = "fleetcron_application_name"


def application_name(node: str, role: str) -> str:
    """How a node's PostgreSQL sessions are named (``pg_stat_activity.application_name``,
    at most 63 characters): ``fleetcron:<node>:<role>``."""
    return f"fleetcron:{node}:{role}"[:63]


def alembic_config(engine: Engine | None = None, url: str | None = None) -> Config:
    # Alembic is imported here, not at the top: most commands never migrate.
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("fleetcron.store") / "migrations"))
    if url:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


#: PostgreSQL's codes for a transaction aborted only because of another one: a deadlock
#: (40P01) and a serialization failure (40001). Run whole again, it succeeds.
TRANSIENT_CODES = frozenset({"40P01", "40001"})
#: How many times :func:`retry_transient` runs a transaction at most.
TRANSIENT_ATTEMPTS = 3

P = ParamSpec("P")
R = TypeVar("R")


def retry_transient(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` (one whole transaction of its own) again when the database aborted it
    only because of another transaction (:class:`~fleetcron.errors.TransientStoreError`),
    up to :data:`TRANSIENT_ATTEMPTS` times, after a short random pause. For the
    scheduler's run writes: a completion aborted by a deadlock is otherwise lost (its run
    stays running until it is closed as lost), and a claim's tick fails."""

    @functools.wraps(fn)
    def again(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(1, TRANSIENT_ATTEMPTS):
            try:
                return fn(*args, **kwargs)
            except TransientStoreError as exc:
                log.warning(
                    "database: %s aborted by another transaction (%s); running it again",
                    fn.__name__,
                    exc.message,
                    extra={"action": "db.retry", "attempt": attempt},
                )
                time.sleep(random.uniform(0.005, 0.05) * attempt)
        return fn(*args, **kwargs)

    return again


class Database:
    """An engine and a session factory; the one way the rest of fleetcron reaches the data."""

    def __init__(
        self, url: str, *, bounds: SessionBounds | None = None, name: str = "fleetcron"
    ) -> None:
        self.url = url
        self.bounds = bounds
        self.engine = create_db_engine(url, bounds, name)
        self._name = self._connected_as = name
        if self.dialect == "postgresql":
            event.listen(self.engine, "checkout", self._named)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # The same pool; on SQLite its transactions begin without the writer lock.
        self._read_sessions = sessionmaker(
            self.engine.execution_options(**{READ_ONLY_OPTION: True}), expire_on_commit=False
        )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def rename(self, name: str) -> None:
        """Name every session of this database ``name`` from now on (PostgreSQL's
        ``application_name``): a node learns its node id after it has connected, and a
        session made before is renamed when it is next used."""
        self._name = name

    def _named(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if record.info.get(APPLICATION_NAME_KEY, self._connected_as) == self._name:
            return
        cursor = dbapi_connection.cursor()
        cursor.execute("SELECT set_config('application_name', %s, false)", (self._name,))
        cursor.close()
        dbapi_connection.commit()
        record.info[APPLICATION_NAME_KEY] = self._name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._transaction(self._sessions) as session:
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reads only (still one transaction, for a consistent view).

        On SQLite it does not take the writer lock (``BEGIN``, not ``BEGIN IMMEDIATE``), so
        a read proceeds while another connection writes; do not write in it."""
        with self._transaction(self._read_sessions) as session:
            yield session

    @contextmanager
    def _transaction(self, sessions: sessionmaker[Session]) -> Iterator[Session]:
        session = sessions()
        try:
            with session.begin():
                yield session
        except DataError as exc:
            # e.g. a NUL character, which PostgreSQL cannot store in text.
            raise InvalidInput(
                f"a value cannot be stored or searched: {exc.orig}".strip(),
                field=None,
                value=None,
                allowed="text without NUL characters, numbers within range",
            ) from exc
        except IntegrityError as exc:
            # Two writers raced for a unique name or slot; the loser sees a plain conflict.
            raise Conflict(f"the change conflicts with existing data: {exc.orig}") from exc
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) in TRANSIENT_CODES:
                raise TransientStoreError(f"database error: {exc.orig}") from exc
            raise StoreError(f"database error: {exc.orig}") from exc
        finally:
            session.close()

    def head_revision(self) -> str | None:
        return HEAD_REVISION

    def current_revision(self) -> str | None:
        """The schema revision recorded by Alembic; None for an empty database."""
        try:
            with self.engine.connect() as conn:
                if not inspect(conn).has_table("alembic_version"):
                    return None
                return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot reach the database: {exc}") from exc

    def upgrade(self, *, from_script: bool = True) -> None:
        """Migrate the schema to the newest revision. An empty SQLite file gets it from the
        head script instead (``store/sqlite_head.py``), unless ``from_script`` is False."""
        if from_script and self._load_head_script():
            return
        log.info("migrating database to head", extra={"action": "db.upgrade"})
        from alembic import command

        # A migration may hold its locks for long: its engine has no session bounds.
        engine = self.engine if self.dialect != "postgresql" else create_db_engine(self.url)
        try:
            command.upgrade(alembic_config(engine=engine), "head")
        finally:
            if engine is not self.engine:
                engine.dispose()

    def _load_head_script(self) -> bool:
        """Load the head script into an empty SQLite database; False (nothing done) for
        any other database or when the script is not at :data:`HEAD_REVISION`."""
        if self.dialect != "sqlite":
            return False
        from fleetcron.store import sqlite_head

        text_ = sqlite_head.script()
        if sqlite_head.script_revision(text_) != HEAD_REVISION:
            log.warning(
                "the SQLite head script is not at revision %s: migrating instead",
                HEAD_REVISION,
                extra={"action": "db.head_script_stale"},
            )
            return False
        raw = self.engine.raw_connection()
        try:
            connection = raw.driver_connection
            if not isinstance(connection, sqlite3.Connection) or sqlite_head.has_schema(connection):
                return False
            log.info(
                "creating the schema at revision %s",
                HEAD_REVISION,
                extra={"action": "db.upgrade", "via": "head script"},
            )
            try:
                sqlite_head.load(connection, text_)
            except sqlite3.Error as exc:
                # Another process made the schema since the check: the migrations take
                # it from there (it is at head, so they do nothing).
                if sqlite_head.has_schema(connection):
                    return False
                raise StoreError(f"cannot create the schema from the head script: {exc}") from exc
        finally:
            raw.close()
        return True

    def ensure_current(self, *, auto_upgrade: bool = False) -> None:
        """Stop with a clear message when the schema is not the one this code expects."""
        current, head = self.current_revision(), self.head_revision()
        if current == head:
            return
        if auto_upgrade:
            self.upgrade()
            return
        if current is None:
            raise SchemaOutOfDate(
                "the database has no fleetcron schema; "
                "run `fleetcron init` or `fleetcron db upgrade`"
            )
        raise SchemaOutOfDate(
            f"the database schema is at revision {current}, this fleetcron needs {head}; "
            "run `fleetcron db upgrade`"
        )

    def dispose(self) -> None:
        self.engine.dispose()


def count_selected(db: Database, ids: Any) -> int:
    """How many rows the id query ``ids`` selects (a read)."""
    with db.read() as session:
        return session.scalar(select(func.count()).select_from(ids.subquery())) or 0


@dataclass(frozen=True)
class Pruned:
    """What one prune call did: how many rows it deleted (or would, for a dry run), and
    whether it got to the end (False: it stopped at its time budget; call again)."""

    count: int
    complete: bool = True


def delete_in_rounds(
    db: Database,
    model: Any,
    ids: Any,
    batch: int,
    more: Callable[[], bool] | None,
    *,
    delete_chunk: Callable[[Session, list[int]], None] | None = None,
) -> Pruned:
    """Delete the rows of ``model`` whose ids ``ids`` selects, ``batch`` per transaction
    (each short, so other writers interleave); before each chunk after the first, ``more()``
    says whether the caller's budget allows another (None: no budget; the first always
    runs, so every round makes progress). Returns the rows deleted and whether none is
    left. ``delete_chunk(session, ids)`` deletes one chunk in its transaction (default: a
    plain ``DELETE``), for rows whose removal changes other rows. Retention's one way of
    deleting runs and audit events."""
    removed = 0
    while True:
        if removed and more is not None and not more():
            return Pruned(removed, complete=False)
        with db.session() as session:
            chunk = list(session.scalars(ids.limit(batch)))
            if chunk:
                if delete_chunk is None:
                    session.execute(delete(model).where(model.id.in_(chunk)))
                else:
                    delete_chunk(session, chunk)
        removed += len(chunk)
        if len(chunk) < batch:
            return Pruned(removed)
