"""Targets: the list, adding and pairing, and each target's page with its individual jobs,
the bulk jobs that cover it and its recent runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from fleetcron.core import validation as v
from fleetcron.errors import FleetcronError, NotFound
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services import jobs as jobs_svc
from fleetcron.services import runs as runs_svc
from fleetcron.services import targets as svc
from fleetcron.services.runs import RunFilter
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import (
    NO_ERRORS,
    FieldErrors,
    Posted,
    checked,
    field_errors,
    page,
    plural,
    redirect,
    split_items,
    text,
    whole_number,
)
from fleetcron.web.pages.jobs import JobFields, describe, job_form_context, new_individual_job

router = APIRouter(include_in_schema=False)

RECENT_RUNS = 20
PENDING = frozenset({"queued", "running"})
#: Service field names -> the target form's field names.
FIELD_NAMES = {"key": "private_key", "label": "labels"}


@dataclass(frozen=True)
class TargetFields:
    """The add-target form as typed. The private key is never sent back to the browser."""

    name: str = ""
    kind: str = "ssh"
    host: str = ""
    port: str = "22"
    user: str = "root"
    host_key: str = ""
    trust_on_first_use: bool = False
    labels: str = ""
    notes: str = ""

    @classmethod
    def posted(cls, form: FormData) -> TargetFields:
        return cls(
            name=text(form, "name").strip(),
            kind=text(form, "kind", "ssh"),
            host=text(form, "host").strip(),
            port=text(form, "port"),
            user=text(form, "user").strip(),
            host_key=text(form, "host_key").strip(),
            trust_on_first_use=checked(form, "trust_on_first_use"),
            labels=text(form, "labels"),
            notes=text(form, "notes").replace("\r\n", "\n"),
        )


def _target_form(
    request: Request, fields: TargetFields, errors: FieldErrors = NO_ERRORS
) -> HTMLResponse:
    return page(
        request,
        "target_form.html",
        status_code=422 if errors else 200,
        fields=fields,
        errors=errors,
    )


@router.get("/targets", response_class=HTMLResponse)
def list_targets(
    request: Request, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> HTMLResponse:
    app = the_app(request)
    targets = svc.list_targets(app, caller.actor)
    last = {}
    for target in targets:
        rows, _ = runs_svc.list_runs(app, caller.actor, RunFilter(target=target.name), limit=1)
        if rows:
            last[target.name] = rows[0]
    return page(request, "targets.html", targets=targets, last=last)


@router.get("/targets/new", response_class=HTMLResponse)
def new_target(
    request: Request, caller: Annotated[Caller, Depends(requires("target.add"))]
) -> HTMLResponse:
    return _target_form(request, TargetFields())


def _exists(request: Request, caller: Caller, name: str) -> bool:
    try:
        svc.show_target(the_app(request), caller.actor, name)
    except NotFound:
        return False
    return True


@router.post("/targets/new", response_class=HTMLResponse)
def add_target(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.add"))],
) -> Response:
    app = the_app(request)
    fields = TargetFields.posted(form)
    local = fields.kind == "local"
    private_key = text(form, "private_key").replace("\r\n", "\n").strip()
    existed = bool(fields.name) and _exists(request, caller, fields.name)
    try:
        v.validate_choice(fields.kind, ("ssh", "local"), field="kind")
        result = svc.add_target(
            app,
            caller.actor,
            fields.name,
            local=local,
            host=None if local else fields.host,
            port=whole_number(fields.port, field="port", default=22) or 22,
            user=None if local else fields.user,
            private_key=None if local or not private_key else (private_key + "\n").encode(),
            host_key=None if local else fields.host_key or None,
            trust_on_first_use=fields.trust_on_first_use,
            labels=split_items(fields.labels),
            notes=fields.notes,
        )
    except FleetcronError as exc:
        if not existed and _exists(request, caller, fields.name):
            # Added, but pairing failed: the target page offers to pair again.
            return redirect(f"/targets/{quote(fields.name)}", exc.message, error=True)
        return _target_form(request, fields, field_errors(exc, FIELD_NAMES))
    message = f"Added and paired target {result.target.name}."
    if result.host_key_fingerprint:
        message += f" Host key {result.host_key_fingerprint}"
        if result.trusted_on_first_use:
            message += " (trusted on first use: compare it with the server's own key)"
        message += "."
    if result.extended_jobs:
        message += f" {plural(len(result.extended_jobs), 'bulk job')} now cover it."
    return redirect(f"/targets/{quote(result.target.name)}", message)


def _target_page(
    request: Request,
    caller: Caller,
    name: str,
    *,
    new_job: JobFields | None = None,
    errors: FieldErrors = NO_ERRORS,
) -> HTMLResponse:
    app = the_app(request)
    target, assignments = svc.show_target(app, caller.actor, name)
    enabled_here = {a.job.name: a.enabled for a in assignments}
    individual = jobs_svc.list_jobs(app, caller.actor, origin="individual", target=name)
    bulk = jobs_svc.list_jobs(app, caller.actor, origin="bulk", target=name)
    runs, total_runs = runs_svc.list_runs(
        app, caller.actor, RunFilter(target=name), limit=RECENT_RUNS
    )
    return page(
        request,
        "target.html",
        status_code=422 if errors else 200,
        target=target,
        host_key_fingerprint=fingerprint(target.host_key) if target.host_key else None,
        individual=individual,
        bulk=bulk,
        enabled_here=enabled_here,
        descriptions={view.name: describe(view) for view in (*individual, *bulk)},
        runs=runs,
        total_runs=total_runs,
        pending=any(run.status in PENDING for run in runs),
        new_job=new_job or JobFields(timezone=app.settings.timezone),
        errors=errors,
        **job_form_context(app),
    )


@router.get("/targets/{name}", response_class=HTMLResponse)
def show_target(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> HTMLResponse:
    return _target_page(request, caller, name)


def _here(name: str) -> str:
    return f"/targets/{quote(name)}"


@router.post("/targets/{name}/pair", response_class=HTMLResponse)
def pair_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.pair"))],
) -> Response:
    try:
        result = svc.pair_target(
            the_app(request),
            caller.actor,
            name,
            host_key=text(form, "host_key").strip() or None,
            trust_on_first_use=checked(form, "trust_on_first_use"),
        )
    except FleetcronError as exc:
        return redirect(_here(name), f"Not paired: {exc.message}", error=True)
    message = f"Paired target {name}."
    if result.host_key_fingerprint:
        message += f" Host key {result.host_key_fingerprint}."
    if result.extended_jobs:
        message += f" {plural(len(result.extended_jobs), 'job')} now run here."
    return redirect(_here(name), message)


@router.get("/targets/{name}/unpair", response_class=HTMLResponse)
def confirm_unpair(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.unpair"))]
) -> HTMLResponse:
    target, assignments = svc.show_target(the_app(request), caller.actor, name)
    return page(
        request,
        "confirm.html",
        title=f"Unpair target {target.name}?",
        message=(
            f"Nothing more runs on {target.name}: its {plural(len(assignments), 'job assignment')} "
            "are removed, including which bulk jobs were paused here. Its individual jobs wait "
            "until it is paired again; the run history stays."
        ),
        action=f"{_here(target.name)}/unpair",
        button=f"Unpair {target.name}",
        cancel=_here(target.name),
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
        _here(name), f"Unpaired target {name}; {plural(removed, 'assignment')} removed."
    )


@router.post("/targets/{name}/jobs", response_class=HTMLResponse)
def add_individual_job(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.add"))],
) -> Response:
    fields, errors, view = new_individual_job(the_app(request), caller.actor, name, form)
    if view is None:
        return _target_page(request, caller, name, new_job=fields, errors=errors)
    waiting = "" if view.total else " It waits until the target is paired."
    return redirect(_here(name), f"Created individual job {view.name}.{waiting}")


def _set_enabled(request: Request, caller: Caller, name: str, job: str, enabled: bool) -> Response:
    try:
        jobs_svc.set_enabled(the_app(request), caller.actor, job, enabled, target=name)
    except FleetcronError as exc:
        return redirect(_here(name), exc.message, error=True)
    state = "Enabled" if enabled else "Disabled"
    return redirect(_here(name), f"{state} job {job} on {name}.")


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
        return redirect(_here(name), exc.message, error=True)
    return redirect(
        _here(name),
        f"Run {', '.join(f'#{i}' for i in run_ids)} of {job} queued; the scheduler starts it "
        "on its next tick and it appears under Recent runs below.",
    )
