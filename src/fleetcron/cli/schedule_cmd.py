"""`fleetcron schedule upcoming`: what fires in the next hours (added to the `schedule`
group of ``apply_cmd``)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, print_json, print_table
from fleetcron.core.dst_preview import DstNote
from fleetcron.core.upcoming import MAX_HOURS, Fire, Upcoming
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires


def _starts_between(fire: Fire) -> str:
    """When the fire's first and last targets start, in the fire's zone: its start window
    (spread and jitter, ``core/start_window.py``); empty when all start at the fire."""
    if not fire.active or not fire.window:
        return ""
    return f"{fire.first_start:%H:%M:%S}-{fire.last_start:%H:%M:%S}"


@click.command("upcoming")
@click.option(
    "--hours",
    type=click.FloatRange(min=0, min_open=True, max=MAX_HOURS),
    default=24,
    show_default=True,
    help=f"How far ahead (at most {MAX_HOURS}).",
)
@click.option("--job", help="Only this job.")
@click.option("--target", help="Only on this target.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=1000, show_default=True, help="At most."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def upcoming(
    hours: float,
    job: str | None,
    target: str | None,
    limit: int,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Which jobs fire when in the next hours, on how many targets, in which zone.

    A target-local job has a line per zone; paused targets and disabled assignments are
    counted apart (a fire with no target left to run it says so). Spread and rollout
    batches are shown when the job has them."""
    with opened_app() as app:
        result = upcoming_fires(
            app,
            acting(app, as_user),
            UpcomingQuery(hours=hours, job=job, target=target, limit=limit),
        )
    if as_json:
        print_json(
            {
                "from": result.start.isoformat(),
                "until": result.end.isoformat(),
                "truncated": result.truncated,
                "fires": [f.as_dict() for f in result.fires],
                "dst": [n.as_dict() for n in result.dst],
            }
        )
        return
    _print_fires(result, hours, limit)
    _print_dst(result.dst)


def _print_fires(result: Upcoming, hours: float, limit: int) -> None:
    """The table of fires, or that nothing fires."""
    if not result.fires:
        echo(f"nothing fires in the next {hours:g} hours")
        return
    print_table(
        f"fires in the next {hours:g} hours",
        [
            *("at", "zone", "job", "state", "targets", "paused", "disabled"),
            *("starts between", "rollout"),
        ],
        [
            [
                f.at.isoformat(sep=" ", timespec="minutes"),
                f.zone,
                f.job,
                f.state,
                f.active,
                f.paused or "",
                f.disabled or "",
                _starts_between(f),
                f.rollout.describe() if f.rollout else "",
            ]
            for f in result.fires
        ],
    )
    if result.truncated:
        echo(f"(only the first {limit}; narrow with --hours, --job or --target)")


def _print_dst(notes: Sequence[DstNote]) -> None:
    """The next DST transitions and what each job does at them, one line each."""
    if not notes:
        return
    echo("")
    echo("DST transitions ahead:")
    for note in notes:
        echo(f"  {note.job}: {note.text}")
