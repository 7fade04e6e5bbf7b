"""/api/v1/runs (with a running run's output and its stop), /api/v1/audit,
/api/v1/cron/preview"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from fleetcron.app import App
from fleetcron.core.dst_preview import notes_ahead
from fleetcron.core.stopping import StopFacts
from fleetcron.core.target_zones import TARGET_LOCAL, dst_policy
from fleetcron.cron import parse
from fleetcron.errors import InvalidInput
from fleetcron.services import audit as audit_svc
from fleetcron.services.audit import AuditFilter
from fleetcron.services.runs import reads as svc
from fleetcron.services.runs import retention
from fleetcron.services.runs import views as run_views
from fleetcron.services.runs.reads import LiveSource, LiveView, RunFilter, RunStatus
from fleetcron.services.runs.search import search_runs
from fleetcron.web.api.targets import target_local_preview
from fleetcron.web.deps import Caller, app_of, requires, the_app
from fleetcron.web.schemas import AuditOut, AuditPage, CronPreview, RunOut, RunPage

router = APIRouter(tags=["runs"])
#: Ids fit PostgreSQL's integer columns; larger ones cannot exist.
MAX_ID = 2**31 - 1
AppDep = Annotated[App, Depends(app_of)]
Text = Annotated[str | None, Query(max_length=200)]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


def as_utc(value: datetime | None, parameter: str) -> datetime | None:
    """A time given without a zone is taken as UTC (as the API documents). A time that is
    no instant between the years 1 and 9999 in UTC (``9999-12-31T23:59:59-11:00``) is
    refused here, naming the query ``parameter``, before the database is asked."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(
            f"{parameter}: {value.isoformat()!r} is out of range: in UTC it falls outside "
            "the years 1-9999",
            field=parameter,
            value=value.isoformat(),
            allowed="a time between the years 1 and 9999 in UTC",
        ) from None
    return value


@router.get("/runs", response_model=RunPage)
def list_runs(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.read"))],
    job: Text = None,
    target: Text = None,
    status: RunStatus | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    q: Text = None,
    limit: Limit = 50,
    offset: Offset = 0,
    cursor: Text = None,
) -> RunPage:
    f = RunFilter(
        job=job,
        target=target,
        status=status,
        since=as_utc(since, "since"),
        until=as_utc(until, "until"),
        grep=q,
    )
    found = search_runs(app, caller.actor, f, limit=limit, offset=offset, cursor=cursor)
    return RunPage(
        total=found.matched,
        total_capped=found.more,
        limit=limit,
        offset=offset,
        next_cursor=found.next_cursor,
        items=[RunOut.of(r) for r in found.runs],
    )


@router.get("/runs/{run_id}", response_model=RunOut)
def show_run(
    run_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.read"))],
) -> RunOut:
    return RunOut.of(run_views.show_run(app, caller.actor, run_id))


def live_source(request: Request) -> LiveSource | None:
    """The live runs of the scheduler in this process (``fleetcron serve``), if any."""
    live: LiveSource | None = getattr(request.app.state.scheduler, "live", None)
    return live


def local_stop(request: Request) -> Callable[[int, str], bool] | None:
    """This process's scheduler's ``stop``, if it runs one."""
    stop: Callable[[int, str], bool] | None = getattr(request.app.state.scheduler, "stop", None)
    return stop


class LiveOutputOut(BaseModel):
    """A run's output from byte ``since`` on (``GET /runs/{id}/output``).

    Poll again with ``since=offset`` while ``running``. ``gap`` bytes in the middle were no
    longer kept (the follower fell behind the bounded buffer, or the recorded output kept
    only the head and tail), at ``gap_at`` characters into ``text``. ``source``: ``live``
    (this node runs it), ``snapshot`` (another node does: its last write, taken at
    ``as_of``, every few seconds), ``recorded`` (it has ended: the recorded output from
    byte ``since`` of what a follower saw while it ran; for a run that wrote to both
    stdout and stderr, from 0 only: both streams, stdout first, and from further on no
    text and the rest as ``gap``, see ``GET /runs/{id}``), ``none`` (nothing to show yet:
    queued, or nothing written yet on another node)."""

    run_id: int
    status: str
    running: bool
    node: str
    here: bool
    source: str
    text: str
    offset: int
    gap: int
    gap_at: int
    total: int
    started_at: datetime | None
    finished_at: datetime | None
    elapsed_s: float | None
    as_of: datetime | None
    stop_requested_by: str | None

    @classmethod
    def of(cls, view: LiveView, now: datetime, node: str) -> LiveOutputOut:
        end = view.finished_at or now
        elapsed = (end - view.started_at).total_seconds() if view.started_at else None
        fields: dict[str, Any] = {
            name: getattr(view, name)
            for name in (
                "run_id", "status", "running", "node", "source", "text", "offset", "gap",
                "gap_at", "total", "started_at", "finished_at", "as_of", "stop_requested_by",
            )
        }  # fmt: skip
        return cls(**fields, here=view.node == node, elapsed_s=elapsed)


