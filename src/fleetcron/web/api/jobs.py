"""/api/v1/jobs"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response

from fleetcron.app import App
from fleetcron.core.target_zones import effective_zone
from fleetcron.cron import parse
from fleetcron.services.jobs import edit as svc
from fleetcron.services.jobs import plan as plan_svc
from fleetcron.services.jobs.edit import JobSpec, JobView
from fleetcron.services.runs import reads as runs_svc
from fleetcron.web.api.job_fleet import PlanQuery, RunRequestIn
from fleetcron.web.deps import Caller, app_of, requires
from fleetcron.web.schemas import JobIn, JobOut, JobPatch, RunRequestOut, TargetRef

router = APIRouter(prefix="/jobs", tags=["jobs"])
AppDep = Annotated[App, Depends(app_of)]


def job_out(view: JobView) -> JobOut:
    description = parse(view.schedule, effective_zone(view.timezone, None, "UTC")).describe()
    return JobOut.of(view, description)


@router.get("", response_model=list[JobOut])
def list_jobs(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    origin: Literal["bulk", "individual"] | None = None,
    target: Annotated[str | None, Query(max_length=64)] = None,
) -> list[JobOut]:
    return [job_out(v) for v in svc.list_jobs(app, caller.actor, origin=origin, target=target)]


@router.post("", response_model=JobOut, status_code=201)
def add_job(
    body: JobIn, app: AppDep, caller: Annotated[Caller, Depends(requires("job.add"))]
) -> JobOut:
    spec = JobSpec(**body.options())
    svc.add_job(
        app,
        caller.actor,
        body.name,
        spec,
        target=body.target,
        bulk=body.bulk,
        selector=body.selector,
        disabled_on=body.disabled_on,
    )
    return job_out(svc.show_job(app, caller.actor, body.name))


@router.get("/{name}", response_model=JobOut)
def show_job(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("job.read"))]
) -> JobOut:
    return job_out(svc.show_job(app, caller.actor, name))


@router.patch("/{name}", response_model=JobOut)
def edit_job(
    name: str, body: JobPatch, app: AppDep, caller: Annotated[Caller, Depends(requires("job.edit"))]
) -> JobOut:
    changes = body.model_dump(exclude_none=True, exclude={"enabled_on"})
    view = svc.edit_job(app, caller.actor, name, enabled_on=body.enabled_on, **changes)
    return job_out(svc.show_job(app, caller.actor, view.name))


@router.post("/{name}/enable", response_model=JobOut)
def enable_job(
    name: str,
    body: TargetRef,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.enable"))],
) -> JobOut:
    svc.set_enabled(app, caller.actor, name, True, target=body.target)
    return job_out(svc.show_job(app, caller.actor, name))


@router.post("/{name}/disable", response_model=JobOut)
def disable_job(
    name: str,
    body: TargetRef,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.disable"))],
) -> JobOut:
    svc.set_enabled(app, caller.actor, name, False, target=body.target)
    return job_out(svc.show_job(app, caller.actor, name))


@router.post("/{name}/run", response_model=RunRequestOut, status_code=202)
def run_job(
    name: str,
    body: RunRequestIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.run"))],
) -> RunRequestOut:
    selection = body.selection()
    run_ids = runs_svc.request_run(
        app,
        caller.actor,
        name,
        target=None if selection is not None else body.target,
        selection=selection,
        all_at_once=body.all_at_once,
    )
    return RunRequestOut(
        run_ids=run_ids,
        message=f"queued {len(run_ids)} run(s); the scheduler starts them on its next tick",
    )


@router.get("/{name}/plan")
def plan_job_run(
    name: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    choice: Annotated[PlanQuery, Query()],
) -> dict[str, Any]:
    """What ``POST /jobs/{name}/run`` with the same choices would do, run nothing: the
    batches in order, each target's zone and start window, the stop threshold and what it
    halts, the targets left out and why (``fleetcron job plan --json``)."""
    view = plan_svc.plan_job_run(
        app, caller.actor, name, selection=choice.selection(), all_at_once=choice.all_at_once
    )
    return view.as_dict()


@router.delete("/{name}", status_code=204)
def remove_job(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("job.remove"))]
) -> Response:
    svc.remove_job(app, caller.actor, name)
    return Response(status_code=204)
