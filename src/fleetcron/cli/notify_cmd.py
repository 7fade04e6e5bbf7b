"""`fleetcron notify ...`: notification channels, rules and the delivery log."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import ID, print_json, print_table
from fleetcron.cli.passwords import get_secret, secret_file_option
from fleetcron.core.incidents import RuleTimers, Thresholds, parse_duration
from fleetcron.errors import InvalidInput
from fleetcron.notify import ChannelSpec
from fleetcron.notify.email import EmailSpec
from fleetcron.notify.webhook import WebhookSpec
from fleetcron.services.alerts import channels as svc

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")

SECRET_ENV = "FLEETCRON_NOTIFY_SECRET"
PASSWORD_ENV = "FLEETCRON_SMTP_PASSWORD"


def _first_line(text: str | None, width: int = 60) -> str:
    line = (text or "").splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


@click.group()
def notify() -> None:
    """Messages when jobs fail, run late, or recover."""


@notify.group()
def channel() -> None:
    """Where messages go: webhooks and email."""


@channel.command("add")
@click.argument("name")
@click.option("--url", help="Webhook: POST the JSON message to this http(s) URL.")
@secret_file_option(
    "--secret-file",
    f"webhook: the key to sign each request with HMAC-SHA256 (or {SECRET_ENV})",
)
@click.option("--secret", hidden=True, help="Deprecated: the key shows in `ps`; use --secret-file.")
@click.option("--smtp-host", help="Email: the SMTP server.")
@click.option("--smtp-port", type=int, default=25, show_default=True, help="Email: its port.")
@click.option("--starttls", is_flag=True, help="Email: upgrade to TLS before sending.")
@click.option("--username", help="Email: SMTP login.")
@secret_file_option("--password-file", f"email: the SMTP password (or {PASSWORD_ENV})")
@click.option(
    "--password", hidden=True, help="Deprecated: the password shows in `ps`; use --password-file."
)
@click.option("--from", "sender", help="Email: the sender address.")
@click.option("--to", multiple=True, help="Email: a recipient (repeat for more).")
@as_user_option
def channel_add(
    name: str,
    url: str | None,
    secret_file: str | None,
    secret: str | None,
    smtp_host: str | None,
    smtp_port: int,
    starttls: bool,
    username: str | None,
    password_file: str | None,
    password: str | None,
    sender: str | None,
    to: tuple[str, ...],
    as_user: str | None,
) -> None:
    """Add a webhook channel (--url) or an email channel (--smtp-host)."""
    spec: ChannelSpec
    if (url is None) == (smtp_host is None):
        raise InvalidInput(
            "a channel needs exactly one of --url (webhook) or --smtp-host (email)",
            field="url",
            value=None,
            allowed="--url URL or --smtp-host HOST",
        )
    if url is not None:
        spec = _webhook_spec(url, secret=secret, secret_file=secret_file)
    else:
        assert smtp_host is not None
        spec = _email_spec(
            _SmtpOptions(
                host=smtp_host,
                port=smtp_port,
                starttls=starttls,
                username=username,
                sender=sender,
                to=to,
            ),
            password=password,
            password_file=password_file,
        )
    with opened_app() as app:
        view = svc.add_channel(app, acting(app, as_user), name, spec)
    click.echo(f"channel {view.name} added ({view.kind}: {view.summary})")


def _webhook_spec(url: str, *, secret: str | None, secret_file: str | None) -> WebhookSpec:
    return WebhookSpec(
        url=url,
        secret=get_secret(
            given=secret,
            option="--secret",
            file=secret_file,
            file_option="--secret-file",
            env=SECRET_ENV,
            field="secret",
        ),
    )


@dataclass(frozen=True)
class _SmtpOptions:
    """The options of an email channel besides its password."""

    host: str
    port: int
    starttls: bool
    username: str | None
    sender: str | None
    to: tuple[str, ...]


def _email_spec(
    smtp: _SmtpOptions, *, password: str | None, password_file: str | None
) -> EmailSpec:
    if not smtp.sender:
        raise InvalidInput(
            "from: an email channel needs --from ADDRESS",
            field="from",
            value=None,
            allowed="user@domain",
        )
    return EmailSpec(
        host=smtp.host,
        port=smtp.port,
        starttls=smtp.starttls,
        username=smtp.username,
        password=get_secret(
            given=password,
            option="--password",
            file=password_file,
            file_option="--password-file",
            env=PASSWORD_ENV if smtp.username else None,
            field="password",
        ),
        sender=smtp.sender,
        to=list(smtp.to),
    )


@channel.command("list")
@json_option
@as_user_option
def channel_list(as_json: bool, as_user: str | None) -> None:
    """List channels (their secrets are never shown)."""
    with opened_app() as app:
        channels = svc.list_channels(app, acting(app, as_user))
    if as_json:
        print_json([c.as_dict() for c in channels])
        return
    print_table(
        None,
        ["name", "kind", "enabled", "settings"],
        [(c.name, c.kind, "yes" if c.enabled else "no", c.summary) for c in channels],
    )


@channel.command("rm")
@click.argument("name")
@as_user_option
def channel_rm(name: str, as_user: str | None) -> None:
    """Remove a channel, its rules and its deliveries."""
    with opened_app() as app:
        rules = svc.remove_channel(app, acting(app, as_user), name)
    click.echo(f"channel {name} removed (with {rules} rule(s))")


@channel.command("test")
@click.argument("name")
@as_user_option
def channel_test(name: str, as_user: str | None) -> None:
    """Send a test message now and say whether it arrived."""
    with opened_app() as app:
        note = svc.send_test_message(app, acting(app, as_user), name)
    click.echo(f"test message sent to {name}" + (f" ({note})" if note else ""))


@notify.group()
def rule() -> None:
    """Which events of which jobs go to which channel."""


def timer_options(command: Callable[..., None]) -> Callable[..., None]:
    """--group-wait, --group-interval and --repeat-interval: the command gets them as one
    ``timers`` (:class:`RuleTimers`), each duration parsed (one not given keeps its
    default)."""

    @functools.wraps(command)
    def timed(
        *args: object,
        group_wait: str | None,
        group_interval: str | None,
        repeat_interval: str | None,
        **kwargs: object,
    ) -> None:
        command(
            *args,
            timers=RuleTimers(
                group_wait_s=_seconds(group_wait, "group_wait_s"),
                group_interval_s=_seconds(group_interval, "group_interval_s"),
                repeat_interval_s=_seconds(repeat_interval, "repeat_interval_s"),
            ),
            **kwargs,
        )

    decorated: Callable[..., None] = timed
    for option in reversed(
        [
            click.option(
                "--group-wait", help="Wait before an incident's first message (default 30s)."
            ),
            click.option("--group-interval", help="At most one update per (default 5m)."),
            click.option("--repeat-interval", help="Remind an open incident every (default 4h)."),
        ]
    ):
        decorated = option(decorated)
    return decorated


def threshold_options(command: Callable[..., None]) -> Callable[..., None]:
    """--failures-before and --successes-before: the command gets them as one
    ``thresholds`` (:class:`Thresholds`), checked by the service."""

    @functools.wraps(command)
    def counted(
        *args: object, failures_before: int, successes_before: int, **kwargs: object
    ) -> None:
        command(*args, thresholds=Thresholds(failures_before, successes_before), **kwargs)

    decorated: Callable[..., None] = counted
    for option in reversed(
        [
            click.option(
                "--failures-before",
                type=int,
                default=1,
                show_default=True,
                help="Consecutive failed slots of a target before this rule hears of it.",
            ),
            click.option(
                "--successes-before",
                type=int,
                default=1,
                show_default=True,
                help="Consecutive successes before a target leaves its incident.",
            ),
        ]
    ):
        decorated = option(decorated)
    return decorated


def _seconds(duration: str | None, field: str) -> float | None:
    return None if duration is None else parse_duration(duration, field=field).total_seconds()


@rule.command("add")
@click.option("--channel", "channel_name", required=True, help="Send to this channel.")
@click.option("--job", help="Only this job (default: every job).")
@click.option("--failure/--no-failure", default=True, show_default=True, help="Failed runs.")
@click.option("--late/--no-late", default=True, show_default=True, help="Late or missed slots.")
@click.option("--recovery/--no-recovery", default=True, show_default=True, help="The next success.")
@timer_options
@threshold_options
@as_user_option
def rule_add(
    *,
    channel_name: str,
    job: str | None,
    failure: bool,
    late: bool,
    recovery: bool,
    timers: RuleTimers,
    thresholds: Thresholds,
    as_user: str | None,
) -> None:
    """Add a rule for one job or for every job of the project (--project)."""
    with opened_app() as app:
        view = svc.add_rule(
            app,
            acting(app, as_user),
            channel_name,
            job=job,
            events=svc.RuleEvents(failure, late, recovery),
            timers=timers,
            thresholds=thresholds,
        )
    click.echo(
        f"rule {view.id} added: {', '.join(view.events)} of "
        f"{'job ' + view.job if view.job else 'every job'} to {view.channel}"
    )


@rule.command("list")
@json_option
@as_user_option
def rule_list(as_json: bool, as_user: str | None) -> None:
    """List rules."""
    with opened_app() as app:
        rules = svc.list_rules(app, acting(app, as_user))
    if as_json:
        print_json([r.as_dict() for r in rules])
        return
    print_table(
        None,
        [
            "id",
            "channel",
            "job",
            "events",
            "group wait",
            "group interval",
            "repeat",
            "fail/ok before",
        ],
        [
            (
                r.id,
                r.channel,
                r.job or "(every job)",
                ", ".join(r.events),
                f"{r.group_wait_s:g}s",
                f"{r.group_interval_s:g}s",
                f"{r.repeat_interval_s:g}s",
                f"{r.failures_before}/{r.successes_before}",
            )
            for r in rules
        ],
    )


@rule.command("rm")
@click.argument("rule_id", metavar="ID", type=ID)
@as_user_option
def rule_rm(rule_id: int, as_user: str | None) -> None:
    """Remove a rule."""
    with opened_app() as app:
        svc.remove_rule(app, acting(app, as_user), rule_id)
    click.echo(f"rule {rule_id} removed")


@notify.command("deliveries")
@click.option("--status", type=click.Choice(list(svc.DELIVERY_STATUSES)), help="Only these.")
@click.option("--channel", "channel_name", help="Only this channel.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
@as_user_option
def deliveries(
    status: str | None,
    channel_name: str | None,
    limit: int,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Messages queued, sent and given up on, newest first."""
    with opened_app() as app:
        rows = svc.list_deliveries(
            app, acting(app, as_user), status=status, channel=channel_name, limit=limit
        )
    if as_json:
        print_json([d.as_dict() for d in rows])
        return
    print_table(
        None,
        ["id", "created", "channel", "event", "status", "attempts", "next attempt", "subject"],
        [
            (
                d.id,
                d.created_at,
                d.channel,
                d.event,
                d.status + (f": {_first_line(d.last_error, 40)}" if d.last_error else ""),
                d.attempts,
                d.next_attempt_at,
                _first_line(d.subject),
            )
            for d in rows
        ],
    )
