"""`fleetcron cron ...`: check an expression and list its next fire times."""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import click

from fleetcron.core.calendars import CalendarSchedule
from fleetcron.core.job_options import option
from fleetcron.core.target_zones import validate_zone
from fleetcron.cron import CronSchedule, DstPolicy, dst, parse
from fleetcron.errors import InvalidInput

TIMEZONE_ENV = "FLEETCRON_TIMEZONE"
DEFAULT_TIMEZONE = "UTC"
MAX_COUNT = 10_000


def configured_timezone() -> str:
    """The zone schedules use unless told otherwise: $FLEETCRON_TIMEZONE, else UTC."""
    return os.environ.get(TIMEZONE_ENV) or DEFAULT_TIMEZONE


def _zone_option(value: str) -> ZoneInfo:
    return ZoneInfo(validate_zone(value, field="--timezone"))


def _from_option(value: str | None, tz: ZoneInfo) -> datetime:
    if value is None:
        return datetime.now(UTC).astimezone(tz)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(
            f"--from: {value!r} is not an ISO-8601 date-time; "
            "expected e.g. 2026-03-08T01:30 or 2026-03-08T01:30:00-05:00",
            field="--from",
            value=value,
            allowed="an ISO-8601 date-time",
        ) from exc
    # a naive --from is a wall-clock time in --timezone
    return moment.replace(tzinfo=tz) if moment.tzinfo is None else moment


@click.group()
def cron() -> None:
    """Check cron expressions and preview their fire times."""


@cron.command()
@click.argument("expression")
def check(expression: str) -> None:
    """Validate EXPRESSION; print its normalized form and an English description."""
    schedule = parse(expression)
    click.echo(schedule.normalized)
    click.echo(schedule.describe())
    if schedule.extensions:
        click.echo(f"note: uses extensions beyond Debian cron: {', '.join(schedule.extensions)}")


def _with_calendars(
    schedule: CronSchedule | CalendarSchedule, run_only_on: str, never_on: str
) -> CronSchedule | CalendarSchedule:
    from fleetcron.cli.context import acting, opened_app
    from fleetcron.services.calendars.sets import date_rule

    assert isinstance(schedule, CronSchedule)
    with opened_app() as app:
        rule = date_rule(app, acting(app, None), run_only_on, never_on)
    return schedule if rule is None else CalendarSchedule(schedule, rule)


@cron.command("next")
@click.argument("expression")
@click.option("--from", "from_", metavar="ISO-8601", help="Start after this time (default: now).")
@click.option(
    "--timezone",
    "--tz",
    "tz",
    metavar="ZONE",
    help=f"IANA time zone (default: ${TIMEZONE_ENV} or UTC); --tz is an alias.",
)
@click.option("-n", "count", default="5", metavar="N", help="How many fire times (default 5).")
@click.option(
    "--run-only-on",
    default="",
    metavar="CALENDAR",
    help="Only on this calendar's dates (or NAME:last, ...), as the job option.",
)
@click.option("--never-on", default="", metavar="CALENDAR", help="Never on this calendar's dates.")
@click.option(
    "--dst-gap",
    "dst_gap",
    default=dst.CRONIE,
    metavar="CHOICE",
    help=f"{option('dst_gap').help} Allowed: {option('dst_gap').allowed}.",
)
@click.option(
    "--dst-fold",
    "dst_fold",
    default=dst.CRONIE,
    metavar="CHOICE",
    help=f"{option('dst_fold').help} Allowed: {option('dst_fold').allowed}.",
)
def next_(
    expression: str,
    *,
    from_: str | None,
    tz: str | None,
    count: str,
    run_only_on: str,
    never_on: str,
    dst_gap: str,
    dst_fold: str,
) -> None:
    """Print the next N fire times of EXPRESSION, one per line, ISO-8601 with UTC offset,
    under a job's DST choices (default: cron's rule). With --run-only-on/--never-on (read
    from the installation's calendars), the dates the calendars refuse are left out, as the
    scheduler does."""
    if not count.isdigit() or not 1 <= int(count) <= MAX_COUNT:
        raise InvalidInput(
            f"-n: {count!r} is not a count; expected a whole number 1-{MAX_COUNT}",
            field="-n",
            value=count,
            allowed=f"1-{MAX_COUNT}",
        )
    zone = _zone_option(tz if tz is not None else configured_timezone())
    start = _from_option(from_, zone)
    policy = DstPolicy(
        dst.check_gap(dst_gap, field="--dst-gap"), dst.check_fold(dst_fold, field="--dst-fold")
    )
    schedule: CronSchedule | CalendarSchedule = parse(expression, zone, policy)
    if run_only_on or never_on:
        schedule = _with_calendars(schedule, run_only_on, never_on)
    try:
        for fire in itertools.islice(schedule.iter_after(start), int(count)):
            click.echo(fire.isoformat())
    except InvalidInput as exc:
        if exc.field != "t":
            raise
        # the engine names its argument; the user typed --from
        raise InvalidInput(
            "--from" + exc.message.removeprefix("t"),
            field="--from",
            value=from_,
            allowed=exc.allowed,
        ) from exc
