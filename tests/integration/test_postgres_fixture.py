"""The PostgreSQL fixtures start a real server and give each test an isolated database."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from fixtures import pg_reuse
from fixtures.pg_reuse import Reuse
from fixtures.postgres import PostgresServer

pytestmark = pytest.mark.postgres


def _conninfo(url: str) -> str:
    parsed = make_url(url)
    return f"host={parsed.host} port={parsed.port} user={parsed.username} dbname={parsed.database}"


def _tables(url: str) -> set[str]:
    with psycopg.connect(_conninfo(url)) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {row[0] for row in rows}


@pytest.fixture
def second_postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database("t_second_db")
    try:
        yield url
    finally:
        postgres_server.drop_database("t_second_db")


def test_the_server_answers_queries_on_loopback_as_the_fleetcron_superuser(
    postgres_server: PostgresServer,
) -> None:
    with psycopg.connect(postgres_server.conninfo()) as conn:
        row = conn.execute(
            "SELECT current_user, current_setting('fsync'),"
            " current_setting('max_connections')::int, inet_server_addr()::text"
        ).fetchone()
    assert row == ("fleetcron", "off", 300, "127.0.0.1/32")


def test_the_url_points_at_an_existing_empty_database_on_the_server(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    url = make_url(postgres_url)
    assert (url.drivername, url.host, url.port) == (
        "postgresql+psycopg",
        "127.0.0.1",
        postgres_server.port,
    )
    assert _tables(postgres_url) == set()


def test_a_table_created_in_one_test_database_is_absent_from_another(
    postgres_url: str, second_postgres_url: str
) -> None:
    assert make_url(postgres_url).database != make_url(second_postgres_url).database
    with psycopg.connect(_conninfo(postgres_url)) as conn:
        conn.execute("CREATE TABLE only_here (id int)")

    assert _tables(postgres_url) == {"only_here"}
    assert _tables(second_postgres_url) == set()


def test_dropping_a_database_disconnects_its_open_sessions(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database("t_dropped_db")
    with psycopg.connect(_conninfo(url), autocommit=True) as lingering:
        postgres_server.drop_database("t_dropped_db")
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT 1")

    with psycopg.connect(postgres_server.conninfo()) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname = 't_dropped_db'"
        ).fetchone()
    assert row == (0,)


def test_a_restart_keeps_committed_rows_and_the_system_identifier(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    identifier_before = postgres_server.system_identifier()
    with psycopg.connect(_conninfo(postgres_url)) as conn:
        conn.execute("CREATE TABLE survivors (name text)")
        conn.execute("INSERT INTO survivors VALUES ('kept')")

    postgres_server.restart()

    with psycopg.connect(_conninfo(postgres_url)) as conn:
        rows = conn.execute("SELECT name FROM survivors").fetchall()
    assert rows == [("kept",)]
    assert postgres_server.system_identifier() == identifier_before


def test_a_restart_cuts_off_connections_that_were_open(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    with psycopg.connect(_conninfo(postgres_url), autocommit=True) as conn:
        postgres_server.restart()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")


def test_the_database_name_must_be_a_plain_lowercase_identifier(
    postgres_server: PostgresServer,
) -> None:
    with pytest.raises(ValueError, match="Bad test database name"):
        postgres_server.create_database('x"; DROP DATABASE postgres; --')


@pytest.fixture
def source(postgres_server: PostgresServer) -> Iterator[str]:
    """A small source database: a table with a serial id and a trigger, two rows."""
    postgres_server.create_database("t_reuse_source")
    with psycopg.connect(postgres_server.conninfo("t_reuse_source"), autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL)")
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'append-only'; END $$"
        )
        conn.execute("INSERT INTO items (name) VALUES ('a'), ('b')")
        conn.execute(
            "CREATE TRIGGER append_only BEFORE DELETE ON items"
            " FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
    try:
        yield "t_reuse_source"
    finally:
        postgres_server.drop_database("t_reuse_source")


@pytest.fixture
def reuse(postgres_server: PostgresServer) -> Iterator[Reuse]:
    made = Reuse(postgres_server, "t_reuse")
    yield made
    made.close()


def _items(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(_conninfo(url)) as conn:
        return conn.execute("SELECT * FROM items ORDER BY id").fetchall()


def _next_id(url: str, name: str) -> object:
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        row = conn.execute("INSERT INTO items (name) VALUES (%s) RETURNING id", (name,)).fetchone()
    assert row is not None
    return row[0]


def test_a_reused_database_holds_exactly_the_sources_rows_and_ids_again(
    reuse: Reuse, source: str
) -> None:
    first = reuse.fresh(source)
    assert _items(first) == [(1, "a"), (2, "b")]
    assert _next_id(first, "from the first test") == 3
    with psycopg.connect(_conninfo(first), autocommit=True) as conn:
        conn.execute("UPDATE items SET name = 'changed' WHERE id = 1")
    # A session the first test leaves open is ended, not written through.
    leftover = psycopg.connect(_conninfo(first), autocommit=True)
    second = reuse.fresh(source)
    assert second == first  # the same database, not a new one
    assert _backend_gone(leftover)
    leftover.close()
    # Rows and the sequence are the source's again, through its append-only trigger.
    assert _items(second) == [(1, "a"), (2, "b")]
    assert _next_id(second, "from the second test") == 3


def _backend_gone(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def test_a_database_whose_schema_a_test_changed_is_made_again_from_the_source(
    reuse: Reuse, source: str
) -> None:
    first = reuse.fresh(source)
    with psycopg.connect(_conninfo(first), autocommit=True) as conn:
        conn.execute("ALTER TABLE items ADD COLUMN extra int")
    second = reuse.fresh(source)
    with psycopg.connect(_conninfo(second)) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'items'"
            " ORDER BY ordinal_position"
        ).fetchall()
    assert columns == [("id",), ("name",)]
    assert _items(second) == [(1, "a"), (2, "b")]


def test_negative_control_without_the_reset_the_previous_tests_rows_remain(
    reuse: Reuse, source: str
) -> None:
    """The checks above can fail: the same database handed out without the reset still
    holds what a test wrote."""
    first = reuse.fresh(source)
    _next_id(first, "left behind")
    assert _items(first) != [(1, "a"), (2, "b")]


def _planner_state(url: str) -> tuple[int, int]:
    """``items``' column statistics (how many) and its size estimate in pages."""
    with psycopg.connect(_conninfo(url)) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM pg_statistic WHERE starelid = 'items'::regclass),"
            " (SELECT relpages FROM pg_class WHERE oid = 'items'::regclass)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_reused_database_keeps_none_of_the_planners_view_an_earlier_test_left(
    reuse: Reuse, source: str
) -> None:
    """A test that filled a table and analyzed it leaves statistics and a size estimate
    (the precondition: the check below could fail); the next test's copy has neither, as
    a new copy of a never-analyzed source has none."""
    first = reuse.fresh(source)
    with psycopg.connect(_conninfo(first), autocommit=True) as conn:
        conn.execute("INSERT INTO items (name) SELECT 'n' || i FROM generate_series(1, 5000) i")
        conn.execute("ANALYZE items")
    statistics, pages = _planner_state(first)
    assert statistics > 0 and pages > 0
    assert _planner_state(reuse.fresh(source)) == (0, 0)


