"""`fleetcron job ...`: bulk and individual jobs."""

from __future__ import annotations

from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table, to_terminal
from fleetcron.cron import parse
from fleetcron.services import jobs as svc
from fleetcron.services.jobs import JobSpec, JobView

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _describe(view: JobView) -> str:
    try:
        return parse(view.schedule, view.timezone).describe()
    except ValueError:
        return ""


def _first_line(text: str, width: int = 60) -> str:
    """The first line, cut to ``width`` on a terminal; whole into a pipe or a file."""
    line = text.splitlines()[0] if text else ""
    if len(line) <= width or not to_terminal():
        return line
    return line[: width - 1] + "…"


@click.group()
def job() -> None:
    """Scheduled commands: bulk (many targets) and individual (one target)."""


@job.command("add")
@click.argument("name")
@click.option("--schedule", required=True, help='Cron expression, e.g. "0 2 * * 0".')
@click.option("--command", "command", required=True, help="Shell command, run verbatim.")
@click.option("--target", help="Individual job on this target.")
@click.option("--bulk", is_flag=True, help="Bulk job on every paired target (or --selector).")
@click.option(
    "--selector", help="Bulk jobs: only targets with these labels, e.g. env=prod,role=pbx."
)
@click.option(
    "--disabled-on", multiple=True, metavar="TARGET", help="Bulk jobs: start paused here."
)
@click.option("--tz", "timezone", help="IANA time zone (default: the configured one).")
@click.option("--timeout", "timeout_s", type=int, help="Seconds before the run is killed.")
@click.option(
    "--overlap", type=click.Choice(["allow", "forbid"]), default="allow", show_default=True
)
@click.option(
    "--catchup",
    type=click.Choice(["none", "latest"]),
    default="none",
    show_default=True,
    help="latest: after downtime, run the most recent missed slot once.",
)
@click.option(
    "--jitter", "jitter_s", type=int, default=0, help="Bulk jobs: spread starts over N seconds."
)
@click.option("--retries", type=int, default=0, help="Extra attempts after a failure.")
@click.option(
    "--retry-on",
    multiple=True,
    type=click.Choice(["connect_error", "failed", "timed_out"]),
    help="Failure kinds that are retried (default connect_error).",
)
@click.option("--retry-backoff", "retry_backoff_s", type=int, default=30, show_default=True)
@click.option("--notes", default="")
@click.option(
    "--allow-duplicate",
    is_flag=True,
    help="Allow another job to run the same command on the same target.",
)
@as_user_option
def add(
    name: str,
    schedule: str,
    command: str,
    target: str | None,
    bulk: bool,
    selector: str | None,
    disabled_on: tuple[str, ...],
    timezone: str | None,
    timeout_s: int | None,
    overlap: str,
    catchup: str,
    jitter_s: int,
    retries: int,
    retry_on: tuple[str, ...],
    retry_backoff_s: int,
    notes: str,
    allow_duplicate: bool,
    as_user: str | None,
) -> None:
    """Add a job."""
    spec = JobSpec(
        schedule=schedule,
        command=command,
        timezone=timezone,
        notes=notes,
        timeout_s=timeout_s,
        overlap=overlap,
        catchup=catchup,
        jitter_s=jitter_s,
        retries=retries,
        retry_on=retry_on or ("connect_error",),
        retry_backoff_s=retry_backoff_s,
        allow_duplicate=allow_duplicate,
    )
    with opened_app() as app:
        view = svc.add_job(
            app,
            acting(app, as_user),
            name,
            spec,
            target=target,
            bulk=bulk,
            selector=selector,
            disabled_on=disabled_on,
        )
    where = f"{view.enabled}/{view.total} enabled" if bulk else f"on {target}"
    click.echo(f"job {name} added ({view.origin}, {where}): {_describe(view)}")


