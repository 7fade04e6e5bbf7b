"""A new SQLite database loaded from the head script equals one the migrations built.

The comparison is of what SQLite holds, not of the script's text: Alembic's batch mode
writes a rebuilt table's constraints (and some indexes) in an order that changes from one
interpreter to the next, so two migrated files differ in text and not in meaning. Each
object's SQL is compared as the set of its lines, each table's columns in order, and every
row of every table (the full-text index's own tables and ``sqlite_sequence`` included),
with the times the migrations or the script wrote checked to fall in their run and then
set aside.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from fleetcron.errors import StoreError
from fleetcron.store import sqlite_head
from fleetcron.store.db import HEAD_REVISION, Database

REGENERATE = (
    "the shipped head script differs from what the migrations build: regenerate it with "
    "`python -m fleetcron.store.sqlite_head_build > src/fleetcron/store/sqlite_head.sql`"
)

Snapshot = dict[str, object]


def snapshot(path: Path, window: sqlite_head.Window) -> Snapshot:
    """What the SQLite file at ``path`` holds, in a form independent of statement order."""
    with closing(sqlite3.connect(path)) as connection:
        objects = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        tables = [name for kind, name, _, _ in objects if kind == "table"]
        columns = {
            name: connection.execute(
                "SELECT * FROM pragma_table_xinfo(?) ORDER BY cid", (name,)
            ).fetchall()
            for name in tables
        }
        rows = {name: _rows(connection, name, window) for name in tables}
    schema = [(kind, name, table, _lines(sql)) for kind, name, table, sql in objects]
    return {"schema": schema, "columns": columns, "rows": rows}


def _lines(sql: str | None) -> list[str]:
    if sql is None:
        return []
    return sorted(line.strip().rstrip(",").strip() for line in sql.splitlines())


def _rows(
    connection: sqlite3.Connection, table: str, window: sqlite_head.Window
) -> list[tuple[object, ...]]:
    rows = connection.execute(f'SELECT * FROM "{table}"').fetchall()
    kept = [tuple("<run time>" if window.holds(value) else value for value in row) for row in rows]
    return sorted(kept, key=repr)


def built(path: Path, *, from_script: bool) -> Snapshot:
    """A new database at ``path`` brought to head by the script or by the migrations."""
    with closing(sqlite3.connect(path)) as clock:
        start = sqlite_head.now(clock)
    upgrade(path, from_script=from_script)
    return snapshot(path, _until_now(path, start))


def loaded(path: Path) -> Snapshot:
    return built(path, from_script=True)


def migrated(path: Path) -> Snapshot:
    return built(path, from_script=False)


def upgrade(path: Path, *, from_script: bool) -> None:
    database = Database(f"sqlite:///{path}")
    try:
        database.upgrade(from_script=from_script)
    finally:
        database.dispose()


def _until_now(path: Path, start: str) -> sqlite_head.Window:
    with closing(sqlite3.connect(path)) as clock:
        return sqlite_head.Window(start, sqlite_head.now(clock))


def test_a_database_loaded_from_the_script_equals_a_migrated_one(tmp_path: Path) -> None:
    assert loaded(tmp_path / "loaded.db") == migrated(tmp_path / "migrated.db"), REGENERATE


def test_the_script_is_at_the_head_revision() -> None:
    assert sqlite_head.script_revision(sqlite_head.script()) == HEAD_REVISION, REGENERATE


def _drop_line(text: str, needle: str) -> str:
    lines = text.splitlines()
    kept = [line for line in lines if needle not in line]
    assert len(kept) == len(lines) - 1, f"expected one line holding {needle!r}"
    return "\n".join(kept)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda t: _drop_line(t, "CREATE INDEX ix_runs_target_started"), id="index"),
        pytest.param(lambda t: _drop_line(t, 'INSERT INTO "cluster_settings"'), id="row"),
        pytest.param(lambda t: _drop_line(t, "CONSTRAINT ck_jobs_overlap"), id="constraint"),
        pytest.param(lambda t: t.replace("'default'", "'Default'", 1), id="value"),
    ],
)
def test_negative_control_a_script_missing_an_index_a_row_or_a_constraint_is_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str]
) -> None:
    monkeypatch.setattr(sqlite_head, "script", lambda: change(_shipped()))
    assert loaded(tmp_path / "loaded.db") != migrated(tmp_path / "migrated.db")


def _shipped() -> str:
    return (Path(sqlite_head.__file__).parent / "sqlite_head.sql").read_text(encoding="utf-8")


def test_an_empty_file_is_created_from_the_script_without_a_migration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fleetcron.store.db")
    upgrade(tmp_path / "new.db", from_script=True)
    via = [getattr(record, "via", None) for record in caplog.records]
    assert via == ["head script"], caplog.text
    assert Database(f"sqlite:///{tmp_path / 'new.db'}").current_revision() == HEAD_REVISION


def test_a_script_behind_the_code_is_not_used_the_migrations_run_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    behind = _shipped().replace(f"at revision {HEAD_REVISION} ", "at revision 0001 ", 1)
    monkeypatch.setattr(sqlite_head, "script", lambda: behind)
    caplog.set_level(logging.INFO, logger="fleetcron.store.db")
    upgrade(tmp_path / "new.db", from_script=True)
    actions = [getattr(record, "action", None) for record in caplog.records]
    assert "db.head_script_stale" in actions, caplog.text
    assert not [r for r in caplog.records if getattr(r, "via", None) == "head script"]
    assert Database(f"sqlite:///{tmp_path / 'new.db'}").current_revision() == HEAD_REVISION


def test_a_script_that_fails_halfway_leaves_the_file_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sqlite_head, "script", lambda: _shipped() + "\nCREATE TABLE projects (x);\n"
    )
    with pytest.raises(StoreError, match="already exists"):
        upgrade(tmp_path / "new.db", from_script=True)
    with closing(sqlite3.connect(tmp_path / "new.db")) as connection:
        assert connection.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)


def test_two_processes_making_one_new_file_at_once_leave_one_schema_and_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other one loads the script between this one's emptiness check and its load:
    this one's script fails on the first table and the migrations find the file at head."""
    path = tmp_path / "new.db"
    original = sqlite_head.load

    def after_the_other(connection: sqlite3.Connection, text: str) -> None:
        with closing(sqlite3.connect(path)) as other:
            original(other, text)
        original(connection, text)

    monkeypatch.setattr(sqlite_head, "load", after_the_other)
    upgrade(path, from_script=True)
    monkeypatch.setattr(sqlite_head, "load", original)
    assert loaded(tmp_path / "alone.db") == snapshot(path, _until_now(path, "0000")), (
        "the file made by two processes differs from one made by one"
    )


def test_a_database_with_a_schema_is_migrated_not_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE unrelated (x)")
    caplog.set_level(logging.INFO, logger="fleetcron.store.db")
    upgrade(path, from_script=True)
    assert not [r for r in caplog.records if getattr(r, "via", None) == "head script"]
    assert Database(f"sqlite:///{path}").current_revision() == HEAD_REVISION
