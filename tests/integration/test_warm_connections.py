"""The connections kept between tests' engines (fixtures/warm_connections.py) come back as
a new session finds them, and the reset of a reused database spares only idle ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError

from fixtures import warm_connections
from fixtures.pg_reuse import Reuse
from fixtures.postgres import PostgresServer
from fixtures.warm_connections import WARM, WarmConnections

pytestmark = pytest.mark.postgres

LOCK = 4242


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database("t_warm")
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id serial PRIMARY KEY, name text)")
    yield url
    postgres_server.drop_database("t_warm")


@pytest.fixture
def warm(database: str) -> Iterator[WarmConnections]:
    stash = WarmConnections()
    stash.keep("t_warm")
    yield stash
    stash.close()


def _conninfo(url: str) -> str:
    parsed = make_url(url)
    return f"host={parsed.host} port={parsed.port} user={parsed.username} dbname={parsed.database}"


def _engine(stash: WarmConnections, url: str) -> Engine:
    return stash.attach(
        create_engine(url, connect_args={"application_name": "fresh", "options": "-c timezone=UTC"})
    )


def _dirty(conn: Connection) -> None:
    """Use a session as a test might, and commit: psycopg keeps the statement it prepared
    (a rollback would make it forget them)."""
    conn.execute(text("SET application_name = 'dirty'"))
    conn.execute(text("SET statement_timeout = 1234"))
    conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": LOCK})
    conn.execute(text("CREATE TEMP TABLE scratch (x int)"))
    conn.execute(text("LISTEN news"))
    for _ in range(6):  # psycopg prepares a statement from its fifth run on
        conn.execute(text("SELECT count(*) FROM items WHERE name = :n"), {"n": "a"})
    conn.commit()


def leftovers(conn: Connection, url: str) -> list[str]:
    """What a new session would not find on ``conn``."""
    found: list[str] = []
    name, timeout, zone = conn.execute(
        text(
            "SELECT current_setting('application_name'), current_setting('statement_timeout'),"
            " current_setting('timezone')"
        )
    ).one()
    if (name, timeout, zone) != ("fresh", "0", "UTC"):
        found.append(f"settings {name}, {timeout}, {zone}")
    if conn.execute(text("SELECT to_regclass('pg_temp.scratch')")).scalar_one() is not None:
        found.append("temporary table")
    if conn.execute(text("SELECT count(*) FROM pg_listening_channels()")).scalar_one():
        found.append("listening")
    for _ in range(6):
        conn.execute(text("SELECT count(*) FROM items WHERE name = :n"), {"n": "a"})
    conn.commit()
    with psycopg.connect(_conninfo(url), autocommit=True) as other:
        if other.execute("SELECT pg_try_advisory_lock(%s)", (LOCK,)).fetchone() != (True,):
            found.append("advisory lock held")
    return found


def _backend(conn: Connection) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _rounds(stash: WarmConnections, database: str) -> list[str]:
    """One kept connection used in turn as tests use theirs: what each use found that a
    new session would not. The connection goes back to the stash when its pool closes it:
    an invalidated one (as the pool does past its overflow) is taken again by the same
    engine, with no first-connect work of the engine's in between, and at the end the
    engine's dispose hands it to a new engine."""
    engine = _engine(stash, database)
    with engine.connect() as conn:
        pid = _backend(conn)  # a short first use: psycopg prepares nothing
        conn.invalidate()
    found: list[str] = []
    try:
        for _ in range(3):
            with engine.connect() as conn:
                assert _backend(conn) == pid  # the same server process: no new connection
                found += leftovers(conn, database)
                _dirty(conn)
                conn.invalidate()
    finally:
        engine.dispose()
    following = _engine(stash, database)
    try:
        with following.connect() as conn:
            assert _backend(conn) == pid
            found += leftovers(conn, database)
    finally:
        following.dispose()
    return found


def test_a_connection_comes_back_to_the_next_engine_as_a_new_session_finds_it(
    warm: WarmConnections, database: str
) -> None:
    assert _rounds(warm, database) == []


def test_negative_control_a_reset_by_discard_all_breaks_a_later_use(
    warm: WarmConnections, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DISCARD ALL`` also drops the prepared statements, which psycopg notices only the
    first time it sees the command: here that was after the first use, which prepared
    nothing, so from the second reset on it names statements the server dropped."""
    monkeypatch.setattr(warm_connections, "RESET", "DISCARD ALL")
    with pytest.raises(ProgrammingError, match="prepared statement"):
        _rounds(warm, database)


def test_negative_control_a_connection_kept_without_its_reset_shows_what_it_held(
    warm: WarmConnections, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def kept_as_is(self: WarmConnections, conn: Any) -> bool:
        self._idle[conn._fleetcron_key].append(conn)
        return True

    monkeypatch.setattr(WarmConnections, "_give_back", kept_as_is)
    engine = _engine(warm, database)
    with engine.connect() as conn:
        _dirty(conn)
    engine.dispose()
    following = _engine(warm, database)
    with following.connect() as conn:
        found = leftovers(conn, database)
    following.dispose()
    assert "settings dirty, 1234ms, UTC" in found
    assert {"temporary table", "listening", "advisory lock held"} <= set(found)


def test_connections_to_a_database_not_kept_are_closed(
    postgres_server: PostgresServer, database: str
) -> None:
    stash = WarmConnections()  # keeps no database: t_warm could be a template
    engine = _engine(stash, database)
    with engine.connect() as conn:
        pid = _backend(conn)
        _dirty(conn)
    engine.dispose()
    assert stash.idle_pids() == set()
    with psycopg.connect(postgres_server.conninfo(), autocommit=True) as conn:
        alive = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        assert alive.fetchone() == (0,)


def test_a_reset_ends_a_left_session_and_spares_the_idle_kept_ones(
    postgres_server: PostgresServer, database: str
) -> None:
    reuse = Reuse(postgres_server, "t_warm_reuse")
    try:
        url = reuse.fresh("t_warm")
        engine = _engine(WARM, url)
        with engine.connect() as conn:
            kept = _backend(conn)
        engine.dispose()  # idle in the process's stash
        left = psycopg.connect(_conninfo(url), autocommit=True)
        assert reuse.fresh("t_warm") == url
        with psycopg.connect(postgres_server.conninfo(), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)",
                ([kept, left.info.backend_pid],),
            ).fetchall()
        assert rows == [(kept,)]
        left.close()
    finally:
        reuse.close()
    assert kept not in WARM.idle_pids()  # dropping the copy closed its kept connections


def _terminated_then_taken(stash: WarmConnections, database: str, server: PostgresServer) -> int:
    """Keep a connection, end its session from the server, and open a new engine; the
    new engine's server process."""
    engine = _engine(stash, database)
    with engine.connect() as conn:
        kept = _backend(conn)
    engine.dispose()
    with psycopg.connect(server.conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (kept,))
    following = _engine(stash, database)
    try:
        with following.connect() as conn:
            return _backend(conn)
    finally:
        following.dispose()


def test_a_kept_connection_whose_session_a_test_ended_is_not_handed_out(
    warm: WarmConnections, database: str, postgres_server: PostgresServer
) -> None:
    assert _terminated_then_taken(warm, database, postgres_server) > 0  # connected anew


def test_negative_control_without_asking_the_server_the_ended_session_is_handed_out(
    warm: WarmConnections,
    database: str,
    postgres_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(warm_connections, "_alive", lambda conn: not conn.closed)
    with pytest.raises(OperationalError, match="terminating connection"):
        _terminated_then_taken(warm, database, postgres_server)
