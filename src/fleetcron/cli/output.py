"""Shared CLI plumbing: error-to-exit-code mapping, JSON and table output."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

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

#: Width of tables written to a pipe or a file: wide enough that no cell is cut.
PIPE_WIDTH = 100_000

# C0 controls but tab and newline, DEL, and the C1 controls (U+0080-U+009F, which some
# terminals read as ESC sequences), and the Unicode bidi overrides and isolates.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab shown as a visible
    escape (``\\x1b``, ``\\u202e``), so that what a command printed, or a name someone
    chose, cannot drive the terminal: no cursor moves, window titles or clipboard writes
    (OSC 52), and no text hidden by a carriage return or reordered by bidi controls."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def echo(text: str = "", *, nl: bool = True, err: bool = False) -> None:
    """``click.echo`` of text that may come from users or commands (see terminal_safe)."""
    click.echo(terminal_safe(text), nl=nl, err=err)


def to_terminal() -> bool:
    """True when stdout is a terminal; output to a pipe or a file is never cut."""
    return sys.stdout.isatty()


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
        echo(f"error: {exc.message}", err=True)
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
    """Print a rich table for humans: fitted to a terminal, at full width into a pipe or a
    file (where rich would otherwise assume 80 columns and cut cells). Cells are plain
    text: rich markup in names or notes (``[/x]``, ``[link=...]``) is shown as typed, and
    control characters are escaped."""
    table = Table(
        title=None if title is None else Text(terminal_safe(title)),
        show_lines=False,
        header_style="bold",
    )
    for column in columns:
        table.add_column(Text(column))
    for row in rows:
        table.add_row(*(Text(terminal_safe(_cell(cell))) for cell in row))
    console = Console() if to_terminal() else Console(width=PIPE_WIDTH)
    console.print(table)


def parse_time(value: str | None, option: str) -> datetime | None:
    """An ISO-8601 option value; a time without a zone is in the local zone. A time that
    is no instant between the years 1 and 9999 in UTC (``9999-12-31T23:59-11:00``) is
    refused here, before the database is asked."""
    if value is None:
        return None
    allowed = "e.g. 2026-03-08 or 2026-03-08T02:00:00+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(
            f"{option}: {value!r} is not an ISO-8601 time",
            field=option,
            value=value,
            allowed=allowed,
        ) from None
    try:
        parsed = parsed if parsed.tzinfo else parsed.astimezone()
        parsed.astimezone(UTC)
    except (OverflowError, OSError):
        raise InvalidInput(
            f"{option}: {value!r} is out of range: in UTC it falls outside the years 1-9999",
            field=option,
            value=value,
            allowed=f"a time between the years 1 and 9999 in UTC, {allowed}",
        ) from None
    return parsed


#: The largest id (of a run, a token, a rule) or version a command takes, as the API's:
#: a larger number cannot name anything, and the database would refuse it with an error.
MAX_ID = 2**31 - 1
#: A positional or option value that names a row by its number.
ID = click.IntRange(1, MAX_ID)
#: A number the service checks itself (a job version: "no version 0, it has 1 to 3"),
#: bounded only so that it can reach the database.
ID_OR_LESS = click.IntRange(-MAX_ID, MAX_ID)


class FiniteFloatRange(click.FloatRange):
    """A ``FloatRange`` that refuses ``nan``, which compares false with both bounds and
    so passes click's own check (``--interval nan`` then failed in ``time.sleep``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return number


def read_bounded(path: str, *, limit: int, field: str, allowed: str) -> bytes:
    """The bytes of the file ``path`` (``-``: standard input), at most ``limit``.

    A larger file is refused without being read whole: a device or a log named by
    mistake (``--key /dev/zero``) would otherwise be read into memory until the system
    kills the process."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
    except OSError as exc:
        raise InvalidInput(
            f"{field}: cannot read {path}: {exc.strerror or exc}",
            field=field,
            value=path,
            allowed=allowed,
        ) from None
    if len(data) > limit:
        raise InvalidInput(
            f"{field}: {path} is larger than {limit:,} bytes",
            field=field,
            value=path,
            allowed=f"{allowed}, at most {limit:,} bytes",
        )
    return data
