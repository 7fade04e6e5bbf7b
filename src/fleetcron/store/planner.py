"""Statement shapes that keep both databases' planners on the intended path, for the
readers of every layer above the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import CTE, ColumnElement, ScalarSelect, func, literal, literal_column, select


def materialized(cte: CTE) -> CTE:
    """Computed once per statement: else PostgreSQL and SQLite may inline a CTE into every
    place that reads it, and a correlated subquery in it runs again for each."""
    return cte.prefix_with("MATERIALIZED", dialect="postgresql").prefix_with(
        "MATERIALIZED", dialect="sqlite"
    )


def written_in(column: Any, values: Sequence[str]) -> ColumnElement[bool]:
    """``column`` is one of ``values``, with the values written into the statement (``=``
    for one): a planner uses a partial index only when the query repeats its predicate
    (``store/schema.py``: ``REACHED_SQL`` and the others), and a bound parameter could be
    any value."""
    written: list[ColumnElement[str]] = [literal_column(f"'{value}'") for value in values]
    term: ColumnElement[bool] = column == written[0] if len(written) == 1 else column.in_(written)
    return term


def count_up_to(counted: Any, where: ColumnElement[bool], cap: int) -> ScalarSelect[int]:
    """How many rows of ``counted`` (a table or alias) match ``where``, reading at most
    ``cap + 1`` of them (``core.bounded.Bounded.of`` says what the number means): a
    correlated scalar subquery, correlated to every other table ``where`` names."""
    rows = (
        select(literal(1).label("one"))
        .where(where)
        .limit(cap + 1)
        .correlate_except(counted)
        .subquery("counted")
    )
    return select(func.count()).select_from(rows).scalar_subquery()
