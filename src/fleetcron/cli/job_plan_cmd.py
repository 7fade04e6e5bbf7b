"""`fleetcron job plan`: what `job run` with the same options would do, run nothing."""

from __future__ import annotations

from typing import Any

import click

from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.job_run_cmd import RunChoice, selection_options
from fleetcron.cli.output import echo, print_json, print_table
from fleetcron.core.run_plan import PlanTarget
from fleetcron.services.jobs.plan import UNREACHABLE_WHY, JobRunPlan, plan_job_run


@click.command("plan")
@click.argument("name")
@selection_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@as_user_option
def plan_job(name: str, choice: RunChoice, as_json: bool, as_user: str | None) -> None:
    """Show what `job run NAME` with the same options would do, without running anything:
    the batches in order (canaries first), each target's zone and start window, the stop
    threshold and what it halts, and the targets left out and why."""
    with opened_app() as app:
        actor = acting(app, as_user)
        view = plan_job_run(
            app,
            actor,
            name,
            target=choice.target,
            selection=choice.selection,
            all_at_once=choice.all_at_once,
        )
    if as_json:
        print_json(view.as_dict())
        return
    _print(view)


def _headline(view: JobRunPlan) -> str:
    plan = view.plan
    o = plan.options
    if not plan.rolled_out:
        why = "asked all at once" if view.all_at_once else "the job has no rollout options"
        return f"plan of {plan.job}: every target at once ({why})"
    parts = []
    if o.canary:
        parts.append(f"canary {o.canary}")
    if o.batch is not None:
        parts.append(f"batch {o.batch}")
    if o.batch_pause_s:
        parts.append(f"{o.batch_pause_s} s between batches")
    if o.max_failures is not None:
        parts.append(f"max_failures {o.max_failures}")
    return f"plan of {plan.job}: rolled out ({', '.join(parts)})"


def _row(number: str, t: PlanTarget, note: str) -> list[Any]:
    window = t.window
    return [
        number,
        t.name,
        t.zone,
        "" if window is None else f"{window.offset_s:g}",
        "" if window is None else f"{window.bound_s:g}",
        "" if t.next_start_local is None else f"{t.next_start_local:%Y-%m-%d %H:%M:%S %Z}",
        note,
    ]


def _print(view: JobRunPlan) -> None:
    plan = view.plan
    echo(_headline(view))
    echo(f"stops: {plan.halts_what()}")
    rows: list[list[Any]] = []
    for batch in plan.batches:
        label = f"{batch.number}{' canary' if batch.canary else ''}"
        for t in batch.starts:
            rows.append(_row(label, t, "unreachable per health" if t.unreachable else ""))
        for t in batch.skipped:
            rows.append(_row(label, t, "target paused: skipped at its turn"))
    print_table(
        None,
        ["Batch", "Target", "Zone", "Offset s", "Starts by s", "Next scheduled start", "Note"],
        rows,
    )
    echo(
        "A run now starts each batch at once; a scheduled slot starts each target at its "
        "offset plus up to the jitter after the slot (Starts by: the latest)."
    )
    for excluded in plan.excluded:
        echo(f"excluded: {excluded.name}: {excluded.why}")
    for name in view.unreachable:
        echo(f"at risk: {name}: {UNREACHABLE_WHY}")
    if view.not_selected:
        echo(f"not selected: {view.not_selected} other target(s) of the job")
    echo(f"{len(plan.order)} target(s) would start; nothing was run.")


__all__ = ["plan_job"]
