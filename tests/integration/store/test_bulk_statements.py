"""Many rows and many values in one statement whose text does not grow with them on
PostgreSQL (store/bulk.py), with the same rows and answers as SQLAlchemy's own forms."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import Connection, Engine, Table, event, insert, select, text
from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.core.statuses import RunStatus
from fleetcron.store.bulk import RowsUpdate, among, insert_returning, update_rows
from fleetcron.store.schema import AuditEvent, Run

AUDIT = cast(Table, AuditEvent.__table__)
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _entries(count: int, start: int) -> list[dict[str, Any]]:
    return [
        {
            "at": AT + timedelta(seconds=start + i),
            "actor": f"user{start + i}",
            "action": "test.bulk",
            "success": i % 2 == 0,
            "target_name": None if i % 3 else f"t{start + i}",
            "detail": {"n": start + i},
        }
        for i in range(count)
    ]


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """Every statement text ``engine`` sends while the block runs."""
    sent: list[str] = []

    def record(*args: Any) -> None:
        sent.append(args[2])

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _insert_texts(app: App, write: Callable[[Session, list[dict[str, Any]]], Any]) -> set[str]:
    texts: set[str] = set()
    for count, start in ((3, 0), (300, 3)):
        with app.db.session() as session, statements(app.db.engine) as sent:
            write(session, _entries(count, start))
        texts.update(text for text in sent if "INSERT" in text)
    return texts


def test_insert_returning_writes_every_row_and_returns_each_ones_columns(app: App) -> None:
    with app.db.session() as session:
        returned = insert_returning(
            session.connection(), AUDIT, _entries(250, 0), ("id", "actor", "at")
        )
    assert len(returned) == 250
    with app.db.read() as session:
        stored = {
            row.id: (row.actor, row.at, row.detail)
            for row in session.execute(
                select(AuditEvent).where(AuditEvent.action == "test.bulk")
            ).scalars()
        }
    assert {rid: (actor, at) for rid, actor, at in returned} == {
        rid: (actor, at) for rid, (actor, at, _) in stored.items()
    }
    assert sorted(detail["n"] for _, _, detail in stored.values()) == list(range(250))


def test_on_postgresql_the_insert_is_the_same_text_for_3_rows_and_for_300(app: App) -> None:
    texts = _insert_texts(
        app, lambda session, rows: insert_returning(session.connection(), AUDIT, rows, ("id",))
    )
    if app.db.dialect == "postgresql":
        assert len(texts) == 1, texts
        assert "unnest" in next(iter(texts))
    else:  # SQLite: SQLAlchemy's multi-row VALUES, one text per page size
        assert len(texts) == 2


def test_negative_control_sqlalchemys_own_insert_grows_with_the_rows(app: App) -> None:
    texts = _insert_texts(
        app,
        lambda session, rows: session.connection().execute(
            insert(AUDIT).returning(AUDIT.c.id), rows
        ),
    )
    assert len(texts) == 2
    assert max(map(len, texts)) > 20 * min(map(len, texts))


def test_among_answers_as_in_does_and_keeps_one_text(app: App) -> None:
    with app.db.session() as session:
        ids = [
            rid
            for (rid,) in insert_returning(session.connection(), AUDIT, _entries(500, 0), ("id",))
        ]
    asked = [sorted(ids)[:2], sorted(ids)[::3]]
    texts: set[str] = set()
    with app.db.read() as session:
        for subset in asked:
            with statements(app.db.engine) as sent:
                found = set(
                    session.scalars(
                        select(AuditEvent.id).where(among(session, AuditEvent.id, subset))
                    )
                )
            expected = set(session.scalars(select(AuditEvent.id).where(AuditEvent.id.in_(subset))))
            assert found == expected == set(subset)
            texts.update(sent)
    if app.db.dialect == "postgresql":
        assert len(texts) == 1, texts


RUNS = cast(Table, Run.__table__)
#: A change like the completion's: a parameter per column, a condition, a constant.
CHANGE = RowsUpdate(
    RUNS,
    "rid",
    sets={"code": "exit_code", "when": "finished_at"},
    where=(RUNS.c.status == RunStatus.RUNNING,),
    constants={"error": "set by every row"},
)


def _runs(app: App, count: int) -> list[int]:
    rows = [
        {
            "assignment_id": 1,
            "job_id": 1,
            "target_id": 1,
            "job_name": "j",
            "target_name": "t",
            "origin": "ui",
            "command": "true",
            "scheduled_for": AT + timedelta(minutes=i),
            "trigger": "schedule",
            "node": "n1",
            "actor": "scheduler",
            "created_at": AT,
            # every third run is no longer running: the condition leaves it alone
            "status": RunStatus.SUCCEEDED if i % 3 == 0 else RunStatus.RUNNING,
        }
        for i in range(count)
    ]
    with app.db.session() as session:
        return sorted(rid for (rid,) in insert_returning(session.connection(), RUNS, rows, ("id",)))


def _changed(app: App, ids: list[int]) -> dict[int, tuple[Any, ...]]:
    with app.db.read() as session:
        return {
            row.id: (row.exit_code, row.finished_at, row.error)
            for row in session.execute(
                select(Run.id, Run.exit_code, Run.finished_at, Run.error).where(Run.id.in_(ids))
            )
        }


def test_update_rows_changes_each_row_as_the_executemany_does(app: App) -> None:
    ids = _runs(app, 300)
    params = [{"rid": rid, "code": rid % 7, "when": AT + timedelta(seconds=rid)} for rid in ids]
    with app.db.session() as session:
        update_rows(session.connection(), CHANGE, params)
    got = _changed(app, ids)
    running = [rid for index, rid in enumerate(ids) if index % 3]
    assert {rid: got[rid] for rid in running} == {
        rid: (rid % 7, AT + timedelta(seconds=rid), "set by every row") for rid in running
    }
    assert all(got[rid] == (None, None, None) for index, rid in enumerate(ids) if index % 3 == 0)


def _executions(app: App, write: Callable[[Connection, list[dict[str, Any]]], Any]) -> int:
    """How many times the server executed an UPDATE of ``runs`` while ``write`` updated 30
    runs: a statement-level trigger counts them (made and dropped in one transaction that
    is rolled back, so the reused database's schema never changes)."""
    ids = _runs(app, 30)
    params = [{"rid": rid, "code": 1, "when": AT} for rid in ids]
    with app.db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text("CREATE TEMP TABLE executions (n int)"))
        conn.execute(
            text(
                "CREATE FUNCTION pg_temp.counted() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN INSERT INTO executions VALUES (1); RETURN NULL; END $$"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER counted AFTER UPDATE ON runs"
                " FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.counted()"
            )
        )
        write(conn, params)
        count = int(conn.execute(text("SELECT count(*) FROM executions")).scalar_one())
        transaction.rollback()
    return count


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_on_postgresql_the_rows_are_changed_by_one_execution(app: App) -> None:
    assert _executions(app, lambda conn, params: update_rows(conn, CHANGE, params)) == 1


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_negative_control_the_executemany_executes_once_per_row(app: App) -> None:
    assert _executions(app, lambda conn, params: conn.execute(CHANGE.each, params)) == 30
