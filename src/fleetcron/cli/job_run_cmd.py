"""`fleetcron job run`: queue manual runs, and optionally wait for their outcome."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

import click

from fleetcron.app import Actor, App
from fleetcron.cli.context import acting, as_user_option, opened_app, sqlite_file
from fleetcron.cli.output import FiniteFloatRange, echo, parse_time
from fleetcron.config_view import mask_url
from fleetcron.core.statuses import ACTIVE, WAITING
from fleetcron.errors import InvalidInput
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.jobs.selection import ONLY_CHOICES, Selection, check_only
from fleetcron.services.runs import reads as svc
from fleetcron.services.runs.reads import FINISHED_STATUSES, RunFilter
from fleetcron.services.runs.views import RunView, list_run_views

#: Grace for a scheduler to start a queued run: it does on its next tick (every tick_s).
START_GRACE_S = 5.0
#: With no --wait-timeout, wait this long past the job's timeout.
WAIT_MARGIN_S = 60.0


@dataclass(frozen=True)
class RunChoice:
    """What the options of `job run` and `job plan` chose: one target, or a selection (None
    for both: every target where the job is enabled), and whether to skip the rollout."""

    target: str | None
    selection: Selection | None
    all_at_once: bool


#: The options that choose a run's targets, in the order of their help.
SELECTION_OPTIONS: tuple[Callable[[Callable[..., None]], Callable[..., None]], ...] = (
    click.option(
        "--target",
        "targets",
        multiple=True,
        help="Only on this target (even if the job is paused there); repeat for several.",
    ),
    click.option(
        "--failed",
        is_flag=True,
        help="Only on the targets whose newest run of this job did not succeed: "
        "failed, timed out, halted by the rollout, or missed.",
    ),
    click.option(
        "--only",
        "only",
        multiple=True,
        help=f"With --failed, only the targets that did not succeed this way "
        f"(repeat for several): {', '.join(ONLY_CHOICES)}. Implies --failed.",
    ),
    click.option(
        "--slot",
        default=None,
        help="With --failed, look at the targets' runs of this slot (its time, as "
        "`job slots` lists it) instead of their newest. Implies --failed.",
    ),
    click.option(
        "--selector",
        default=None,
        help="Only on the enabled targets whose labels match (k=v[,k=v]).",
    ),
    click.option(
        "--all-at-once",
        is_flag=True,
        help="Start every selected target at once, without the job's rollout "
        "(canaries, batches, max_failures); recorded as such in the audit log.",
    ),
)


def selection_options(command: Callable[..., None]) -> Callable[..., None]:
    """--target, --failed, --only, --slot, --selector and --all-at-once: shared by `job run`
    and `job plan`, which must choose the same targets the same way. The command gets them
    as one checked ``choice`` (:class:`RunChoice`)."""

    @functools.wraps(command)
    def chosen(
        *args: object,
        targets: tuple[str, ...],
        failed: bool,
        only: tuple[str, ...],
        slot: str | None,
        selector: str | None,
        all_at_once: bool,
        **kwargs: object,
    ) -> None:
        target, selection = selection_of(targets, failed, only, slot, selector)
        command(*args, choice=RunChoice(target, selection, all_at_once), **kwargs)

    decorated: Callable[..., None] = chosen
    for option in reversed(SELECTION_OPTIONS):
        decorated = option(decorated)
    return decorated


def selection_of(
    targets: tuple[str, ...],
    failed: bool,
    only: tuple[str, ...],
    slot: str | None,
    selector: str | None,
) -> tuple[str | None, Selection | None]:
    """The one target, or the selection, the options name (checked: an empty selector or
    an unknown --only word is InvalidInput, exit 2, before anything is read)."""
    if selector is not None and not selector.strip():
        # "--selector $SEL" with SEL empty must not become a run on every target.
        raise InvalidInput(
            "selector: an empty selector selects no target; nothing queued "
            "(leave --selector out to run on every target)",
            field="selector",
            value=selector,
            allowed="labels such as env=prod",
        )
    only = check_only(only)
    at = parse_time(slot, "slot")
    if len(targets) <= 1 and not failed and not only and at is None and not selector:
        return (targets[0] if targets else None), None
    return None, Selection(failed=failed, selector=selector, targets=targets, only=only, slot=at)


@click.command("run")
@click.argument("name")
@selection_options
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the run(s) to finish and show the outcome; exit 1 unless all succeeded.",
)
@click.option(
    "--wait-timeout",
    type=FiniteFloatRange(1),
    default=None,
    help="Seconds to wait with --wait (default: the job's timeout plus 60).",
)
@as_user_option
def run_job(
    name: str,
    choice: RunChoice,
    wait: bool,
    wait_timeout: float | None,
    as_user: str | None,
) -> None:
    """Run a job now; the running scheduler starts it on its next tick.

    --failed (narrowed by --only), --selector and --target narrow the targets (together:
    those matching all); a selection that matches no target queues nothing and exits 2.

    A job with rollout options (canary, batch, max_failures) runs through them, as a
    scheduled slot does; --all-at-once starts every target at once. `fleetcron job plan`
    with the same options shows what would happen, without running anything.

    With --wait, when no scheduler starts the run within a few seconds (one that runs
    starts queued runs on its next tick), say so and exit 1; the run stays queued and
    starts when a scheduler runs.
    """
    with opened_app() as app:
        actor = acting(app, as_user)
        run_ids = svc.request_run(
            app,
            actor,
            name,
            target=choice.target,
            selection=choice.selection,
            all_at_once=choice.all_at_once,
        )
        click.echo(f"queued {len(run_ids)} run(s): {', '.join(map(str, run_ids))}")
        if not wait:
            return
        if wait_timeout is None:
            wait_timeout = jobs_svc.show_job(app, actor, name).timeout_s + WAIT_MARGIN_S
        rows = _wait(app, actor, run_ids, wait_timeout)
    _echo_outcomes(rows)
    if any(r.status != "succeeded" for r in rows):
        raise SystemExit(1)


def _echo_outcomes(rows: Sequence[RunView]) -> None:
    """Each run's outcome by id: status and exit code, then why, the error and the heads
    of its output, as far as there are any."""
    for r in sorted(rows, key=lambda r: r.id):
        echo(f"run {r.id} on {r.target_name}: {r.status} exit={r.exit_code}")
        if r.reason:
            echo(f"reason: {r.reason}")  # a target the rollout halted says why
        if r.error:
            echo(f"error: {r.error}")
        if r.stdout_head:
            echo(r.stdout_head.rstrip("\n"))
        if r.stderr_head:
            echo("stderr: " + r.stderr_head.rstrip("\n"))


def _wait(app: App, actor: Actor, run_ids: list[int], wait_timeout: float) -> Sequence[RunView]:
    """Poll the runs until all finished; stop with exit 1 when no scheduler starts them
    within the start grace, or at ``wait_timeout``."""
    started = time.monotonic()
    grace = min(max(START_GRACE_S, 3 * app.settings.tick_s), wait_timeout)
    f = RunFilter(run_ids=run_ids)
    picked_up = False
    while True:
        rows, _ = list_run_views(app, actor, f, limit=len(run_ids))
        if all(r.status in FINISHED_STATUSES for r in rows):
            return rows
        # Pending rows wait for their turn in the rollout: the first wave starting is the
        # sign that a scheduler took the request up.
        picked_up = picked_up or any(r.status not in WAITING for r in rows)
        waited = time.monotonic() - started
        ids = ", ".join(str(r.id) for r in rows if r.status in ACTIVE)
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
