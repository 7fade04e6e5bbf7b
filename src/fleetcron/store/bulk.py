"""Many rows in one ``INSERT … RETURNING`` or ``UPDATE``, and many values in one ``IN``,
written so that the statement's text does not grow with them and runs once.

SQLAlchemy sends an executemany with ``RETURNING`` as one ``INSERT … VALUES (…), (…), …``
per page of rows ("insertmanyvalues"): a claim of 500 runs is a statement of 500 × 21
placeholders. On PostgreSQL, psycopg rewrites every statement's placeholders before
sending it and caches that work only for statements under 4 KB, so each claim's
statement was scanned again, placeholder by placeholder, and the server parsed and
planned a new statement each time: about a quarter of a scheduler's database thread in a
fire (`bench/workers_bench.py --executor fake`, py-spy). A plain executemany ``UPDATE``
has a short text but is executed by the server once per row, and the statement triggers
of ``runs`` with it. On PostgreSQL the rows are sent here as one array per column,
unpacked by ``unnest`` (the dialect writes each array parameter with its column's array
type): the statement's text depends only on the columns, so the driver's conversion and
SQLAlchemy's compiled form are cached, the server parses the same small statement each
time and executes it once. Every value still goes through its column type's own bind
processing (the types' one home stays ``store/schema.py``). SQLite keeps SQLAlchemy's
forms: it has no such rewrite and no array type.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Table, any_, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.selectable import TableValuedAlias

__all__ = ["RowsUpdate", "among", "insert_returning", "update_rows"]


def insert_returning(
    connection: Connection,
    table: Table,
    rows: Sequence[dict[str, Any]],
    returning: Sequence[str],
) -> Sequence[tuple[Any, ...]]:
    """Insert ``rows`` (dicts with the same keys) into ``table`` with one statement and
    return the ``returning`` columns of every row, in no particular order."""
    columns = tuple(rows[0])
    if connection.dialect.name != "postgresql" or any(tuple(row) != columns for row in rows):
        returned = [table.c[name] for name in returning]
        return _rows(connection.execute(insert(table).returning(*returned), list(rows)).all())
    statement = _unnest_insert(table, columns, tuple(returning))
    return _rows(connection.execute(statement, _arrays(rows, columns)).all())


def _rows(rows: Sequence[Any]) -> Sequence[tuple[Any, ...]]:
    # A Row unpacks as a tuple does; its type does not say so to a type checker.
    return typing.cast(Sequence[tuple[Any, ...]], rows)


@functools.cache
def _unnest_insert(table: Table, columns: tuple[str, ...], returning: tuple[str, ...]) -> Insert:
    """``INSERT INTO table (columns) SELECT * FROM unnest(c0, c1, …) RETURNING …``, one
    typed array parameter ``c<i>`` per column (made once per table and columns)."""
    source = _unnested(table, tuple((name, name) for name in columns))
    return (
        insert(table)
        .from_select(list(columns), select(*(source.c[name] for name in columns)))
        .returning(*(table.c[name] for name in returning))
    )


def among(
    session: Session,
    column: ColumnElement[Any] | QueryableAttribute[Any],
    values: Collection[Any],
) -> ColumnElement[bool]:
    """``column IN (values)``, written on PostgreSQL as ``column = ANY(array)`` with one
    typed array parameter, so that the statement's text does not grow with the values
    (the same reason as :func:`insert_returning`'s)."""
    expression = column if isinstance(column, ColumnElement) else column.expression
    if session.get_bind().dialect.name != "postgresql":
        return expression.in_(values)
    return expression == any_(bindparam(None, list(values), type_=ARRAY(expression.type)))


@dataclass(frozen=True, eq=False)
class RowsUpdate:
    """The same change written on many rows of ``table``, each named by its id: ``sets``
    maps each row's parameter to the column it sets, ``where`` adds conditions on the
    table, ``constants`` sets columns to one value for every row. Built once (a module
    constant); :func:`update_rows` runs it."""

    table: Table
    key: str
    sets: Mapping[str, str]
    where: tuple[ColumnElement[bool], ...] = ()
    constants: Mapping[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def each(self) -> Update:
        """``UPDATE table SET column = :param … WHERE id = :key AND …``, for an executemany."""
        t = self.table
        return (
            update(t)
            .where(t.c.id == bindparam(self.key), *self.where)
            .values({**self.constants, **{c: bindparam(p) for p, c in self.sets.items()}})
        )

    @functools.cached_property
    def unnested(self) -> Update:
        """``UPDATE table SET column = v.param … FROM unnest(:c0, …) AS v(key, params…)
        WHERE id = v.key AND …``: every row in one statement."""
        t = self.table
        source = _unnested(t, ((self.key, "id"), *self.sets.items()))
        return (
            update(t)
            .where(t.c.id == source.c[self.key], *self.where)
            .values({**self.constants, **{c: source.c[p] for p, c in self.sets.items()}})
        )


def update_rows(connection: Connection, change: RowsUpdate, rows: Sequence[dict[str, Any]]) -> None:
    """Apply ``change`` to ``rows`` (dicts of its key and parameters): an executemany,
    and on PostgreSQL one statement executed once instead of once per row."""
    params = (change.key, *change.sets)
    if connection.dialect.name != "postgresql" or any(tuple(row) != params for row in rows):
        connection.execute(change.each, list(rows))
        return
    connection.execute(change.unnested, _arrays(rows, params))


def _unnested(table: Table, names: Sequence[tuple[str, str]]) -> TableValuedAlias:
    """``unnest(:c0::type0[], …) AS anon(name0, …)``: one typed array parameter per (name,
    column of ``table`` whose type it has)."""
    arrays = [
        bindparam(f"c{i}", type_=ARRAY(table.c[column].type)) for i, (_, column) in enumerate(names)
    ]
    return func.unnest(*arrays).table_valued(*(name for name, _ in names)).render_derived()


def _arrays(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, list[Any]]:
    """The parameters of :func:`_unnested`: each name's values, in the rows' order."""
    return {f"c{i}": [row[name] for row in rows] for i, name in enumerate(names)}
