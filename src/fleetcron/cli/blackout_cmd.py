"""`fleetcron blackout add|change|list|show|lift`: blackout windows (services/blackouts)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import ID, print_json, print_table
from fleetcron.core.blackouts import WINDOW_KEYS
from fleetcron.core.incidents import parse_duration
from fleetcron.services.blackouts import windows as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group()
def blackout() -> None:
    """Windows during which a job's slots are skipped (or deferred to the window's end)."""


def window_spec_options(command: Callable[..., None]) -> Callable[..., None]:
    """The window's fields as options; the command gets them as one ``spec``."""

    @functools.wraps(command)
    def specified(*args: object, **kwargs: Any) -> None:
        given = {field: kwargs.pop(field) for field in WINDOW_KEYS}
        duration = given.pop("duration")
        seconds = None if duration is None else parse_duration(duration).total_seconds()
        given["duration_s"] = None if seconds is None else int(seconds)
        command(*args, spec=svc.BlackoutSpec(**given), **kwargs)

    decorated: Callable[..., None] = specified
    for option in reversed(
        [
            click.option("--name", required=True, help="A name, shown in every skipped run."),
            click.option("--reason", required=True, help="Why (shown in lists and the audit log)."),
            click.option("--job", help="Cover this job."),
            click.option("--target", help="Cover this target (every job on it)."),
            click.option("--selector", help="Cover the targets carrying these labels (k=v,...)."),
            click.option(
                "--zone",
                default="UTC",
                show_default=True,
                help='IANA zone the times are read in, or "target": each target\'s own.',
            ),
            click.option("--start", help="One-off window: start (2027-01-10 22:00)."),
            click.option("--end", help="One-off window: end (or give --duration)."),
            click.option("--cron", help="Recurring window: opens at each fire time."),
            click.option("--weekly", help='Recurring window: "sat,sun 22:00", "mon-fri 12:30".'),
            click.option("--duration", help="How long each opening lasts: 90m, 4h, 1d."),
            click.option("--until", help="Recurring window: no opening after this time."),
        ]
    ):
        decorated = option(decorated)
    return decorated


def _say(verb: str, view: svc.BlackoutView, as_json: bool) -> None:
    if as_json:
        print_json(view.as_dict())
        return
    click.echo(f'blackout window #{view.id} "{view.name}" {verb}: {view.scope}, {view.when}')
    if view.overlaps:
        listed = ", ".join(f"#{other}" for other in view.overlaps)
        click.echo(f"note: it overlaps window(s) {listed} of the same scope (both apply)")


@blackout.command("add")
@window_spec_options
@json_option
@as_user_option
def blackout_add(spec: svc.BlackoutSpec, as_json: bool, as_user: str | None) -> None:
    """Add a blackout window (one-off: --start with --end or --duration; recurring:
    --cron or --weekly with --duration)."""
    with opened_app() as app:
        view = svc.add_blackout(app, acting(app, as_user), spec)
    _say("added", view, as_json)


@blackout.command("change")
@click.argument("blackout_id", metavar="ID", type=ID)
@window_spec_options
@json_option
@as_user_option
def blackout_change(
    blackout_id: int, spec: svc.BlackoutSpec, as_json: bool, as_user: str | None
) -> None:
    """Replace a window in force (give all its fields again)."""
    with opened_app() as app:
        view = svc.change_blackout(app, acting(app, as_user), blackout_id, spec)
    _say("changed", view, as_json)


@blackout.command("list")
@click.option("--all", "include_ended", is_flag=True, help="Also the lifted and expired ones.")
@json_option
@as_user_option
def blackout_list(include_ended: bool, as_json: bool, as_user: str | None) -> None:
    """Windows in force, newest first."""
    with opened_app() as app:
        found = svc.list_blackouts(app, acting(app, as_user), include_ended=include_ended)
    if as_json:
        print_json([view.as_dict() for view in found])
        return
    print_table(
        None,
        ["id", "name", "covers", "when", "by", "reason", "in force"],
        [
            (v.id, v.name, v.scope, v.when, v.created_by, v.reason, "yes" if v.active else "no")
            for v in found
        ],
    )


@blackout.command("show")
@click.argument("blackout_id", metavar="ID", type=ID)
@json_option
@as_user_option
def blackout_show(blackout_id: int, as_json: bool, as_user: str | None) -> None:
    """One window, with who made, changed or lifted it."""
    with opened_app() as app:
        view = svc.show_blackout(app, acting(app, as_user), blackout_id)
    if as_json:
        print_json(view.as_dict())
        return
    rows = [
        ("name", view.name),
        ("covers", view.scope),
        ("when", view.when),
        ("reason", view.reason),
        ("in force", "yes" if view.active else "no"),
        ("expires", view.expires_at or "never (recurring, no --until)"),
        ("created", f"{view.created_at} by {view.created_by}"),
        ("changed", f"{view.updated_at} by {view.updated_by}"),
        ("lifted", f"{view.lifted_at} by {view.lifted_by}" if view.lifted_at else "-"),
        ("overlaps", ", ".join(f"#{o}" for o in view.overlaps) or "-"),
    ]
    print_table(f"blackout window #{view.id}", ["field", "value"], rows)


@blackout.command("lift")
@click.argument("blackout_id", metavar="ID", type=ID)
@click.option("--reason", required=True, help="Why it ends early (audited).")
@as_user_option
def blackout_lift(blackout_id: int, reason: str, as_user: str | None) -> None:
    """End a window now; runs it deferred start on the next tick."""
    with opened_app() as app:
        view = svc.lift_blackout(app, acting(app, as_user), blackout_id, reason)
    click.echo(f'blackout window #{view.id} "{view.name}" lifted')
