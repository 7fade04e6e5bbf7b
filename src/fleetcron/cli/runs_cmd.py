"""`fleetcron runs list|show`."""

from __future__ import annotations

from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import echo, parse_time, print_json, print_table
from fleetcron.services import runs as svc
from fleetcron.services.runs import RUN_STATUSES, RunFilter
from fleetcron.store.schema import Run

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def run_dict(run: Run, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": run.id,
        "job": run.job_name,
        "target": run.target_name,
        "origin": run.origin,
        "scheduled_for": run.scheduled_for,
        "trigger": run.trigger,
        "attempt": run.attempt,
        "status": run.status,
        "reason": run.reason,
        "exit_code": run.exit_code,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_ms": run.duration_ms,
        "node": run.node,
        "actor": run.actor,
        "error": run.error,
    }
    if full:
        data["command"] = run.command
        for stream in ("stdout", "stderr"):
            data[stream] = {
                "head": getattr(run, f"{stream}_head"),
                "tail": getattr(run, f"{stream}_tail"),
                "bytes": getattr(run, f"{stream}_bytes"),
                "truncated": getattr(run, f"{stream}_truncated"),
            }
    return data


@click.group()
def runs() -> None:
    """What ran, what failed, what was skipped or missed and why."""


@runs.command("list")
@click.option("--job", help="Only this job.")
@click.option("--target", help="Only this target.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(RUN_STATUSES),
    help="Only this status; repeat for any of several (--status failed --status timed_out).",
)
@click.option("--since", help="Only slots at or after this ISO-8601 time.")
@click.option("--grep", "grep", help="Only runs whose output or error contains this text.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0)
@json_option
@as_user_option
def list_(
    job: str | None,
    target: str | None,
    statuses: tuple[str, ...],
    since: str | None,
    grep: str | None,
    limit: int,
    offset: int,
    as_json: bool,
    as_user: str | None,
) -> None:
    """List runs, newest first."""
    f = RunFilter(
        job=job,
        target=target,
        statuses=list(dict.fromkeys(statuses)) or None,
        since=parse_time(since, "since"),
        grep=grep,
    )
    with opened_app() as app:
        rows, total = svc.list_runs(app, acting(app, as_user), f, limit=limit, offset=offset)
    if as_json:
        print_json({"total": total, "runs": [run_dict(r) for r in rows]})
        return
    if not rows:
        click.echo("no runs match")
        return
    print_table(
        f"{len(rows)} of {total} run(s)",
        ["id", "slot", "job", "target", "trigger", "status", "exit", "took", "node"],
        [
            (
                r.id,
                r.scheduled_for,
                r.job_name,
                r.target_name,
                r.trigger,
                r.status if not r.reason else f"{r.status}: {r.reason}",
                r.exit_code,
                None if r.duration_ms is None else f"{r.duration_ms}ms",
                r.node,
            )
            for r in rows
        ],
    )


def _show(run: Run) -> None:
    data = run_dict(run, full=True)
    for key in (
        "id",
        "job",
        "target",
        "origin",
        "command",
        "scheduled_for",
        "trigger",
        "attempt",
        "status",
        "reason",
        "exit_code",
        "error",
        "started_at",
        "finished_at",
        "duration_ms",
        "node",
        "actor",
    ):
        if data[key] is not None:
            echo(f"{key + ':':15}{data[key]}")
    for stream in ("stdout", "stderr"):
        out = data[stream]
        note = f" (truncated: {out['bytes']} bytes in all)" if out["truncated"] else ""
        echo(f"--- {stream}{note}")
        echo(out["head"], nl=False)
        if out["truncated"]:
            echo(f"\n[... middle omitted ...]\n{out['tail']}", nl=False)
        elif out["tail"]:
            echo(out["tail"], nl=False)


@runs.command("show")
@click.argument("run_id", type=int)
@json_option
@as_user_option
def show(run_id: int, as_json: bool, as_user: str | None) -> None:
    """Show one run with its full output excerpts."""
    with opened_app() as app:
        run = svc.get_run(app, acting(app, as_user), run_id)
    if as_json:
        print_json(run_dict(run, full=True))
    else:
        _show(run)
