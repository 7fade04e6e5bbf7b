"""/api/v1/runs, /api/v1/audit, /api/v1/cron/preview"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from fleetcron.app import App
from fleetcron.cron import parse
from fleetcron.services import audit as audit_svc
from fleetcron.services import runs as svc
from fleetcron.services.audit import AuditFilter
from fleetcron.services.runs import RunFilter, RunStatus
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.schemas import AuditOut, AuditPage, CronPreview, RunOut, RunPage

router = APIRouter(tags=["runs"])
#: Ids fit PostgreSQL's integer columns; larger ones cannot exist.
MAX_ID = 2**31 - 1
AppDep = Annotated[App, Depends(the_app)]
Text = Annotated[str | None, Query(max_length=200)]
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


def as_utc(value: datetime | None) -> datetime | None:
    """A time given without a zone is taken as UTC (as the API documents)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


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
) -> RunPage:
    f = RunFilter(
        job=job, target=target, status=status, since=as_utc(since), until=as_utc(until), grep=q
    )
    rows, total = svc.list_runs(app, caller.actor, f, limit=limit, offset=offset)
    return RunPage(total=total, limit=limit, offset=offset, items=[RunOut.of(r) for r in rows])


@router.get("/runs/{run_id}", response_model=RunOut)
def show_run(
    run_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("run.read"))],
) -> RunOut:
    return RunOut.of(svc.get_run(app, caller.actor, run_id))


@router.get("/audit", response_model=AuditPage)
def list_audit(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("audit.read"))],
    actor: Text = None,
    action: Text = None,
    target: Text = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> AuditPage:
    f = AuditFilter(
        actor=actor, action=action, target=target, since=as_utc(since), until=as_utc(until)
    )
    rows, total = audit_svc.list_events(app, caller.actor, f, limit=limit, offset=offset)
    return AuditPage(total=total, limit=limit, offset=offset, items=[AuditOut.of(e) for e in rows])


@router.get("/cron/preview", response_model=CronPreview)
def cron_preview(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    expr: Annotated[str, Query(min_length=1, max_length=255)],
    tz: Annotated[str | None, Query(max_length=64)] = None,
    n: Annotated[int, Query(ge=1, le=50)] = 5,
) -> CronPreview:
    """Validate an expression and show its next fire times (for live form validation)."""
    schedule = parse(expr, tz or app.settings.timezone)
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
    )
