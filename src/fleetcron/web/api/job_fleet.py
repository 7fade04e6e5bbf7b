"""/api/v1/jobs/{name}/targets, /slots, /pause, /resume: one job across all its targets.

The run request body (:class:`RunRequestIn`) is read by ``POST /api/v1/jobs/{name}/run``
in :mod:`fleetcron.web.api.jobs`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from fleetcron.app import App
from fleetcron.errors import InvalidInput
from fleetcron.services.fleet import job_page as svc
from fleetcron.services.fleet.job_page import TargetQuery, TargetRow
from fleetcron.services.fleet.states import PAGE_MAX
from fleetcron.services.jobs import slots as slots_svc
from fleetcron.services.jobs.selection import Selection, check_only, set_enabled_on
from fleetcron.services.jobs.slots import SLOTS_DEFAULT, SLOTS_MAX, SlotGroup
from fleetcron.web.api.runs import as_utc
from fleetcron.web.deps import Caller, app_of, requires
from fleetcron.web.schemas import Body, TargetRef

router = APIRouter(prefix="/jobs", tags=["jobs"])
AppDep = Annotated[App, Depends(app_of)]
TargetName = Annotated[str, Field(min_length=1, max_length=64)]


class RunRequestIn(TargetRef):
    """Which targets a manual run is for: one ``target`` (as before), or a selection.
    ``failed``, ``selector`` and ``targets`` narrow together; none given means every
    target where the job is enabled."""

    failed: bool = False
    #: With ``failed`` (implied): only targets that did not succeed this way (failed,
    #: timed_out, halted, missed).
    only: Annotated[list[Annotated[str, Field(max_length=20)]] | None, Field(max_length=4)] = None
    #: With ``failed`` (implied): the targets' runs of this slot, not their newest.
    slot: datetime | None = None
    selector: Annotated[str | None, Field(max_length=500)] = None
    targets: Annotated[list[TargetName] | None, Field(max_length=10_000)] = None
    #: Start every target at once, without the job's rollout (audited as such).
    all_at_once: bool = False

    def selection(self) -> Selection | None:
        return selection_of(
            self.failed, self.only, self.selector, self.targets, self.target, slot=self.slot
        )


class PlanQuery(BaseModel):
    """The query of ``GET /api/v1/jobs/{name}/plan``: the choices of a run request, as query
    parameters (``target`` repeated for several targets)."""

    target: Annotated[list[TargetName] | None, Field(max_length=10_000)] = None
    failed: bool = False
    only: Annotated[list[Annotated[str, Field(max_length=20)]] | None, Field(max_length=4)] = None
    selector: Annotated[str | None, Field(max_length=500)] = None
    slot: datetime | None = None
    all_at_once: bool = False

    def selection(self) -> Selection | None:
        return selection_of(self.failed, self.only, self.selector, self.target, slot=self.slot)


def selection_of(
    failed: bool,
    only: list[str] | None,
    selector: str | None,
    targets: list[str] | None,
    target: str | None = None,
    *,
    slot: datetime | None = None,
) -> Selection | None:
    """The selection a run request (or a plan's query) names; None for every target.
    Raises InvalidInput (naming the field) for an empty list or selector, or an unknown
    ``only`` word."""
    # An empty selection given explicitly selects nothing; it never means "every
    # target" (a script whose list came out empty must not run the whole fleet).
    if targets is not None and not targets:
        raise InvalidInput(
            "targets: an empty list selects no target; nothing queued "
            "(leave targets out to run on every target)",
            field="targets",
            value=[],
            allowed="one or more target names",
        )
    if selector is not None and not selector.strip():
        raise InvalidInput(
            "selector: an empty selector selects no target; nothing queued "
            "(leave selector out to run on every target)",
            field="selector",
            value=selector,
            allowed="labels such as env=prod",
        )
    words = check_only(only or ())
    at = as_utc(slot, "slot")
    if not (failed or words or at or selector or targets):
        return None
    chosen = (*(targets or ()), *([target] if target else []))
    return Selection(failed=failed, selector=selector, targets=chosen, only=words, slot=at)


class TargetsIn(Body):
    targets: Annotated[list[TargetName], Field(min_length=1, max_length=10_000)]


class ChangedOut(BaseModel):
    changed: int
    message: str


class SlotMarkOut(BaseModel):
    run_id: int
    status: str
    state: str
    scheduled_for: datetime


class LastResultOut(BaseModel):
    run_id: int
    status: str
    exit_code: int | None
    duration_ms: int | None
    scheduled_for: datetime
    started_at: datetime | None
    finished_at: datetime | None
    trigger: str
    url: str


class TargetRowOut(BaseModel):
    target: str
    labels: dict[str, str]
    enabled: bool
    target_paused: bool
    paused: bool
    state: str
    last: LastResultOut | None
    streak: int
    """Failed runs since the newest success, counted up to 100."""
    streak_more: bool
    """The streak is longer than ``streak`` (then 100)."""
    streak_since: datetime | None
    next_fire_at: datetime | None
    timezone: str | None = None
    """The target's own zone, when set."""
    next_fire_local: datetime | None = None
    """The next fire on the target's wall clock (with its offset), when it has a zone."""
    strip: list[SlotMarkOut]

    @classmethod
    def of(cls, row: TargetRow) -> TargetRowOut:
        last = None
        if row.last is not None:
            last = LastResultOut(**row.last.__dict__, url=f"/api/v1/runs/{row.last.run_id}")
        return cls(
            target=row.target,
            labels=row.labels,
            enabled=row.enabled,
            target_paused=row.target_paused,
            paused=row.paused,
            state=row.state,
            last=last,
            streak=row.streak,
            streak_more=row.streak_more,
            streak_since=row.streak_since,
            next_fire_at=row.next_fire_at,
            timezone=row.timezone,
            next_fire_local=row.next_fire_local,
            strip=[
                SlotMarkOut(
                    run_id=m.run_id, status=m.status, state=m.state, scheduled_for=m.scheduled_for
                )
                for m in row.strip
            ],
        )


class TargetsPageOut(BaseModel):
    job: str
    origin: str
    counts: dict[str, int]
    matched: int
    limit: int
    offset: int
    sort: str
    items: list[TargetRowOut]


class SlotOut(BaseModel):
    scheduled_for: datetime
    trigger: str
    runs: int
    failed: int
    by_status: dict[str, int]
    run_ids: list[int]
    runs_url: str

    @classmethod
    def of(cls, job: str, slot: SlotGroup) -> SlotOut:
        data: dict[str, Any] = {
            **slot.__dict__,
            "run_ids": list(slot.run_ids),
            "failed": slot.failed,
            "runs_url": "/api/v1/runs?" + urlencode(slot_filter(job, slot.scheduled_for)),
        }
        return cls(**data)


def slot_filter(job: str, at: datetime) -> dict[str, str]:
    """The runs-list filter of exactly one slot: its job, from its time to a microsecond
    after (times are stored to the microsecond)."""
    return {
        "job": job,
        "since": at.isoformat(),
        "until": (at + timedelta(microseconds=1)).isoformat(),
    }


class SlotsPageOut(BaseModel):
    job: str
    limit: int
    next_before: datetime | None
    items: list[SlotOut]


@router.get("/{name}/targets", response_model=TargetsPageOut)
def job_targets(
    name: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.read"))],
    status: Annotated[list[str] | None, Query(max_length=20)] = None,
    label: Annotated[list[str] | None, Query(max_length=20)] = None,
    sort: Annotated[str, Query(max_length=20)] = "target",
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    strip: Annotated[int, Query(ge=0, le=svc.STRIP_MAX)] = svc.STRIP_DEFAULT,
) -> TargetsPageOut:
    query = TargetQuery(
        statuses=status or (),
        labels=label or (),
        sort=sort,
        limit=limit,
        offset=offset,
        strip=strip,
    )
    page = svc.job_targets(app, caller.actor, name, query)
    return TargetsPageOut(
        job=page.job,
        origin=page.origin,
        counts=page.counts.as_dict(),
        matched=page.matched,
        limit=page.limit,
        offset=page.offset,
        sort=page.sort,
        items=[TargetRowOut.of(row) for row in page.items],
    )


@router.get("/{name}/slots", response_model=SlotsPageOut)
def job_slots(
    name: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.read"))],
    limit: Annotated[int, Query(ge=1, le=SLOTS_MAX)] = SLOTS_DEFAULT,
    before: datetime | None = None,
    runs: bool = False,
) -> SlotsPageOut:
    page = slots_svc.job_slots(
        app, caller.actor, name, limit=limit, before=as_utc(before, "before"), run_ids=runs
    )
    return SlotsPageOut(
        job=page.job,
        limit=page.limit,
        next_before=page.next_before,
        items=[SlotOut.of(page.job, slot) for slot in page.items],
    )


@router.post("/{name}/pause", response_model=ChangedOut)
def pause_on(
    name: str,
    body: TargetsIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.disable"))],
) -> ChangedOut:
    changed = set_enabled_on(app, caller.actor, name, body.targets, False)
    return ChangedOut(changed=changed, message=f"paused job {name} on {changed} target(s)")


@router.post("/{name}/resume", response_model=ChangedOut)
def resume_on(
    name: str,
    body: TargetsIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.enable"))],
) -> ChangedOut:
    changed = set_enabled_on(app, caller.actor, name, body.targets, True)
    return ChangedOut(changed=changed, message=f"resumed job {name} on {changed} target(s)")
