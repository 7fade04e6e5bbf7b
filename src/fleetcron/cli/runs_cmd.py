"""`fleetcron runs list|show|tail|stop`."""

from __future__ import annotations

import time
from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import ID, FiniteFloatRange, echo, parse_time, print_json, print_table
from fleetcron.core.stopping import StopFacts
from fleetcron.services.runs import reads as svc
from fleetcron.services.runs import retention
from fleetcron.services.runs.reads import RUN_STATUSES, RunFilter
from fleetcron.services.runs.views import RunView, list_run_views, show_run

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


#: What a pending row waits for (as the runs page says it).
PENDING_NOTE = "waits for its turn in the rollout"


def run_dict(run: RunView, *, full: bool = False) -> dict[str, Any]:
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
        "stop_requested_by": run.stop_requested_by,
        "job_version": run.job_version,
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
@click.option("--offset", type=click.IntRange(0, 10_000_000), default=0)
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
        rows, total = list_run_views(app, acting(app, as_user), f, limit=limit, offset=offset)
    if as_json:
        print_json({"total": total, "runs": [run_dict(r) for r in rows]})
        return
    if not rows:
        click.echo("no runs match")
        return
    _print_runs(rows, total)


def _print_runs(rows: list[RunView], total: int) -> None:
    """The runs as a table, each status with its reason (or, pending, why it may wait)."""
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
                _status_cell(r),
                r.exit_code,
                None if r.duration_ms is None else f"{r.duration_ms}ms",
                r.node,
            )
            for r in rows
        ],
    )


def _status_cell(r: RunView) -> str:
    if r.reason:
        return f"{r.status}: {r.reason}"
    if r.status == "pending":
        return f"{r.status}: {PENDING_NOTE}"
    return r.status


def _show(run: RunView) -> None:
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
        "stop_requested_by",
        "job_version",
    ):
        if data[key] is not None:
            echo(f"{key + ':':<14} {data[key]}")
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
@click.argument("run_id", type=ID)
@json_option
@as_user_option
def show(run_id: int, as_json: bool, as_user: str | None) -> None:
    """Show one run with its full output excerpts."""
    with opened_app() as app:
        run = show_run(app, acting(app, as_user), run_id)
    if as_json:
        print_json(run_dict(run, full=True))
    else:
        _show(run)


@runs.command("tail")
@click.argument("run_id", type=ID)
@click.option(
    "--interval",
    type=FiniteFloatRange(0.1, 60),
    default=1.0,
    show_default=True,
    help="Seconds between looks at the run.",
)
@as_user_option
def tail(run_id: int, interval: float, as_user: str | None) -> None:
    """Follow a run's output while it runs (stdout and stderr interleaved), until it ends.

    The node running it writes the tail of the output to the database every few seconds;
    this command prints what it wrote, so what it shows is at most that old. Terminal
    escape sequences in the output are shown as text. A run that has already ended shows
    its recorded output."""
    with opened_app() as app:
        actor = acting(app, as_user)
        offset, printed, where = 0, False, ""
        while True:
            view = svc.follow_output(app, actor, run_id, offset)
            if not view.running and not offset and not printed:
                break  # it had ended: shown below as `runs show` shows it
            if view.running and view.node != where and view.status == "running":
                where = view.node
                echo(f"--- run {run_id} running on node {where}", err=True)
            if view.source == "recorded" and view.gap and not view.text:
                # What the follower missed cannot be told apart (both streams wrote).
                echo(f"\n[... the last seconds of output: see `fleetcron runs show {run_id}`]")
            elif view.gap:
                echo(view.text[: view.gap_at], nl=False)
                echo(f"\n[... {view.gap} bytes not shown ...]\n", nl=False)
                echo(view.text[view.gap_at :], nl=False)
            elif view.text:
                echo(view.text, nl=False)
            printed = printed or bool(view.text)
            offset = view.offset
            if not view.running:
                break
            time.sleep(interval)
        run = show_run(app, actor, run_id)
    if not printed and not offset:
        _show(run)
        return
    if view.text and not view.text.endswith("\n"):
        click.echo()
    end = f"exit {run.exit_code}" if run.exit_code is not None else (run.reason or run.error)
    echo(f"--- run {run_id} {run.status}" + (f": {end}" if end else ""), err=True)


