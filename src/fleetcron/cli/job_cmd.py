"""`fleetcron job ...`: bulk and individual jobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table, to_terminal
from fleetcron.core.job_options import OPTIONS, JobOption
from fleetcron.core.target_zones import effective_zone
from fleetcron.cron import parse
from fleetcron.services.jobs import edit as svc
from fleetcron.services.jobs.edit import JobSpec, JobView

F = TypeVar("F", bound=Callable[..., Any])

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _describe(view: JobView) -> str:
    try:
        return parse(view.schedule, effective_zone(view.timezone, None, "UTC")).describe()
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


def job_option_flags(*, edit: bool) -> Callable[[F], F]:
    """The flags of every declared job option (:mod:`fleetcron.core.job_options`), in the
    declaration's order: for ``job add`` with the declared defaults (required ones
    required), for ``job edit`` all optional and unset unless given."""

    def apply(command: F) -> F:
        for option in reversed(OPTIONS):
            command = _flag(option, edit=edit)(command)
        return command

    return apply


def _flag(option: JobOption, *, edit: bool) -> Callable[[F], F]:
    kwargs: dict[str, Any] = {"help": option.help}
    if option.kind == "int":
        kwargs["type"] = int
    elif option.kind in ("choice", "choices"):
        kwargs["type"] = click.Choice(option.choices)
        kwargs["multiple"] = option.kind == "choices"
    if option.kind == "flag":
        if edit:
            negative = "--no-" + option.flag.removeprefix("--")
            return click.option(f"{option.flag}/{negative}", option.name, default=None, **kwargs)
        return click.option(option.flag, option.name, is_flag=True, **kwargs)
    if not edit and option.kind != "choices":
        kwargs["required"] = option.required
        if option.default is not None:
            kwargs["default"] = option.default
            kwargs["show_default"] = option.kind != "text"
    return click.option(option.flag, *option.cli_aliases, option.name, **kwargs)


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """The options given on the command line (a repeatable one counts when repeated)."""
    out: dict[str, Any] = {}
    for option in OPTIONS:
        value = values.get(option.name)
        if option.kind == "choices":
            value = list(value) if value else None
        if value is not None:
            out[option.name] = value
    return out


@job.command("add")
@click.argument("name")
@click.option("--target", help="Individual job on this target.")
@click.option("--bulk", is_flag=True, help="Bulk job on every paired target (or --selector).")
@click.option(
    "--selector", help="Bulk jobs: only targets with these labels, e.g. env=prod,role=pbx."
)
@click.option(
    "--disabled-on", multiple=True, metavar="TARGET", help="Bulk jobs: start paused here."
)
@job_option_flags(edit=False)
@as_user_option
def add(
    name: str,
    target: str | None,
    bulk: bool,
    selector: str | None,
    disabled_on: tuple[str, ...],
    as_user: str | None,
    **options: Any,
) -> None:
    """Add a job."""
    given = _given(options)
    # A repeatable option left out takes its declared default.
    spec = JobSpec(**{o.name: o.plain(o.default) for o in OPTIONS if o.kind == "choices"} | given)
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
    placement = ("name", "origin", "schedule", "timezone", "command", "notes", "selector", "target")
    options = tuple(o.name for o in OPTIONS if o.name not in placement)
    for key in (*placement, *options, "created_by", "updated_by", "updated_at"):
        value = data[key]
        shown = ", ".join(map(str, value)) if isinstance(value, list | tuple) else value
        # A space after every name, the longest too ("retry_backoff_s: 30").
        echo(f"{key + ':':<15} {'' if shown is None else shown}".rstrip())
    echo(f"{'when:':<15} {_describe(view)}")
    print_table(
        f"targets ({view.enabled}/{view.total} enabled)",
        ["target", "enabled", "next fire", "zone", "last fire"]
        + (["starts after (s)"] if view.spread_s or view.jitter_s else []),
        [
            (a.target, "yes" if a.enabled else "no", a.next_fire_local, a.timezone, a.last_fire_at)
            # the target's place in the job's start window: spread offset plus jitter
            + ((f"{a.start_delay_s:.3f}",) if view.spread_s or view.jitter_s else ())
            for a in view.assignments
        ],
    )


@job.command("edit")
@click.argument("name")
@job_option_flags(edit=True)
@click.option("--selector", help="Bulk jobs: only targets with these labels.")
@as_user_option
def edit(name: str, as_user: str | None, selector: str | None, **options: Any) -> None:
    """Change a job; a bulk job changes on every target at once."""
    changes = _given(options)
    if selector is not None:
        changes["selector"] = selector
    if not changes:
        raise click.UsageError("nothing to change; give at least one option (see --help)")
    with opened_app() as app:
        actor = acting(app, as_user)
        before = svc.show_job(app, actor, name).as_dict()
        view = svc.edit_job(app, actor, name, **changes)
    # Name what changed, not what was given: `--timezone ""` is the default zone, which the job
    # may have already.
    after = view.as_dict()
    changed = sorted(key for key in changes if before.get(key) != after.get(key))
    if not changed:
        click.echo(f"job {name}: no change (it already has these values): {_describe(view)}")
        return
    click.echo(f"job {name} updated ({', '.join(changed)}): {_describe(view)}")


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
