"""Shared CLI plumbing: error-to-exit-code mapping, JSON and table output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fleetcron.errors import (
    AuthenticationFailed,
    Conflict,
    FleetcronError,
    InvalidInput,
    NotFound,
    PermissionDenied,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

_BAD_INPUT = (InvalidInput, NotFound, Conflict, PermissionDenied, AuthenticationFailed)


def exit_code_for(error: FleetcronError) -> int:
    """Bad input (including unknown names and duplicates) is 2; anything else is 1."""
    return EXIT_BAD_INPUT if isinstance(error, _BAD_INPUT) else EXIT_FAILURE


def run_cli(group: click.Group, args: Sequence[str] | None = None) -> int:
    """Run the click group and turn fleetcron errors into a message and an exit code."""
    try:
        group.main(args=args, prog_name="fleetcron", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_FAILURE
    except FleetcronError as exc:
        click.echo(f"error: {exc.message}", err=True)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


def print_json(data: Any) -> None:
    """Print data as indented JSON on stdout (datetimes as ISO-8601)."""
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default, sort_keys=False) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"cannot serialize {type(value).__name__}")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a rich table for humans."""
    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_cell(cell) for cell in row))
    Console().print(table)


def parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO-8601 option value; a time without a zone is in the local zone."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(
            f"{option}: {value!r} is not an ISO-8601 time",
            field=option,
            value=value,
            allowed="e.g. 2026-03-08 or 2026-03-08T02:00:00+00:00",
        ) from None
    return parsed if parsed.tzinfo else parsed.astimezone()
