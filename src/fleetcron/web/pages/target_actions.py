"""Target actions from its page: the maintenance pause, unpairing and removal (each
behind a confirmation), and its individual jobs (add one, enable, disable, run now)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from fleetcron.errors import FleetcronError, InvalidInput, NotFound
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.runs import reads as runs_svc
from fleetcron.services.targets import edit as svc
from fleetcron.services.targets import reads as target_reads
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import FieldErrors, Posted, checked, page, plural, redirect, text
from fleetcron.web.pages.jobs import new_individual_job
from fleetcron.web.pages.target_form import ui_message
from fleetcron.web.pages.targets import target_page, target_url

router = APIRouter(include_in_schema=False)


# -- pause and resume ---------------------------------------------------------------------


@router.post("/targets/{name}/pause", response_class=HTMLResponse)
def pause_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.pause"))],
) -> Response:
    reason = text(form, "reason")
    try:
        svc.pause_target(the_app(request), caller.actor, name, reason)
    except InvalidInput as exc:
        if exc.field != "reason":
            raise
        # The page again, with the drawer open and the reason as typed beside the message.
        errors = FieldErrors.at("reason", exc.message)
        return target_page(request, caller, name, pause_reason=reason, pause_errors=errors)
    except FleetcronError as exc:
        return redirect(target_url(name), f"Not paused: {exc.message}", error=True)
    return redirect(
        target_url(name),
        f"Paused target {name}: nothing runs here and each due slot is recorded as skipped. "
        "Every job keeps its own enabled flag.",
    )


@router.post("/targets/{name}/resume", response_class=HTMLResponse)
def resume_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.pause"))],
) -> Response:
    result = svc.resume_target(the_app(request), caller.actor, name)
    if not result.changed:
        return redirect(target_url(name), f"Target {name} was not paused.")
    return redirect(target_url(name), f"Resumed target {name}: jobs continue from their next slot.")


# -- unpair and remove --------------------------------------------------------------------


@router.get("/targets/{name}/unpair", response_class=HTMLResponse)
def confirm_unpair(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.unpair"))]
) -> HTMLResponse:
    target, assignments = target_reads.show_target(the_app(request), caller.actor, name)
    return page(
        request,
        "confirm.html",
        title=f"Unpair target {target.name}?",
        message=(
            f"Nothing more runs on {target.name}: its {plural(len(assignments), 'job assignment')} "
            "are removed. Its individual jobs wait until it is paired again, and jobs disabled "
            "here stay disabled then; the run history stays. For maintenance, “Pause” keeps "
            "everything in place instead."
        ),
        action=f"{target_url(target.name)}/unpair",
        button=f"Unpair {target.name}",
        cancel=target_url(target.name),
        danger=True,
    )


@router.post("/targets/{name}/unpair", response_class=HTMLResponse)
def unpair_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.unpair"))],
) -> Response:
    removed = svc.unpair_target(the_app(request), caller.actor, name)
    return redirect(
        target_url(name), f"Unpaired target {name}; {plural(removed, 'assignment')} removed."
    )


@router.get("/targets/{name}/delete", response_class=HTMLResponse)
def confirm_remove(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.remove"))]
) -> HTMLResponse:
    app = the_app(request)
    target, _ = target_reads.show_target(app, caller.actor, name)
    jobs = target_reads.individual_jobs(app, caller.actor, name)
    message = f"{target.name} and its assignments are removed; the run history stays."
    if jobs:
        message += (
            f" It has {plural(len(jobs), 'individual job')}: they can only be removed with it."
        )
    return page(
        request,
        "target_confirm.html",
        title=f"Remove target {target.name}?",
        message=message,
        items=jobs,
        checkbox=("with_jobs", f"Also remove its {plural(len(jobs), 'individual job')}")
        if jobs
        else None,
        hidden={},
        facts=[],
        action=f"{target_url(target.name)}/delete",
        button=f"Remove {target.name}",
        cancel=target_url(target.name),
        danger=True,
    )


@router.post("/targets/{name}/delete", response_class=HTMLResponse)
def remove_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.remove"))],
) -> Response:
    try:
        result = svc.remove_target(
            the_app(request), caller.actor, name, with_jobs=checked(form, "with_jobs")
        )
    except FleetcronError as exc:
        if isinstance(exc, NotFound):
            raise
        return redirect(f"{target_url(name)}/delete", ui_message(exc, name), error=True)
    removed = (
        f" with {plural(len(result.removed_jobs), 'individual job')}" if result.removed_jobs else ""
    )
    return redirect("/targets", f"Removed target {name}{removed}.")


@router.post("/targets/{name}/jobs", response_class=HTMLResponse)
def add_individual_job(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.add"))],
) -> Response:
    fields, errors, view = new_individual_job(the_app(request), caller.actor, name, form)
    if view is None:
        return target_page(request, caller, name, new_job=fields, errors=errors)
    waiting = "" if view.total else " It waits until the target is paired."
    return redirect(target_url(name), f"Created individual job {view.name}.{waiting}")


def _set_enabled(request: Request, caller: Caller, name: str, job: str, enabled: bool) -> Response:
    try:
        jobs_svc.set_enabled(the_app(request), caller.actor, job, enabled, target=name)
    except FleetcronError as exc:
        return redirect(target_url(name), exc.message, error=True)
    state = "Enabled" if enabled else "Disabled"
    return redirect(target_url(name), f"{state} job {job} on {name}.")


@router.post("/targets/{name}/jobs/{job}/enable", response_class=HTMLResponse)
def enable_here(
    name: str,
    job: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.enable"))],
) -> Response:
    return _set_enabled(request, caller, name, job, True)


@router.post("/targets/{name}/jobs/{job}/disable", response_class=HTMLResponse)
def disable_here(
    name: str,
    job: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.disable"))],
) -> Response:
    return _set_enabled(request, caller, name, job, False)


@router.post("/targets/{name}/jobs/{job}/run", response_class=HTMLResponse)
def run_here(
    name: str,
    job: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.run"))],
) -> Response:
    try:
        run_ids = runs_svc.request_run(the_app(request), caller.actor, job, target=name)
    except FleetcronError as exc:
        return redirect(target_url(name), exc.message, error=True)
    return redirect(
        target_url(name),
        f"Run {', '.join(f'#{i}' for i in run_ids)} of {job} queued; the scheduler starts it "
        "on its next tick and it appears under Recent runs below.",
    )
