"""`fleetcron job history|diff|revert`: the versions of a job's definition."""

from __future__ import annotations

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import ID_OR_LESS, echo, print_json, print_table
from fleetcron.core.versions import FieldChange
from fleetcron.services.jobs import versions as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def print_changes(changes: list[FieldChange]) -> None:
    """A field per line (``- old`` / ``+ new``); text over several lines as a line diff."""
    for change in changes:
        echo(f"{change.field}:")
        if change.lines:
            for line in change.lines[2:]:  # the ---/+++ header names the field again
                echo(f"  {line}")
            continue
        echo(f"  - {_value(change.old)}")
        echo(f"  + {_value(change.new)}")


def _value(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(none)"
    return repr(value) if isinstance(value, str) and value != value.strip() else str(value)


@click.command("history")
@click.argument("name")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
@as_user_option
def history(name: str, limit: int, as_json: bool, as_user: str | None) -> None:
    """The versions of a job's definition, newest first: when, who, from where, what."""
    with opened_app() as app:
        versions = svc.list_versions(app, acting(app, as_user), name, limit=limit)
    if as_json:
        print_json([v.as_dict(with_definition=False) for v in versions])
        return
    print_table(
        f"versions of job {name}",
        ["version", "at", "by", "source", "changed"],
        [
            [f"{v.version}{' (current)' if v.current else ''}", v.at, v.actor, v.source, v.summary]
            for v in versions
        ],
    )


@click.command("diff")
@click.argument("name")
@click.argument("v1", type=ID_OR_LESS)
@click.argument("v2", type=ID_OR_LESS, required=False)
@json_option
@as_user_option
def diff(name: str, v1: int, v2: int | None, as_json: bool, as_user: str | None) -> None:
    """What changed from version V1 to version V2 (default: the current version)."""
    with opened_app() as app:
        changes = svc.diff_versions(app, acting(app, as_user), name, v1, v2)
    if as_json:
        print_json([c.as_dict() for c in changes])
        return
    if not changes:
        echo("no difference")
        return
    print_changes(changes)


@click.command("revert")
@click.argument("name")
@click.option("--to", "to", type=ID_OR_LESS, required=True, help="The version to go back to.")
@as_user_option
def revert(name: str, to: int, as_user: str | None) -> None:
    """Give a job the definition of an earlier version again (written as a new version)."""
    with opened_app() as app:
        version, changes = svc.revert_job(app, acting(app, as_user), name, to)
    echo(f"job {name} is now at version {version} (the definition of version {to})")
    print_changes(changes)


COMMANDS = (history, diff, revert)
