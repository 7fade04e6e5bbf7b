"""The SQL statements a piece of code issues, as the engine sends them: what the tests
that bound a read ("one statement, whatever the size of the fleet", "no whole target
rows") count and inspect. The one listener setup of the suite."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from fleetcron.app import App


@contextmanager
def statements_with_parameters(app: App) -> Iterator[list[tuple[str, Any]]]:
    """Every statement (and its parameters) the app's engine executes inside the block,
    in order; the list is live (clear it to measure the next step)."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        seen.append((statement, parameters))

    event.listen(app.db.engine, "before_cursor_execute", capture)
    try:
        yield seen
    finally:
        event.remove(app.db.engine, "before_cursor_execute", capture)


@contextmanager
def statements(app: App) -> Iterator[list[str]]:
    """Every statement's text the app's engine executes inside the block, in order; the
    list is live (clear it to measure the next step)."""
    seen: list[str] = []

    def capture(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        seen.append(statement)

    event.listen(app.db.engine, "before_cursor_execute", capture)
    try:
        yield seen
    finally:
        event.remove(app.db.engine, "before_cursor_execute", capture)
