"""`fleetcron alert ...` (incidents: list, show, ack) and `fleetcron silence ...`."""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import ID, echo, parse_time, print_json, print_table
from fleetcron.core.incidents import parse_duration
from fleetcron.services.alerts import incident_ops as ops
from fleetcron.services.alerts import silences as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


@click.group()
def alert() -> None:
    """Incidents: one cause on one job over the targets that share it."""


@alert.command("list")
@click.option(
    "--status",
    type=click.Choice(list(ops.LIST_STATUSES)),
    default="open",
    show_default=True,
    help="Which incidents.",
)
@click.option("--job", help="Only this job's incidents.")
@click.option("--limit", type=click.IntRange(1, ops.LIST_MAX), default=50, show_default=True)
@json_option
@as_user_option
def alert_list(
    status: str, job: str | None, limit: int, as_json: bool, as_user: str | None
) -> None:
    """Incidents, newest first."""
    with opened_app() as app:
        found = ops.list_incidents(app, acting(app, as_user), status=status, job=job, limit=limit)
    if as_json:
        print_json([i.as_dict() for i in found])
        return
    print_table(
        None,
        ["id", "job", "cause", "status", "targets", "opened", "resolved", "acked by"],
        [
            (
                i.id,
                i.job,
                i.cause,
                i.status,
                f"{i.open_targets} of {i.all_targets}",
                i.opened_at,
                i.resolved_at or "",
                i.acked_by or "",
            )
            for i in found
        ],
    )


@alert.command("show")
@click.argument("incident_id", metavar="ID", type=ID)
@json_option
@as_user_option
def alert_show(incident_id: int, as_json: bool, as_user: str | None) -> None:
    """One incident: its targets and every message sent about it."""
    with opened_app() as app:
        detail = ops.show_incident(app, acting(app, as_user), incident_id)
    if as_json:
        print_json(detail.as_dict())
        return
    i = detail.incident
    echo(f"incident #{i.id}: {i.job} {i.cause} ({i.status})")
    echo(f"opened {i.opened_at}" + (f", resolved {i.resolved_at}" if i.resolved_at else ""))
    if i.acked_by:
        echo(
            f"acknowledged by {i.acked_by} at {i.acked_at}"
            + (f": {i.ack_note}" if i.ack_note else "")
        )
    echo(
        f"{i.open_targets} of {i.all_targets} target(s) open, {detail.failed_slots} slot(s) failed"
    )
    echo(f"link: {i.link}")
    echo(i.reason)
    print_table(
        "targets",
        ["target", "joined", "recovered"],
        [(t.name, t.joined_at, t.recovered_at or "") for t in detail.targets],
    )
    print_table(
        "messages",
        ["delivery", "channel", "message", "status", "attempts", "created", "sent"],
        [
            (
                m.delivery_id,
                m.channel,
                m.message,
                m.status,
                m.attempts,
                m.created_at,
                m.sent_at or "",
            )
            for m in detail.messages
        ],
    )


@alert.command("ack")
@click.argument("incident_id", metavar="ID", type=ID)
@click.option("--note", default="", help="What you are doing about it (in the audit log).")
@as_user_option
def alert_ack(incident_id: int, note: str, as_user: str | None) -> None:
    """Acknowledge an open incident: no more reminders (the resolved message still comes)."""
    with opened_app() as app:
        view = ops.acknowledge(app, acting(app, as_user), incident_id, note=note)
    click.echo(f"incident #{view.id} ({view.job} {view.cause}) acknowledged by {view.acked_by}")


@click.group()
def silence() -> None:
    """Mute incident messages of a job, a target, a label selector or everything."""


def silence_spec_options(command: Callable[..., None]) -> Callable[..., None]:
    """--job, --target, --selector, --all (what to mute), --duration, --until (how long)
    and --reason: the command gets them as one ``spec`` (:class:`SilenceSpec`), its
    duration and end time already parsed."""

    @functools.wraps(command)
    def specified(
        *args: object,
        job: str | None,
        target: str | None,
        selector: str | None,
        everything: bool,
        duration: str | None,
        until: str | None,
        reason: str,
        **kwargs: object,
    ) -> None:
        spec = svc.SilenceSpec(
            reason=reason,
            job=job,
            target=target,
            selector=selector,
            everything=everything,
            duration_s=None if duration is None else parse_duration(duration).total_seconds(),
            until=parse_time(until, "until"),
        )
        command(*args, spec=spec, **kwargs)

    decorated: Callable[..., None] = specified
    for option in reversed(
        [
            click.option("--job", help="Mute this job's incidents."),
            click.option("--target", help="Mute incidents whose targets are all this one."),
            click.option(
                "--selector",
                help="Mute incidents whose targets all carry these labels (k=v,...).",
            ),
            click.option("--all", "everything", is_flag=True, help="Mute every incident."),
            click.option("--duration", help="How long: 90m, 2h, 1d (1 minute to 90 days)."),
            click.option("--until", help="Until this time (ISO-8601)."),
            click.option("--reason", required=True, help="Why (shown in lists and the audit log)."),
        ]
    ):
        decorated = option(decorated)
    return decorated


@silence.command("add")
@silence_spec_options
@json_option
@as_user_option
def silence_add(spec: svc.SilenceSpec, as_json: bool, as_user: str | None) -> None:
    """Add a silence starting now."""
    with opened_app() as app:
        view = svc.add_silence(app, acting(app, as_user), spec)
    if as_json:
        print_json(view.as_dict())
        return
    click.echo(f"silence #{view.id} added: {view.scope} until {view.ends_at}")


@silence.command("list")
@click.option("--all", "include_expired", is_flag=True, help="Also the ended ones.")
@json_option
@as_user_option
def silence_list(include_expired: bool, as_json: bool, as_user: str | None) -> None:
    """Silences in force, newest first."""
    with opened_app() as app:
        found = svc.list_silences(app, acting(app, as_user), include_expired=include_expired)
    if as_json:
        print_json([s.as_dict() for s in found])
        return
    print_table(
        None,
        ["id", "scope", "from", "until", "by", "reason", "in force"],
        [
            (
                s.id,
                s.scope,
                s.starts_at,
                s.ends_at,
                s.created_by,
                s.reason,
                "yes" if s.active else "no",
            )
            for s in found
        ],
    )


@silence.command("expire")
@click.argument("silence_id", metavar="ID", type=ID)
@as_user_option
def silence_expire(silence_id: int, as_user: str | None) -> None:
    """End a silence now."""
    with opened_app() as app:
        view = svc.expire_silence(app, acting(app, as_user), silence_id)
    click.echo(f"silence #{view.id} ({view.scope}) expired")
