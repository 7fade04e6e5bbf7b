"""Which targets of a job an operation is for: a targeted or re-run of the failed targets
(:class:`Selection`, :func:`select_assignments`), and pausing or resuming a job on chosen
targets (:func:`set_enabled_on`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.labels import format_selector, parse_selector, selector_matches
from fleetcron.core.statuses import RunStatus
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.fleet.states import CHUNK, with_newest
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.store.schema import Assignment, Job, Run

#: Statuses that count as "did not succeed" for a re-run of the failed targets.
RERUN_STATUSES = statuses.FAILED


@dataclass(frozen=True)
class Selection:
    """Which targets of a job a manual run (or a bulk pause) is for. Every given part
    narrows the selection; nothing given means every enabled target (today's run now).

    ``failed``: targets whose newest run of the job did not succeed (one of
    :data:`RERUN_STATUSES`; a target whose re-run is already queued or running is not
    selected again). ``selector``: targets whose labels match. ``targets``: these targets,
    even where the job is paused (as naming one target always did)."""

    failed: bool = False
    selector: str | None = None
    targets: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        return self.failed or bool(self.selector) or bool(self.targets)

    def audit_detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {}
        if self.failed:
            detail["failed"] = True
        if self.selector:
            detail["selector"] = format_selector(parse_selector(self.selector))
        if self.targets:
            detail["targets"] = list(self.targets)
        return detail


def select_assignments(session: Session, job: Job, selection: Selection) -> list[Assignment]:
    """The assignments of ``job`` a selection names; raises InvalidInput (naming the part
    of the selection) when it matches nothing, NotFound for a target the job lacks."""
    chosen = list(job.assignments)
    if selection.targets:
        by_name = {a.target.name: a for a in job.assignments}
        missing = [t for t in selection.targets if t not in by_name]
        if missing:
            raise NotFound(f"assignment of job {job.name} on target", ", ".join(missing))
        chosen = [by_name[t] for t in dict.fromkeys(selection.targets)]
    else:
        chosen = [a for a in chosen if a.enabled]
    if selection.selector:
        wanted = parse_selector(selection.selector)
        chosen = [a for a in chosen if selector_matches(wanted, a.target.labels)]
        if not chosen:
            raise InvalidInput(
                f"selector: no target of job {job.name} matches {format_selector(wanted)}"
                f"{'' if selection.targets else ' where the job is enabled'}; nothing queued",
                field="selector",
                value=selection.selector,
                allowed="a selector matching at least one of the job's targets",
            )
    if selection.failed and chosen:
        ids = [a.id for a in chosen]
        newest: dict[int, str | None] = {}
        for start in range(0, len(ids), CHUNK):
            where = Assignment.id.in_(ids[start : start + CHUNK])
            found = with_newest(session, [Assignment.id.label("assignment_id")], where)
            newest.update((r.assignment_id, r.status) for r in found)
            # A queued re-run is not the assignment's newest run until the owner starts it
            # (store/run_newest.py); it still means the target is already being re-run.
            newest.update(
                (aid, RunStatus.QUEUED.value)
                for aid in session.scalars(
                    select(Run.assignment_id).where(
                        Run.status == RunStatus.QUEUED,
                        Run.assignment_id.in_(ids[start : start + CHUNK]),
                    )
                )
            )
        chosen = [a for a in chosen if newest.get(a.id) in RERUN_STATUSES]
        if not chosen:
            raise InvalidInput(
                f"failed: no selected target of job {job.name} has a failed newest run "
                "(a target whose re-run is queued or running is not selected again); "
                "nothing queued",
                field="failed",
                value="true",
                allowed="a job with at least one target whose newest run did not succeed",
            )
    chosen.sort(key=lambda a: a.target.name)
    return chosen


def set_enabled_on(app: App, actor: Actor, name: str, targets: Sequence[str], enabled: bool) -> int:
    """Pause (``enabled=False``) or resume job ``name`` on the named targets; returns how
    many changed. Each change is the jobs service's own (audited per target, with its
    rules for the next fire); every name is checked before any change is made."""
    actor.authorize("job.enable" if enabled else "job.disable")
    if not targets:
        raise InvalidInput(
            "targets: select at least one target",
            field="targets",
            value="",
            allowed="one or more of the job's targets",
        )
    view = jobs_svc.show_job(app, actor, name)
    have = {a.target: a.enabled for a in view.assignments}
    missing = [t for t in targets if t not in have]
    if missing:
        raise NotFound(f"assignment of job {name} on target", ", ".join(missing))
    changed = 0
    for target in dict.fromkeys(targets):
        if have[target] != enabled:
            jobs_svc.set_enabled(app, actor, name, enabled, target=target)
            changed += 1
    return changed