@job.command("list")
@click.option("--bulk", "origin", flag_value="bulk", help="Bulk jobs only.")
@click.option("--individual", "origin", flag_value="individual", help="Individual jobs only.")
@click.option("--target", help="Jobs that run on this target.")
@json_option
@as_user_option
def list_(origin: str | None, target: str | None, as_json: bool, as_user: str | None) -> None:
    """List jobs."""
    with opened_app() as app:
        views = svc.list_jobs(app, acting(app, as_user), origin=origin, target=target)
    if as_json:
        print_json([v.as_dict() for v in views])
        return
    if not views:
        click.echo(
            "no jobs yet; add one with `fleetcron job add NAME --schedule ... --command ... --bulk`"
        )
        return
    print_table(
        None,
        ["name", "origin", "schedule", "when", "command", "enabled", "notes"],
        [
            (
                v.name,
                v.origin,
                v.schedule,
                _describe(v),
                _first_line(v.command),
                f"{v.enabled}/{v.total}" if v.origin == "bulk" else ("yes" if v.enabled else "no"),
                _first_line(v.notes, 30),
            )
            for v in views
        ],
    )


@job.command("show")
@click.argument("name")
@json_option
@as_user_option
def show(name: str, as_json: bool, as_user: str | None) -> None:
    """Show one job and its targets."""
    with opened_app() as app:
        view = svc.show_job(app, acting(app, as_user), name)
    if as_json:
        print_json(view.as_dict())
        return
    data = view.as_dict()
    for key in (
        "name",
        "origin",
        "schedule",
        "timezone",
        "command",
        "notes",
        "selector",
        "target",
        "timeout_s",
        "overlap",
        "catchup",
        "jitter_s",
        "retries",
        "retry_on",
        "created_by",
        "updated_by",
        "updated_at",
    ):
        echo(f"{key + ':':14}{'' if data[key] is None else data[key]}")
    echo(f"{'when:':14}{_describe(view)}")
    print_table(
        f"targets ({view.enabled}/{view.total} enabled)",
        ["target", "enabled", "next fire", "last fire"],
        [
            (a.target, "yes" if a.enabled else "no", a.next_fire_at, a.last_fire_at)
            for a in view.assignments
        ],
    )


@job.command("edit")
@click.argument("name")
@click.option("--schedule")
@click.option("--command", "command")
@click.option("--tz", "timezone")
@click.option("--timeout", "timeout_s", type=int)
@click.option("--overlap", type=click.Choice(["allow", "forbid"]))
@click.option("--catchup", type=click.Choice(["none", "latest"]))
@click.option("--jitter", "jitter_s", type=int)
@click.option("--retries", type=int)
@click.option(
    "--retry-on", multiple=True, type=click.Choice(["connect_error", "failed", "timed_out"])
)
@click.option("--retry-backoff", "retry_backoff_s", type=int)
@click.option("--selector")
@click.option("--notes")
@click.option("--allow-duplicate/--no-allow-duplicate", "allow_duplicate", default=None)
@as_user_option
def edit(name: str, as_user: str | None, retry_on: tuple[str, ...], **options: Any) -> None:
    """Change a job; a bulk job changes on every target at once."""
    changes = {key: value for key, value in options.items() if value is not None}
    if retry_on:
        changes["retry_on"] = list(retry_on)
    if not changes:
        raise click.UsageError("nothing to change; give at least one option (see --help)")
    with opened_app() as app:
        view = svc.edit_job(app, acting(app, as_user), name, **changes)
    click.echo(f"job {name} updated ({', '.join(sorted(changes))}): {_describe(view)}")


def _toggle(name: str, target: str | None, as_user: str | None, enabled: bool) -> None:
    with opened_app() as app:
        view = svc.set_enabled(app, acting(app, as_user), name, enabled, target=target)
    word = "enabled" if enabled else "disabled"
    where = f" on {target}" if target else ""
    click.echo(f"job {name} {word}{where} ({view.enabled}/{view.total} enabled)")


@job.command("enable")
@click.argument("name")
@click.option("--target", help="Only on this target.")
@as_user_option
def enable(name: str, target: str | None, as_user: str | None) -> None:
    """Enable a job everywhere, or on one target."""
    _toggle(name, target, as_user, True)


@job.command("disable")
@click.argument("name")
@click.option("--target", help="Only on this target.")
@as_user_option
def disable(name: str, target: str | None, as_user: str | None) -> None:
    """Pause a job everywhere, or on one target."""
    _toggle(name, target, as_user, False)


@job.command("rm")
@click.argument("name")
@as_user_option
def rm(name: str, as_user: str | None) -> None:
    """Delete a job from every target at once (run history stays)."""
    with opened_app() as app:
        count = svc.remove_job(app, acting(app, as_user), name)
    click.echo(f"job {name} removed ({count} assignment(s))")