class StopFactsOut(BaseModel):
    """What a stop touches and does (``GET /runs/{id}/stop``, asked before stopping):
    the run's job, target, node and start, what ``effect`` a stop has on it, and who
    already asked for a stop, and when."""

    run_id: int
    job: str
    target: str
    status: str
    node: str
    started_at: datetime | None
    effect: str
    stop_requested_by: str | None
    stop_requested_at: datetime | None

    @classmethod
    def of(cls, facts: StopFacts) -> StopFactsOut:
        return cls(
            run_id=facts.run_id,
            job=facts.job,
            target=facts.target,
            status=facts.status,
            node=facts.node,
            started_at=facts.started_at,
            effect=facts.effect,
            stop_requested_by=facts.requested_by,
            stop_requested_at=facts.requested_at,
        )


class StopOut(BaseModel):
    """What ``POST /runs/{id}/stop`` did: ``cancelled`` (it had not started), or
    ``running`` with the stop requested; ``immediate`` when this node runs it and killed
    it at once (otherwise its node does on its next tick). ``run``: the facts of the run
    as the stop found it (``stop_requested_by``: the first to ask)."""

    run_id: int
    status: str
    node: str
    immediate: bool
    run: StopFactsOut


@router.get("/runs/{run_id}/output", response_model=LiveOutputOut)
def run_output(
    run_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    request: Request,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.read"))],
    since: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> LiveOutputOut:
    view = svc.follow_output(app, caller.actor, run_id, since, live=live_source(request))
    return LiveOutputOut.of(view, app.now(), app.node_name)


@router.get("/runs/{run_id}/stop", response_model=StopFactsOut)
def stop_facts(
    run_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.stop"))],
) -> StopFactsOut:
    """What stopping a run would touch and do, without stopping it; 409 when it has ended."""
    return StopFactsOut.of(svc.stop_facts(app, caller.actor, run_id))


@router.post("/runs/{run_id}/stop", response_model=StopOut, status_code=202)
def stop_run(
    run_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    request: Request,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.stop"))],
) -> StopOut:
    """Stop a queued or running run (operator); 409 when it has already ended."""
    outcome = svc.stop_run(app, caller.actor, run_id, local_stop=local_stop(request))
    return StopOut(
        run_id=outcome.run_id,
        status=outcome.status,
        node=outcome.node,
        immediate=outcome.immediate,
        run=StopFactsOut.of(outcome.facts),
    )


class AuditQuery(BaseModel):
    """The query of ``GET /api/v1/audit``."""

    actor: Annotated[str | None, Field(max_length=200)] = None
    action: Annotated[str | None, Field(max_length=200)] = None
    target: Annotated[str | None, Field(max_length=200)] = None
    since: datetime | None = None
    until: datetime | None = None
    #: only the events about this project's objects (a role there, or a global role)
    project: Annotated[str | None, Field(max_length=200)] = None
    limit: Annotated[int, Field(ge=1, le=1000)] = 50
    offset: Annotated[int, Field(ge=0, le=10_000_000)] = 0

    def audit_filter(self) -> AuditFilter:
        return AuditFilter(
            actor=self.actor,
            action=self.action,
            target=self.target,
            since=as_utc(self.since, "since"),
            until=as_utc(self.until, "until"),
            project=self.project,
        )


@router.get("/audit", response_model=AuditPage)
def list_audit(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("audit.read"))],
    query: Annotated[AuditQuery, Query()],
) -> AuditPage:
    """Audit events, newest first: every event for a global role (``?project=``: that
    project's), a project's events for a role there."""
    limit, offset = query.limit, query.offset
    rows, total = audit_svc.list_event_views(
        app, caller.actor, query.audit_filter(), limit=limit, offset=offset
    )
    return AuditPage(total=total, limit=limit, offset=offset, items=[AuditOut.of(e) for e in rows])


@router.get("/cron/preview", response_model=CronPreview)
def cron_preview(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    *,
    expr: Annotated[str, Query(min_length=1, max_length=255)],
    tz: Annotated[str | None, Query(max_length=64)] = None,
    n: Annotated[int, Query(ge=1, le=50)] = 5,
    dst_gap: Annotated[str | None, Query(max_length=32)] = None,
    dst_fold: Annotated[str | None, Query(max_length=32)] = None,
) -> CronPreview:
    """Validate an expression and show its next fire times (for live form validation),
    under the job's DST choices ``dst_gap`` and ``dst_fold`` (default: Debian cron's rule),
    with ``dst``: what it does at the zone's DST transitions in the next year.
    ``tz=target`` (each target's own zone): ``next`` merges the fires over the zones of
    the paired targets, and ``zones`` gives each zone's count of targets and its fires."""
    dst = dst_policy(dst_gap, dst_fold)
    if tz == TARGET_LOCAL:
        return target_local_preview(app, caller.actor, expr, n, dst=dst)
    schedule = parse(expr, tz or app.settings.timezone, dst)
    fires = []
    for when in schedule.iter_after(app.now()):
        fires.append(when)
        if len(fires) == n:
            break
    return CronPreview(
        normalized=schedule.normalized,
        description=schedule.describe(),
        timezone=schedule.tz.key,
        extensions=list(schedule.extensions),
        next=fires,
        dst=[note.text for note in notes_ahead(expr, schedule.tz.key, dst, app.now())],
    )


@router.get("/retention")
def retention_status(
    request: Request,
    caller: Annotated[Caller, Depends(requires("settings.manage"))],
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
) -> dict[str, Any]:
    """How long runs are kept (by outcome, the jobs keeping their own days) and the
    cleaner's newest rounds that deleted something (``fleetcron runs retention``)."""
    return retention.status(the_app(request), caller.actor, limit=limit).as_dict()
