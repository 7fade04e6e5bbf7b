"""Connecting to the database, migrating it, and checking its schema is current.

SQLite (the embedded default) runs in WAL mode with a busy timeout and foreign keys
on; PostgreSQL is used as is. Migrations are Alembic's, shipped inside the package.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, delete, event, func, inspect, select, text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from fleetcron.errors import Conflict, InvalidInput, SchemaOutOfDate, StoreError

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

#: The newest migration; a test checks it is Alembic's head. Kept as a constant so that
#: every CLI command can check the schema without loading Alembic and the migrations.

HEAD_REVISION = "0026"

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


def create_db_engine(url: str) -> Engine:
    """Create an engine for the URL with fleetcron's connection settings."""
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
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=20,
        connect_args={"options": "-c timezone=UTC"},
    )


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


class Database:
    """An engine and a session factory; the one way the rest of fleetcron reaches the data."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_db_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # The same pool; on SQLite its transactions begin without the writer lock.
        self._read_sessions = sessionmaker(
            self.engine.execution_options(**{READ_ONLY_OPTION: True}), expire_on_commit=False
        )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

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

    def upgrade(self) -> None:
        """Migrate the schema to the newest revision."""
        log.info("migrating database to head", extra={"action": "db.upgrade"})
        from alembic import command

        command.upgrade(alembic_config(engine=self.engine), "head")

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
