"""Statement shapes that keep both databases' planners on the intended path, for the
readers of every layer above the store."""

from __future__ import annotations

from sqlalchemy import CTE


def materialized(cte: CTE) -> CTE:
    """Computed once per statement: else PostgreSQL and SQLite may inline a CTE into every
    place that reads it, and a correlated subquery in it runs again for each."""
    return cte.prefix_with("MATERIALIZED", dialect="postgresql").prefix_with(
        "MATERIALIZED", dialect="sqlite"
    )
