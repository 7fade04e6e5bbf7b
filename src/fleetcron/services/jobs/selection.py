"""Which targets of a job an operation is for: a targeted run or a re-run of the targets
that did not succeed (:class:`Selection`, :func:`select_assignments`), and pausing or
resuming a job on chosen targets (:func:`set_enabled_on`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
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

#: The words ``--only`` narrows a re-run with (``core/statuses.py``: NOT_SUCCEEDED).
ONLY_CHOICES: tuple[str, ...] = tuple(statuses.NOT_SUCCEEDED)
ONLY_RULE = "one or more of " + ", ".join(ONLY_CHOICES)


def check_only(only: Sequence[str]) -> tuple[str, ...]:
    """The ``only`` words, checked (InvalidInput naming the field, the value and what is
    allowed), without repeats, in the order given."""
    for word in only:
        if word not in ONLY_CHOICES:
            raise InvalidInput(
                f"only: {word!r} is not a way a run did not succeed; allowed: {ONLY_RULE}",
                field="only",
                value=word,
                allowed=ONLY_RULE,
            )
    return tuple(dict.fromkeys(only))


@dataclass(frozen=True)
class Selection:
    """Which targets of a job a manual run (or a bulk pause) is for. Every given part
    narrows the selection; nothing given means every enabled target (today's run now).

    ``failed``: targets whose newest run of the job (their newest slot) did not succeed:
    failed, timed out, halted by the rollout or missed (``core.statuses.NOT_SUCCEEDED``; a
    target whose re-run is already queued, pending or running is not selected again);
    ``only`` narrows that to some of those words, and implies ``failed``; ``slot`` (one
    scheduled time of the job, as its slots list them) looks at the targets' runs of that
    slot instead of their newest, and implies ``failed`` too. ``selector``:
    targets whose labels match. ``targets``: these targets, even where the job is paused
    (as naming one target always did)."""

    failed: bool = False
    selector: str | None = None
    targets: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    slot: datetime | None = None

    @property
    def given(self) -> bool:
        return self.not_succeeded or bool(self.selector) or bool(self.targets)

    @property
    def not_succeeded(self) -> bool:
        return self.failed or bool(self.only) or self.slot is not None

    def audit_detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {}
        if self.not_succeeded:
            detail["failed"] = True
        if self.only:
            detail["only"] = list(self.only)
        if self.slot is not None:
            detail["slot"] = self.slot.isoformat()
        if self.selector:
            detail["selector"] = format_selector(parse_selector(self.selector))
        if self.targets:
            detail["targets"] = list(self.targets)
        return detail


def select_assignments(session: Session, job: Job, selection: Selection) -> list[Assignment]:
    """The assignments of ``job`` a selection names; raises InvalidInput (naming the part
    of the selection) when it matches nothing, NotFound for a target the job lacks."""
    only = check_only(selection.only) or ONLY_CHOICES
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
    if selection.not_succeeded and chosen:
        ids = [a.id for a in chosen]
        if selection.slot is not None:
            words = not_succeeded_in_slot(session, job, ids, selection.slot)
        else:
            words = not_succeeded_of(session, ids)
        chosen = [a for a in chosen if words.get(a.id) in only]
        if not chosen:
            which = "" if only == ONLY_CHOICES else f" ({' or '.join(only)})"
            raise InvalidInput(
                f"failed: no selected target of job {job.name} has a newest run that did not "
                f"succeed{which} (a target whose re-run is queued or running is not "
                "selected again); nothing queued",
                field="failed",
                value="true" if not selection.only else ",".join(only),
                allowed="a job with at least one target whose newest run failed, timed out, "
                "was halted by its rollout or was missed",
            )
    chosen.sort(key=lambda a: a.target.name)
    return chosen


def not_succeeded_of(session: Session, ids: Sequence[int]) -> dict[int, str]:
    """Of these assignments, those whose newest run did not succeed, each with its word
    (``core.statuses.not_succeeded``); an assignment with a manual run waiting (queued, or
    pending its turn in the rollout of a manual run) or running is left out."""
    words: dict[int, str] = {}
    for start in range(0, len(ids), CHUNK):
        part = ids[start : start + CHUNK]
        where = Assignment.id.in_(part)
        found = with_newest(session, [Assignment.id.label("assignment_id")], where)
        halted = {r.last_id for r in found if r.status == RunStatus.SKIPPED.value}
        kinds: dict[int, str | None] = {}
        if halted:
            query = select(Run.id, Run.skip_kind).where(Run.id.in_(halted))
            kinds = {run_id: kind for run_id, kind in session.execute(query)}
        for r in found:
            word = statuses.not_succeeded(r.status, kinds.get(r.last_id))
            if word is not None:
                words[r.assignment_id] = word
        # A waiting manual run is not the assignment's newest run until the owner starts it
        # (store/run_newest.py); it still means the target is already being re-run.
        for aid in session.scalars(
            select(Run.assignment_id).where(
                Run.status.in_(statuses.WAITING), Run.assignment_id.in_(part)
            )
        ):
            words.pop(aid, None)
    return words


def not_succeeded_in_slot(
    session: Session, job: Job, ids: Sequence[int], slot: datetime
) -> dict[int, str]:
    """Of these assignments, those whose run of the job's ``slot`` (its newest attempt
    there) did not succeed, each with its word; one with a manual run waiting or running
    is left out. Raises InvalidInput naming ``slot`` when the job has no run then."""
    words: dict[int, str] = {}
    found = False
    for start in range(0, len(ids), CHUNK):
        part = ids[start : start + CHUNK]
        newest: dict[int, tuple[RunStatus, str | None]] = {}
        for aid, status, kind in session.execute(
            select(Run.assignment_id, Run.status, Run.skip_kind)
            .where(Run.job_id == job.id, Run.scheduled_for == slot, Run.assignment_id.in_(part))
            .order_by(Run.assignment_id, Run.attempt)
        ):
            newest[aid] = (status, kind)  # the last attempt wins
        found = found or bool(newest)
        for aid, (status, kind) in newest.items():
            if (word := statuses.not_succeeded(status, kind)) is not None:
                words[aid] = word
        for aid in session.scalars(
            select(Run.assignment_id).where(
                Run.status.in_(statuses.ACTIVE), Run.assignment_id.in_(part)
            )
        ):
            words.pop(aid, None)
    if not found:
        raise InvalidInput(
            f"slot: job {job.name} has no run of the selected targets at {slot.isoformat()}",
            field="slot",
            value=slot.isoformat(),
            allowed="a slot time of the job, as `job slots` or the job page lists it",
        )
    return words


def set_enabled_on(app: App, actor: Actor, name: str, targets: Sequence[str], enabled: bool) -> int:
    """Pause (``enabled=False``) or resume job ``name`` on the named targets; returns how
    many changed. Each change is the jobs service's own (audited per target, with its
    rules for the next fire); every name is checked before any change is made."""
    actor.authorize_in("job.enable" if enabled else "job.disable")
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
