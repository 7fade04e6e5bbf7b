"""`fleetcron job status` and `fleetcron job slots`: one job across all its targets."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, parse_time, print_json, print_table
from fleetcron.core.status_display import STRIP_CHARS
from fleetcron.services.fleet import job_page as svc
from fleetcron.services.fleet.job_page import TargetQuery, TargetRow, TargetsPage
from fleetcron.services.jobs import slots as slots_svc
from fleetcron.services.jobs.slots import SlotGroup
from fleetcron.services.runs.history import Durations, duration_percentiles

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def strip_text(row: TargetRow) -> str:
    return "".join(STRIP_CHARS[mark.state] for mark in row.strip)


def _next_fire(row: TargetRow) -> str:
    """The next fire on the target's own clock when it has a zone, else in UTC."""
    local = row.next_fire_local
    if local is not None:
        return f"{local:%Y-%m-%d %H:%M} {row.timezone}"
    return f"{row.next_fire_at:%Y-%m-%d %H:%M} UTC" if row.next_fire_at else ""


def _duration(ms: int | None) -> str:
    """Milliseconds below a second (a quick command is not "0.0s"), else seconds."""
    if ms is None:
        return ""
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def row_dict(row: TargetRow) -> dict[str, Any]:
    data = asdict(row)
    data["paused"] = row.paused
    data["next_fire_local"] = row.next_fire_local
    data["strip"] = [asdict(mark) | {"state": mark.state} for mark in row.strip]
    return data


@click.command("status")
@click.argument("name")
@click.option(
    "--status",
    "status",
    multiple=True,
    help=f"Only targets in this state (repeat or comma-separate): {', '.join(svc.STATUS_FILTERS)}.",
)
@click.option("--label", "labels", multiple=True, help="Only targets with this label (k=v).")
@click.option(
    "--sort",
    default="target",
    show_default=True,
    help=f"One of {', '.join(svc.SORTS)}; a leading '-' reverses.",
)
@click.option("--limit", type=int, default=100, show_default=True, help="Targets per page.")
@click.option("--offset", type=int, default=0, help="Skip this many targets.")
@click.option(
    "--slots",
    "strip",
    type=click.IntRange(0, svc.STRIP_MAX),
    default=svc.STRIP_DEFAULT,
    show_default=True,
    help="Runs in each target's status strip.",
)
@json_option
@as_user_option
def job_status(
    name: str,
    status: tuple[str, ...],
    labels: tuple[str, ...],
    sort: str,
    limit: int,
    offset: int,
    strip: int,
    as_json: bool,
    as_user: str | None,
) -> None:
    """How job NAME stands on each of its targets: paused or not, the newest runs as a strip
    (oldest first: + ok, X failed, > running, . waiting, m missed, s skipped), the last result, the
    failure streak and the next fire."""
    query = TargetQuery(
        statuses=status, labels=labels, sort=sort, limit=limit, offset=offset, strip=strip
    )
    with opened_app() as app:
        actor = acting(app, as_user)
        page = svc.job_targets(app, actor, name, query)
        durations = duration_percentiles(app, actor, name)
    if as_json:
        print_json(page_dict(page, durations))
        return
    echo(counts_line(page))
    if durations.runs:
        echo(
            f"duration of the last {durations.runs} finished run(s): "
            f"p50 {_duration(durations.p50_ms)}, p95 {_duration(durations.p95_ms)}, "
            f"longest {_duration(durations.max_ms)}"
        )
    _print_targets(page)


def page_dict(page: TargetsPage, durations: Durations) -> dict[str, Any]:
    """``job status --json``."""
    return {
        "job": page.job,
        "origin": page.origin,
        "counts": page.counts.as_dict(),
        "matched": page.matched,
        "limit": page.limit,
        "offset": page.offset,
        "sort": page.sort,
        "items": [row_dict(row) for row in page.items],
        "durations": durations.as_dict(),
    }


def counts_line(page: TargetsPage) -> str:
    """The first line: how many targets, and how they stand."""
    c = page.counts
    return (
        f"job {page.job}: {c.total} target(s): {c.ok} ok, {c.failed} failed, "
        f"{c.running} running, {c.paused} paused"
        + (f", {c.waiting} waiting" if c.waiting else "")
        + (f", {c.never} never ran" if c.never else "")
    )


def _print_targets(page: TargetsPage) -> None:
    """The table of the page's targets, and where the page sits among those matching."""
    print_table(
        None,
        ["target", "paused", "state", "strip", "last run", "exit", "duration", "streak", "next"],
        [
            (
                row.target,
                ("target" if row.target_paused else "job" if not row.enabled else ""),
                row.state,
                strip_text(row),
                row.last.run_id if row.last else "",
                row.last.exit_code if row.last else "",
                _duration(row.last.duration_ms) if row.last else "",
                f"{row.streak_text} since {row.streak_since:%Y-%m-%d %H:%M}"
                if row.streak and row.streak_since
                else "",
                _next_fire(row),
            )
            for row in page.items
        ],
    )
    shown_to = page.offset + len(page.items)
    if shown_to < page.matched or page.offset:
        echo(
            f"targets {page.offset + 1 if page.items else 0}-{shown_to} of {page.matched} "
            f"matching (--offset {shown_to} for more)"
        )


def slot_dict(slot: SlotGroup) -> dict[str, Any]:
    return asdict(slot) | {"failed": slot.failed}


@click.command("slots")
@click.argument("name")
@click.option("--limit", type=int, default=slots_svc.SLOTS_DEFAULT, show_default=True)
@click.option("--before", default=None, help="Only slots before this time (ISO-8601): paging.")
@click.option("--runs", "with_runs", is_flag=True, help="List the run ids of each slot.")
@json_option
@as_user_option
def job_slots(
    name: str,
    limit: int,
    before: str | None,
    with_runs: bool,
    as_json: bool,
    as_user: str | None,
) -> None:
    """The slots of job NAME, newest first: every run of one fire (same scheduled time)
    counted by status; see one slot's runs with `fleetcron runs list --job NAME --since T`."""
    with opened_app() as app:
        page = slots_svc.job_slots(
            app,
            acting(app, as_user),
            name,
            limit=limit,
            before=parse_time(before, "before"),
            run_ids=with_runs,
        )
    if as_json:
        print_json(
            {
                "job": page.job,
                "limit": page.limit,
                "next_before": page.next_before,
                "items": [slot_dict(slot) for slot in page.items],
            }
        )
        return
    print_table(
        f"slots of {page.job}",
        ["slot", "trigger", "runs", "by status"] + (["run ids"] if with_runs else []),
        [
            (
                slot.scheduled_for,
                slot.trigger,
                slot.runs,
                ", ".join(f"{n} {s}" for s, n in sorted(slot.by_status.items())),
            )
            + ((" ".join(map(str, slot.run_ids)),) if with_runs else ())
            for slot in page.items
        ],
    )
    if page.next_before is not None:
        echo(f"older slots: --before {page.next_before.isoformat()}")
