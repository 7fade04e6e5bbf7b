"""``Database.read()`` does not take SQLite's writer lock: a read proceeds while another
connection holds it, and (the negative control) a write session still waits for it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from fleetcron.errors import StoreError
from fleetcron.store import db as db_module
from fleetcron.store.db import Database


@pytest.fixture
def locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    """A database with one committed row, whose writer lock another connection holds
    (with an uncommitted row of its own). The busy timeout is short, so that a session
    waiting for the lock gives up at once instead of after ten seconds."""
    monkeypatch.setattr(db_module, "SQLITE_BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "lock.db"
    db = Database(f"sqlite:///{path}")
    with db.session() as session:
        session.execute(text("CREATE TABLE t (x INTEGER)"))
        session.execute(text("INSERT INTO t VALUES (1)"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES (2)")
    try:
        yield db
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        db.dispose()


def test_a_read_proceeds_while_another_connection_holds_the_writer_lock(
    locked: Database,
) -> None:
    # It sees the committed row, not the holder's uncommitted one.
    with locked.read() as session:
        assert session.execute(text("SELECT x FROM t ORDER BY x")).scalars().all() == [1]


def test_negative_control_a_write_session_waits_for_the_writer_lock(locked: Database) -> None:
    with pytest.raises(StoreError, match="database is locked"), locked.session() as session:
        session.execute(text("SELECT x FROM t"))
