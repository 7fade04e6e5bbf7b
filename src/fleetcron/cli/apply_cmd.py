"""`fleetcron apply`, `fleetcron export` and `fleetcron schedule list`: schedules as code.

See docs/schedules-as-code.md for the file format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table, read_bounded
from fleetcron.core.schedule_calendars import CalendarChange
from fleetcron.core.schedule_file import FieldChange, JobChange, JobState, Plan
from fleetcron.errors import InvalidInput
from fleetcron.services import schedule_file as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")

_SIGNS = {"create": "+", "change": "~", "delete": "-"}
#: The largest schedule file read (about 50,000 jobs of a few lines each).
SCHEDULE_FILE_MAX_BYTES = 16 * 1024 * 1024


def _read(path: str) -> tuple[str, str]:
    """The text of the file (``-``: standard input) and the name to report it under."""
    data = read_bounded(
        path, limit=SCHEDULE_FILE_MAX_BYTES, field="file", allowed="a readable schedule file"
    )
    try:
        return data.decode("utf-8"), "<stdin>" if path == "-" else path
    except UnicodeDecodeError:
        raise InvalidInput(
            f"file: {path} is not UTF-8 text",
            field="file",
            value=path,
            allowed="a UTF-8 YAML file",
        ) from None


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(item) for item in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _where(state: JobState) -> str:
    if state.bulk:
        return f"bulk, selector {state.selector}" if state.selector else "bulk, every target"
    return f"on {state.target}"


def describe_change(change: JobChange) -> list[str]:
    """The lines of the diff for one change."""
    sign = _SIGNS[change.kind]
    state = change.after or change.before
    assert state is not None
    lines = [f"{sign} job {change.name} ({_where(state)})"]
    if change.kind == "create":
        lines.append(f"    schedule: {_value(state.schedule)} ({state.timezone})")
        lines.append(f"    command: {_value(state.command)}")
        if state.disabled_on:
            lines.append(f"    disabled_on: {_value(state.disabled_on)}")
    lines.extend(_field_line(f) for f in change.fields)
    return lines


def _field_line(change: FieldChange) -> str:
    return f"    {change.field}: {_value(change.old)} → {_value(change.new)}"


def describe_calendar(change: CalendarChange) -> str:
    """One line for a calendar the file creates or changes."""
    state = change.after
    what = ", ".join(change.fields) if change.fields else f"{len(state.dates)} dates"
    if state.weekdays:
        what += f", {state.weekdays}" + (f" less {state.except_name}" if state.except_name else "")
    return f"{_SIGNS[change.kind]} calendar {change.name} ({what})"


def describe_plan(plan: Plan) -> list[str]:
    lines = [describe_calendar(change) for change in plan.calendars]
    lines += [line for change in plan.changes for line in describe_change(change)]
    lines += [
        f"{_SIGNS[c.kind]} blackout window {c.name}"
        + (f" ({', '.join(c.fields)})" if c.fields else "")
        for c in plan.blackouts
    ]
    return lines + _summary(plan)


def _summary(plan: Plan) -> list[str]:
    lines = []
    if plan.changes:
        lines.append(
            f"{plan.count('create')} to create, {plan.count('change')} to change, "
            f"{plan.count('delete')} to delete"
        )
    elif not plan.calendars and not plan.blackouts:
        lines.append("no changes")
    if plan.kept:
        lines.append(
            f"not in the file, kept (use --prune to delete): {', '.join(plan.kept)}",
        )
    return lines


@click.command("apply")
@click.argument("file", metavar="FILE")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--prune", is_flag=True, help="Also delete the jobs the file does not declare.")
@as_user_option
def apply(file: str, dry_run: bool, prune: bool, as_user: str | None) -> None:
    """Make the jobs match a schedule file (FILE, or - for standard input), in one
    transaction: all of it or nothing."""
    text, source = _read(file)
    with opened_app() as app:
        result = svc.apply_schedule(
            app, acting(app, as_user), text, source=source, prune=prune, dry_run=dry_run
        )
    for line in describe_plan(result.plan):
        click.echo(line)
    if dry_run and not result.plan.empty:
        click.echo("dry run: nothing was written")
    elif result.applied:
        click.echo("applied")


@click.command("export")
@click.option(
    "--output", "-o", "output", metavar="FILE", help="Write to FILE instead of standard output."
)
@as_user_option
def export(output: str | None, as_user: str | None) -> None:
    """Write every job as a schedule file; `fleetcron apply` of it changes nothing."""
    with opened_app() as app:
        text = svc.export_schedule(
            app,
            acting(app, as_user),
            header=["fleetcron schedule file; apply with `fleetcron apply FILE`"],
        )
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(
            f"output: cannot write {output}: {exc.strerror}",
            field="output",
            value=output,
            allowed="a writable file path",
        ) from None
    click.echo(f"wrote {output}", err=True)


@click.group()
def schedule() -> None:
    """What runs where and when."""


@schedule.command("list")
@json_option
@as_user_option
def list_(as_json: bool, as_user: str | None) -> None:
    """Every job on every target, once, with its next fire."""
    with opened_app() as app:
        entries = svc.list_schedule(app, acting(app, as_user))
    if as_json:
        print_json([entry.as_dict() for entry in entries])
        return
    if not entries:
        click.echo("nothing is scheduled")
        return
    print_table(
        None,
        ["job", "target", "schedule", "timezone", "next fire", "enabled"],
        [
            (
                e.job,
                e.target,
                e.schedule,
                e.timezone,
                e.next_fire_at,
                ("yes" if e.enabled else "no") + ("" if e.paired else " (target unpaired)"),
            )
            for e in entries
        ],
    )


__all__ = ["apply", "describe_change", "describe_plan", "export", "schedule"]
