"""A new SQLite database gets the newest schema in one script, not by replaying migrations.

Replaying the 42 Alembic migrations on an empty SQLite file costs about 0.35-0.45 s of CPU
(loading each migration module, rebuilding tables in batch mode), the larger part of
``fleetcron init``. ``sqlite_head.sql``, shipped beside this module, holds what those
migrations leave behind: every table with its rows (the default project, the cluster
settings, ``alembic_version``, the AUTOINCREMENT counters), the full-text index built,
then every index, view and trigger, in the order SQLite recorded them. :func:`Database.upgrade
<fleetcron.store.db.Database.upgrade>` loads it into an empty file in one transaction when
the script is at the code's head revision, and replays the migrations otherwise (an
existing database, PostgreSQL, or a script left behind by a new migration).

The script is rendered from a freshly migrated database by :func:`render`
(``python -m fleetcron.store.sqlite_head_build > src/fleetcron/store/sqlite_head.sql``; the times
the migrations write into their rows become ``CURRENT_TIMESTAMP``, the loading time). A test
checks that a loaded database equals a migrated one, row for row, the full-text index's
own tables included; it compares contents, not the script's text, because Alembic's batch
mode writes a rebuilt table's constraints in an order that changes between interpreters.
The same idea as a framework's schema file (Rails' ``schema.rb``): migrations stay the way
an existing database moves; a new one starts from their result.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib.resources import files

__all__ = [
    "Window",
    "has_schema",
    "load",
    "now",
    "render",
    "script",
    "script_revision",
]

#: The script's first line names the revision it holds.
_HEADER = "-- fleetcron SQLite schema at revision {revision} (see store/sqlite_head.py)"
_REVISION = re.compile(r"^-- fleetcron SQLite schema at revision (\S+) ")
#: Objects created after every table has its rows, so that no trigger fires on them.
_LATER_KINDS = ("index", "view", "trigger")
_FTS5 = re.compile(r"^CREATE VIRTUAL TABLE \S+ USING fts5\(", re.IGNORECASE)
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def script() -> str:
    """The shipped script's text."""
    return files("fleetcron.store").joinpath("sqlite_head.sql").read_text(encoding="utf-8")


def script_revision(text: str) -> str | None:
    """The revision named in the script's first line, or None if it names none."""
    found = _REVISION.match(text)
    return found.group(1) if found else None


def has_schema(connection: sqlite3.Connection) -> bool:
    """Whether the database holds any table, index, view or trigger."""
    return connection.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None


def load(connection: sqlite3.Connection, text: str) -> None:
    """Run the script on ``connection`` (an empty database) in one transaction: all of it
    or, on any error, none of it."""
    try:
        connection.executescript(f"BEGIN IMMEDIATE;\n{text}\nCOMMIT;")
    except sqlite3.Error:
        if connection.in_transaction:
            connection.rollback()
        raise


@dataclass(frozen=True)
class Window:
    """When the migrations ran, as SQLite's ``CURRENT_TIMESTAMP`` reads (UTC,
    ``YYYY-MM-DD HH:MM:SS``): a row's time inside it is the time the row was made, and the
    script makes it ``CURRENT_TIMESTAMP`` again, the time the script is loaded."""

    start: str
    end: str

    def holds(self, value: object) -> bool:
        return (
            isinstance(value, str)
            and _TIMESTAMP.match(value) is not None
            and (self.start <= value <= self.end)
        )


def now(connection: sqlite3.Connection) -> str:
    """SQLite's ``CURRENT_TIMESTAMP`` now."""
    (value,) = connection.execute("SELECT CURRENT_TIMESTAMP").fetchone()
    return str(value)


def render(connection: sqlite3.Connection, revision: str, migrated: Window) -> str:
    """The script that rebuilds ``connection``'s database, migrated during ``migrated``:
    its tables and their rows, then its indexes, views and triggers. Tables SQLite makes by
    itself (``sqlite_*``, a full-text index's shadow tables) are left to SQLite."""
    listed = connection.execute("SELECT name FROM pragma_table_list WHERE type = 'shadow'")
    shadow = {name for (name,) in listed}
    objects = connection.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
    ).fetchall()
    tables = [
        (name, sql)
        for kind, name, sql in objects
        if kind == "table" and name not in shadow and not name.startswith("sqlite_")
    ]
    lines = [_HEADER.format(revision=revision)]
    for name, sql in tables:
        lines.append(f"{sql};")
        lines.extend(_inserts(connection, name, migrated))
    if any(name == "sqlite_sequence" for _, name, _ in objects):
        # Inserting a row with its id has already counted it: the counters are written whole.
        lines.append("DELETE FROM sqlite_sequence;")
        lines.extend(_inserts(connection, "sqlite_sequence", migrated))
    # A full-text index is built from its content table once the rows are in.
    lines.extend(
        f"INSERT INTO {_quote_name(name)}({_quote_name(name)}) VALUES ('rebuild');"
        for name, sql in tables
        if _FTS5.match(sql)
    )
    lines.extend(f"{sql};" for kind, _, sql in objects if kind in _LATER_KINDS)
    return "\n".join(lines) + "\n"


def _inserts(connection: sqlite3.Connection, table: str, migrated: Window) -> list[str]:
    quoted = _quote_name(table)
    rows = connection.execute(f"SELECT * FROM {quoted} ORDER BY rowid").fetchall()
    values = (", ".join(_literal(connection, v, migrated) for v in row) for row in rows)
    return [f"INSERT INTO {quoted} VALUES ({one});" for one in values]


def _quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(connection: sqlite3.Connection, value: object, migrated: Window) -> str:
    """``value`` as SQLite writes it in SQL (``quote()``): exact for every storage class;
    a time the migrations wrote, ``CURRENT_TIMESTAMP``."""
    if migrated.holds(value):
        return "CURRENT_TIMESTAMP"
    (literal,) = connection.execute("SELECT quote(?)", (value,)).fetchone()
    return str(literal)