@pytest.fixture
def family(postgres_server: PostgresServer) -> Iterator[str]:
    """A source with a parent table, a child table referencing it, and an unrelated one."""
    postgres_server.create_database("t_reuse_family")
    with psycopg.connect(postgres_server.conninfo("t_reuse_family"), autocommit=True) as conn:
        conn.execute("CREATE TABLE parent (id serial PRIMARY KEY, name text NOT NULL)")
        conn.execute("CREATE TABLE child (id serial PRIMARY KEY, parent_id int REFERENCES parent)")
        conn.execute("CREATE TABLE other (id serial PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO parent (name) VALUES ('p1'), ('p2')")
        conn.execute("INSERT INTO child (parent_id) VALUES (1), (2)")
        conn.execute("INSERT INTO other (name) VALUES ('o1'), ('o2')")
    try:
        yield "t_reuse_family"
    finally:
        postgres_server.drop_database("t_reuse_family")


FAMILY = ("parent", "child", "other")


def _family(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(_conninfo(url)) as conn:
        return {
            table: conn.execute(
                sql.SQL("SELECT * FROM {} ORDER BY id").format(sql.Identifier(table))
            ).fetchall()
            for table in FAMILY
        }


def _files(url: str) -> dict[str, int]:
    """Each table's file node: a ``TRUNCATE`` gives the table a new one."""
    with psycopg.connect(_conninfo(url)) as conn:
        rows = conn.execute(
            "SELECT relname, pg_relation_filenode(oid) FROM pg_class WHERE relname = ANY(%s)",
            (list(FAMILY),),
        ).fetchall()
    return {str(name): int(str(node)) for name, node in rows}


Connection = psycopg.Connection[tuple[object, ...]]


def _rolled_back_insert(conn: Connection) -> None:
    with contextlib.suppress(_Undone), conn.transaction():
        conn.execute("INSERT INTO other (name) SELECT 'n' || i FROM generate_series(1, 500) i")
        raise _Undone


class _Undone(Exception):
    """Rolls the transaction back."""


CHANGES: dict[str, Callable[[Connection], object]] = {
    "update": lambda c: c.execute("UPDATE other SET name = 'x' WHERE id = 1"),
    "delete": lambda c: c.execute("DELETE FROM other WHERE id = 2"),
    "delete and insert, same count": lambda c: c.execute(
        "DELETE FROM other WHERE id = 2; INSERT INTO other (id, name) VALUES (2, 'o2')"
    ),
    "rolled back insert": _rolled_back_insert,
    "analyze only": lambda c: c.execute("ANALYZE other"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_reset_rewrites_the_tables_a_test_changed_and_those_referencing_them_only(
    reuse: Reuse, family: str, change: str
) -> None:
    """A first test leaves the copy as the reset wrote it; a second one changes ``other``
    (each kind of change, including those that leave its rows as they were: a rolled-back
    insert grows its file, an ``ANALYZE`` sets its estimates) and ``parent``: the next
    reset rewrites those two and ``child`` (which references ``parent``), whose contents
    are the source's again, and leaves nothing else touched."""
    url = reuse.fresh(family)
    url = reuse.fresh(family)  # a reset copy: what each table holds is known from here on
    source = _family(url)
    before = _files(url)
    assert reuse.fresh(family) == url
    assert _files(url) == before, "a reset after a test that changed nothing rewrote a table"
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        CHANGES[change](conn)
        conn.execute("UPDATE parent SET name = 'changed' WHERE id = 1")

    assert reuse.fresh(family) == url
    after = _files(url)
    assert _family(url) == source
    assert {t for t in FAMILY if after[t] != before[t]} == set(FAMILY)


def test_a_reset_leaves_a_table_nobody_changed_and_its_dependents_alone(
    reuse: Reuse, family: str
) -> None:
    url = reuse.fresh(family)
    url = reuse.fresh(family)
    before = _files(url)
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        conn.execute("UPDATE child SET parent_id = 1 WHERE id = 2")
    assert reuse.fresh(family) == url
    after = _files(url)
    assert {t for t in FAMILY if after[t] != before[t]} == {"child"}
    assert _family(url)["child"] == [(1, 1), (2, 2)]


def test_negative_control_a_change_the_reset_does_not_see_stays(
    reuse: Reuse, family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above can fail: a reset told that nothing changed leaves the change."""
    url = reuse.fresh(family)
    url = reuse.fresh(family)
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        conn.execute("UPDATE other SET name = 'x' WHERE id = 1")
    monkeypatch.setattr(pg_reuse, "_changed", lambda *_: set())
    assert reuse.fresh(family) == url
    assert _family(url)["other"][0] == (1, "x")
