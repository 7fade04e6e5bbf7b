"""`fleetcron calendar add|import|list|show|remove`: named dates (services/calendars)."""

from __future__ import annotations

from pathlib import Path

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.errors import InvalidInput
from fleetcron.services.calendars import sets as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
#: The largest .ics file read (a calendar of holidays is a few kilobytes).
MAX_FILE_BYTES = 5 * 1024 * 1024


@click.group()
def calendar() -> None:
    """Named dates (holidays, business days) jobs run only on, or never on."""


def _say(verb: str, view: svc.CalendarView, as_json: bool) -> None:
    if as_json:
        print_json(view.as_dict())
        return
    base = f", {view.weekdays}" if view.weekdays else ""
    base += f" except {view.except_name}" if view.except_name else ""
    click.echo(f"calendar {view.name} {verb}: {view.count} date(s){base}")


@calendar.command("add")
@click.argument("name")
@click.option("--date", "dates", multiple=True, help="A date YYYY-MM-DD (repeatable).")
@click.option("--weekdays", default="", help="Every one of these days: mon-fri, sat,sun.")
@click.option("--except", "except_name", help="Less the dates of this calendar (holidays).")
@click.option("--description", default="", help="What the calendar is.")
@json_option
@as_user_option
def calendar_add(
    *,
    name: str,
    dates: tuple[str, ...],
    weekdays: str,
    except_name: str | None,
    description: str,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Add a calendar by hand (e.g. business-days: --weekdays mon-fri --except holidays)."""
    spec = svc.CalendarSpec(name, description, dates, weekdays, except_name)
    with opened_app() as app:
        view = svc.add_calendar(app, acting(app, as_user), spec)
    _say("added", view, as_json)


@calendar.command("import")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Replace the dates of an existing calendar.")
@click.option("--description", default="", help="What the calendar is.")
@json_option
@as_user_option
def calendar_import(
    *, name: str, file: Path, replace: bool, description: str, as_json: bool, as_user: str | None
) -> None:
    """Import a calendar from an iCalendar (.ics) file: every day its events cover."""
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(
            f"file: cannot read {file} ({exc.strerror})", field="file", value=str(file)
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput(
            f"file: {file} is larger than {MAX_FILE_BYTES} bytes",
            field="file",
            value=str(file),
            allowed=f"at most {MAX_FILE_BYTES} bytes",
        )
    with opened_app() as app:
        view = svc.import_calendar(
            app, acting(app, as_user), name, data, description=description, replace=replace
        )
    _say("imported", view, as_json)


@calendar.command("list")
@json_option
@as_user_option
def calendar_list(as_json: bool, as_user: str | None) -> None:
    """Every calendar."""
    with opened_app() as app:
        found = svc.list_calendars(app, acting(app, as_user))
    if as_json:
        print_json([view.as_dict() for view in found])
        return
    print_table(
        None,
        ["name", "dates", "from", "to", "weekdays", "except", "used by", "description"],
        [
            (
                v.name,
                v.count,
                v.first or "-",
                v.last or "-",
                v.weekdays or "-",
                v.except_name or "-",
                ", ".join(v.used_by) or "-",
                v.description,
            )
            for v in found
        ],
    )


@calendar.command("show")
@click.argument("name")
@json_option
@as_user_option
def calendar_show(name: str, as_json: bool, as_user: str | None) -> None:
    """One calendar and its dates."""
    with opened_app() as app:
        view = svc.show_calendar(app, acting(app, as_user), name)
    if as_json:
        print_json(view.as_dict())
        return
    _say("has", view, False)
    if view.used_by:
        click.echo("used by: " + ", ".join(view.used_by))
    for day in view.dates:
        click.echo(f"{day} {day:%a}")


@calendar.command("remove")
@click.argument("name")
@as_user_option
def calendar_remove(name: str, as_user: str | None) -> None:
    """Remove a calendar no job names."""
    with opened_app() as app:
        svc.remove_calendar(app, acting(app, as_user), name)
    click.echo(f"calendar {name} removed")
