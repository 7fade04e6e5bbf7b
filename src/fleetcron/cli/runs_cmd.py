"""`fleetcron runs list|show` and `fleetcron job run`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from fleetcron.app import Actor, App
from fleetcron.cli.context import acting, as_user_option, opened_app, sqlite_file
from fleetcron.cli.output import echo, parse_time, print_json, print_table
from fleetcron.config import mask_url
from fleetcron.services import jobs as jobs_svc
from fleetcron.services import runs as svc
from fleetcron.services.runs import FINISHED_STATUSES, RUN_STATUSES, RunFilter
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


#: Grace for a scheduler to start a queued run: it does on its next tick (every tick_s).
START_GRACE_S = 5.0
#: With no --wait-timeout, wait this long past the job's timeout.
WAIT_MARGIN_S = 60.0


@click.command("run")
@click.argument("name")
@click.option("--target", help="Only on this target (even if the job is paused there).")
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the run(s) to finish and show the outcome; exit 1 unless all succeeded.",
)
@click.option(
    "--wait-timeout",
    type=click.FloatRange(1),
    default=None,
    help="Seconds to wait with --wait (default: the job's timeout plus 60).",
)
@as_user_option
def run_job(
    name: str, target: str | None, wait: bool, wait_timeout: float | None, as_user: str | None
) -> None:
    """Run a job now; the running scheduler starts it on its next tick.

    With --wait, when no scheduler starts the run within a few seconds (one that runs
    starts queued runs on its next tick), say so and exit 1; the run stays queued and
    starts when a scheduler runs.
    """
    with opened_app() as app:
        actor = acting(app, as_user)
        run_ids = svc.request_run(app, actor, name, target=target)
        click.echo(f"queued {len(run_ids)} run(s): {', '.join(map(str, run_ids))}")
        if not wait:
            return
        if wait_timeout is None:
            wait_timeout = jobs_svc.show_job(app, actor, name).timeout_s + WAIT_MARGIN_S
        rows = _wait(app, actor, run_ids, wait_timeout)
    for r in sorted(rows, key=lambda r: r.id):
        echo(f"run {r.id} on {r.target_name}: {r.status} exit={r.exit_code}")
        if r.error:
            echo(f"error: {r.error}")
        if r.stdout_head:
            echo(r.stdout_head.rstrip("\n"))
        if r.stderr_head:
            echo("stderr: " + r.stderr_head.rstrip("\n"))
    if any(r.status != "succeeded" for r in rows):
        raise SystemExit(1)


def _wait(app: App, actor: Actor, run_ids: list[int], wait_timeout: float) -> Sequence[Run]:
    """Poll the runs until all finished; stop with exit 1 when no scheduler starts them
    within the start grace, or at ``wait_timeout``."""
    started = time.monotonic()
    grace = min(max(START_GRACE_S, 3 * app.settings.tick_s), wait_timeout)
    f = RunFilter(run_ids=run_ids)
    picked_up = False
    while True:
        rows, _ = svc.list_runs(app, actor, f, limit=len(run_ids))
        if all(r.status in FINISHED_STATUSES for r in rows):
            return rows
        picked_up = picked_up or any(r.status != "queued" for r in rows)
        waited = time.monotonic() - started
        ids = ", ".join(str(r.id) for r in rows if r.status in ("queued", "running"))
        if not picked_up and waited >= grace:
            _stop(_no_scheduler(app, ids, grace))
        if waited >= wait_timeout:
            _stop(
                f"run(s) {ids} not finished after {wait_timeout:g} s of waiting; "
                f"they go on: follow them with `fleetcron runs show ID`"
            )
        time.sleep(0.25 if not picked_up else 0.5)


def _stop(message: str) -> NoReturn:
    echo(f"error: {message}", err=True)
    raise SystemExit(1)


def _no_scheduler(app: App, ids: str, grace: float) -> str:
    """Why nothing started the queued runs, and what to do: a running scheduler (in a
    cluster, the owner node) starts queued runs on its next tick."""
    settings = app.settings
    path = sqlite_file(settings)
    where = (
        f"data dir {settings.data_dir}"
        if path is not None and not settings.database_url
        else f"database {mask_url(settings.effective_database_url)}"
    )
    start = "start one with `fleetcron serve` (or `fleetcron scheduler`) with the same settings"
    if settings.cluster:
        return (
            f"no node started run(s) {ids} within {grace:g} s: no owner node is running for "
            f"{where} (the owner starts queued runs on its next tick), or the run waits "
            f"for a run of the previous owner to end; see `fleetcron cluster status`, or "
            f"{start}. The run(s) stay queued and start then"
        )
    return (
        f"no scheduler started run(s) {ids} within {grace:g} s, so none is running for "
        f"{where} (a running scheduler starts queued runs on its next tick, every "
        f"{settings.tick_s:g} s); {start}. The run(s) stay queued and start then"
    )
