"""The plan of a manual run of a job, shown before anything runs (``job plan``,
``GET /api/v1/jobs/{name}/plan``, the job page's Preview), and the two choices the run
itself makes from the same code: which targets it covers (:func:`chosen_assignments`)
and whether it is rolled out (:func:`rolled_out_run`).

Its home is ``jobs/``: a plan is the job's rollout options over the job's targets and the
job's selection of them. ``runs/reads.request_run`` (below it in the import order) calls
the same functions, so a preview and the run that follows it choose the same targets and
the same policy; the waves themselves come from ``core/run_plan.py``, which plays the
scheduler's own :func:`~fleetcron.core.rollout.plan_rollout` forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.rollout import RolloutOptions, manual_run_options, rollout_options
from fleetcron.core.run_plan import EXCLUDED_WHY, Excluded, PlanTarget, RunPlan, plan_run
from fleetcron.core.start_window import start_window
from fleetcron.core.statuses import RunStatus
from fleetcron.core.target_zones import effective_zone
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.fleet.assignments import get_target
from fleetcron.services.jobs.edit import get_job
from fleetcron.services.jobs.selection import (
    ONLY_CHOICES,
    Selection,
    not_succeeded_of,
    select_assignments,
)
from fleetcron.services.projects.scope import place
from fleetcron.store.schema import Assignment, Job

#: Why a target is flagged "unreachable" (health's word: its newest finished run of the
#: job could not connect).
UNREACHABLE_WHY = (
    "unreachable per health: its newest run of this job could not connect; it is tried "
    "in its turn and a connection error counts toward max_failures"
)


def chosen_assignments(
    session: Session,
    job: Job,
    *,
    target: str | None = None,
    selection: Selection | None = None,
) -> list[Assignment]:
    """The assignments a manual run of ``job`` covers: every enabled one, or the one on
    ``target`` (even where the job is paused), or those a selection names. Raises
    NotFound for a target the job lacks, InvalidInput when nothing is left."""
    assignments = [a for a in job.assignments if a.enabled]
    if target is not None:
        the_target = get_target(session, target, job.project_id, shared=True)
        assignments = [a for a in job.assignments if a.target_id == the_target.id]
        if not assignments:
            raise NotFound(f"assignment of job {job.name} on target", target)
    if selection is not None and selection.given:
        assignments = select_assignments(session, job, selection)
    if not assignments:
        raise InvalidInput(
            f"job {job.name} is not enabled on any target",
            field="job",
            value=job.name,
            allowed="a job with at least one enabled target, or --target",
        )
    return sorted(assignments, key=lambda a: a.target.name)


def job_rollout(job: Job) -> RolloutOptions:
    """The job's rollout options as stored (checked when saved; InvalidInput otherwise)."""
    return rollout_options(job.batch, job.batch_pause_s, job.max_failures, job.canary)


def rolled_out_run(job: Job, *, all_at_once: bool) -> bool:
    """Whether a manual run of ``job`` goes through its rollout (batches, canaries, the
    stop threshold) as a scheduled slot does: yes, unless asked all at once or the job has
    no rollout options."""
    return not all_at_once and job_rollout(job).active


def plan_targets(
    job: Job, assignments: Sequence[Assignment], default_zone: str
) -> list[PlanTarget]:
    """The plan's view of each assignment: its zone, canary flag (matched as the
    scheduler matches it), paused target, health's unreachable flag, and its start window
    in the job's next scheduled slot."""
    options = job_rollout(job)
    found = []
    for a in assignments:
        t = a.target
        zone = effective_zone(job.timezone, t.timezone, default_zone)
        window = start_window(job.id, t.id, spread_s=job.spread_s, jitter_s=job.jitter_s)
        local = None
        if a.next_fire_at is not None:
            start = a.next_fire_at + timedelta(seconds=window.delay_s)
            local = start.astimezone(ZoneInfo(zone))
        found.append(
            PlanTarget(
                assignment_id=a.id,
                name=t.name,
                zone=zone,
                canary=options.canary.matches(t.name, dict(t.labels or {})),
                paused=bool(t.paused),
                unreachable=a.newest_finished_status == RunStatus.CONNECT_ERROR,
                window=window,
                next_start_local=local,
            )
        )
    return found


def excluded_of(job: Job, chosen: Sequence[Assignment]) -> list[Excluded]:
    """The job's targets a run leaves out because it cannot run there (unpaired, or the
    job paused on it), with why; targets a selection merely did not name are not listed."""
    taken = {a.id for a in chosen}
    out = []
    for a in sorted(job.assignments, key=lambda a: a.target.name):
        if a.id in taken:
            continue
        if not a.target.paired:
            out.append(Excluded(a.target.name, EXCLUDED_WHY["unpaired"]))
        elif not a.enabled:
            out.append(Excluded(a.target.name, EXCLUDED_WHY["disabled"]))
    return out


@dataclass(frozen=True)
class JobRunPlan:
    """What a manual run of a job would do, for the CLI, the API and the page."""

    plan: RunPlan
    #: The selection as the audit log records it ({} for every enabled target).
    selection: dict[str, Any]
    all_at_once: bool
    #: The job's targets the selection did not name (not listed one by one).
    not_selected: int

    @property
    def unreachable(self) -> list[str]:
        return [t.name for b in self.plan.batches for t in b.starts if t.unreachable]

    @property
    def paused(self) -> list[str]:
        return [t.name for b in self.plan.batches for t in b.skipped]

    def as_dict(self) -> dict[str, Any]:
        data = self.plan.as_dict()
        data.update(
            selection=self.selection,
            all_at_once=self.all_at_once,
            not_selected=self.not_selected,
            unreachable=[{"target": n, "why": UNREACHABLE_WHY} for n in self.unreachable],
        )
        return data


def plan_job_run(
    app: App,
    actor: Actor,
    name: str,
    *,
    target: str | None = None,
    selection: Selection | None = None,
    all_at_once: bool = False,
) -> JobRunPlan:
    """The plan of ``job run`` with the same arguments: nothing is written or run."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        job = get_job(session, name, place(session, actor))
        chosen = chosen_assignments(session, job, target=target, selection=selection)
        targets = plan_targets(job, chosen, app.settings.timezone)
        excluded = excluded_of(job, chosen)
        options = manual_run_options(job_rollout(job), any(t.canary for t in targets))
        plan = plan_run(
            job.name,
            targets,
            options,
            all_at_once=not rolled_out_run(job, all_at_once=all_at_once),
            excluded=excluded,
        )
        detail = selection.audit_detail() if selection is not None and selection.given else {}
        if target is not None:
            detail["targets"] = [target]
        not_selected = len(job.assignments) - len(chosen) - len(excluded)
        return JobRunPlan(plan, detail, all_at_once, max(not_selected, 0))


def not_succeeded_counts(app: App, actor: Actor, name: str) -> dict[str, int]:
    """How many of the job's targets a re-run of what did not succeed would take, by word
    (``failed``, ``timed_out``, ``halted``, ``missed``; a word with none is left out)."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        job = get_job(session, name, place(session, actor))
        words = not_succeeded_of(session, [a.id for a in job.assignments])
    counts: dict[str, int] = {}
    for word in words.values():
        counts[word] = counts.get(word, 0) + 1
    return {word: counts[word] for word in ONLY_CHOICES if word in counts}


__all__ = [
    "UNREACHABLE_WHY",
    "JobRunPlan",
    "chosen_assignments",
    "excluded_of",
    "job_rollout",
    "not_succeeded_counts",
    "plan_job_run",
    "plan_targets",
    "rolled_out_run",
]