def stop_fact_lines(facts: StopFacts) -> list[str]:
    """The facts the web's confirmation shows, one per line, for ``runs stop``."""
    since = facts.started_at.isoformat(timespec="seconds") if facts.started_at else "not started"
    lines = [
        f"job:           {facts.job}",
        f"target:        {facts.target}",
        f"node:          {facts.node}",
        f"running since: {since}",
    ]
    if facts.requested_by and facts.requested_at:
        at = facts.requested_at.isoformat(timespec="seconds")
        lines.append(f"stopped by:    {facts.requested_by} at {at}")
    lines.append(f"what stop does: {facts.effect}")
    return lines


@runs.command("stop")
@click.argument("run_id", type=ID)
@click.option("--wait", is_flag=True, help="Wait until the run is recorded as ended.")
@click.option(
    "--wait-timeout",
    type=FiniteFloatRange(0.1, 3600),
    default=60.0,
    show_default=True,
    help="Seconds to wait with --wait.",
)
@json_option
@as_user_option
def stop(run_id: int, wait: bool, wait_timeout: float, as_json: bool, as_user: str | None) -> None:
    """Stop a queued or running run (operator): its whole process group is killed, locally
    or on the target, and it is recorded as cancelled.

    The request is written to the database; the node running the run kills it on its next
    tick. A queued run is cancelled at once. A run that has ended cannot be stopped (exit 2).
    """
    with opened_app() as app:
        actor = acting(app, as_user)
        outcome = svc.stop_run(app, actor, run_id)
        run = show_run(app, actor, run_id)
        if wait and outcome.status == "running":
            deadline = time.monotonic() + wait_timeout
            while run.status == "running" and time.monotonic() < deadline:
                time.sleep(0.25)
                run = show_run(app, actor, run_id)
    if as_json:
        print_json(
            {
                "run": run_id,
                "requested": outcome.status,
                "node": outcome.node,
                "effect": outcome.facts.effect,
                **run_dict(run),
            }
        )
        return
    for line in stop_fact_lines(outcome.facts):
        echo(line)
    if outcome.status == "cancelled":
        echo(f"run {run_id} cancelled before it started")
    elif run.status == "running":
        echo(
            f"run {run_id}: stop requested; node {outcome.node} kills it on its next tick"
            + (f" (still running after {wait_timeout:g} s)" if wait else "")
        )
        if wait:
            raise SystemExit(1)
    else:
        echo(f"run {run_id} {run.status}" + (f": {run.reason}" if run.reason else ""))


@runs.command("retention")
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="How many of the newest rounds that deleted something.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def retention_status(limit: int, as_json: bool, as_user: str | None) -> None:
    """How long runs are kept (by outcome, with the jobs keeping their own days) and what
    the cleaner deleted lately, and when (the audit's retention.prune events)."""
    with opened_app() as app:
        found = retention.status(app, acting(app, as_user), limit=limit)
    if as_json:
        print_json(found.as_dict())
        return
    p = found.policy
    echo(
        f"successes kept {p.success_days} days, failures {p.failure_days} days, "
        f"other runs {p.other_days} days"
    )
    echo(
        f"newest {p.keep_last} run(s) of each job on each target always kept; "
        f"at most {p.max_runs} per job on each target"
    )
    for days, ids in sorted(p.job_successes.items()):
        echo(f"{len(ids)} job(s) keep their successes {days} days")
    for days, ids in sorted(p.job_failures.items()):
        echo(f"{len(ids)} job(s) keep their failures {days} days")
    echo("audit events kept " + (f"{p.audit_days} days" if p.audit_days else "forever"))
    if not found.recent:
        echo("the cleaner has deleted nothing yet")
        return
    print_table(
        "recent rounds",
        ["at", "by", "succeeded", "failed", "other", "beyond count", "audit", "complete"],
        [
            _round_row(r.at.isoformat(sep=" ", timespec="seconds"), r.actor, r.detail)
            for r in found.recent
        ],
    )


def _round_row(at: str, actor: str, detail: Any) -> list[Any]:
    outcome = detail.get("runs_by_outcome") or {}
    return [
        at,
        actor,
        outcome.get("succeeded", ""),
        outcome.get("failed", ""),
        outcome.get("other", detail.get("runs_by_age", "") if not outcome else ""),
        detail.get("runs_by_count", 0),
        detail.get("audit_events", 0),
        "yes" if detail.get("complete", True) else "no (continues)",
    ]
