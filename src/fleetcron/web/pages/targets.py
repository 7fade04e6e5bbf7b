"""Targets: the list, adding, editing and pairing, re-pinning a host key, the maintenance
pause, removal, and each target's page with its individual jobs, the bulk jobs that cover
it and its recent runs.

Every target error is shown in the page's own words (what to click or type), never as
command-line advice: see :func:`ui_message`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated
from urllib.parse import quote
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from fleetcron.core import statuses
from fleetcron.core import validation as v
from fleetcron.core.permissions import allowed
from fleetcron.errors import (
    Conflict,
    FleetcronError,
    HostKeyMismatch,
    InvalidInput,
    NotFound,
    PermissionDenied,
)
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services import jobs as jobs_svc
from fleetcron.services import runs as runs_svc
from fleetcron.services import target_runs
from fleetcron.services import targets as svc
from fleetcron.services.fleet import zone_of
from fleetcron.services.pairing import PairResult
from fleetcron.services.runs import RunFilter
from fleetcron.store.schema import Assignment, Target
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
from fleetcron.web.pages.jobs import (
    JobFields,
    describe,
    job_form_context,
    new_individual_job,
    zone_names,
)

router = APIRouter(include_in_schema=False)

RECENT_RUNS = 20
PENDING = frozenset(statuses.ACTIVE)
#: Service field names -> the target form's field names.
FIELD_NAMES = {"key": "private_key", "label": "labels", "with_jobs": "with_jobs"}


def ui_message(exc: FleetcronError, name: str, where: str = "page") -> str:
    """The error as the web page says it: the service's diagnosis, then what to click or
    tick here. ``where`` is ``page`` (the target's page), ``add`` or ``edit`` (the form)."""
    message = exc.message.rstrip(".")
    if isinstance(exc, HostKeyMismatch) or svc.REPIN_ADVICE in exc.message:
        if where == "edit":
            return (
                f"{message}. Paste the server's new host key below, or tick “trust the key the "
                "server offers now”, and save again."
            )
        return (
            f"{message}. Use “Re-pin host key” on the page of {name} to compare the new "
            "fingerprint with the server's own and pin it."
        )
    if isinstance(exc, Conflict) and exc.field == "host":
        return f"{message}. Tick “Same server as another target, on purpose” to save it anyway."
    if isinstance(exc, Conflict) and exc.field == "with_jobs":
        return f"{message}. Tick “Also remove its individual jobs” to remove them with it."
    if isinstance(exc, InvalidInput) and exc.field == "host_key":
        return (
            f"{message}. Paste the server's host key (for example from ssh-keyscan), or tick "
            "“trust the key the server offers now”."
        )
    if isinstance(exc, InvalidInput) and exc.field == "kind" and exc.value == "local":
        return f"{message}."
    if "was added but not paired" in exc.message:
        return f"{message}. Correct the connection with “Edit”, then press “Pair”."
    if "was not changed" in exc.message:
        return (
            f"{message}. Correct the values, or tick “Save without checking” (the target is "
            "then unpaired until you pair it)."
        )
    return exc.message


@dataclass(frozen=True)
class TargetFields:
    """The add and edit target form as typed. The private key is never sent back."""

    name: str = ""
    kind: str = "ssh"
    host: str = ""
    port: str = "22"
    user: str = "root"
    host_key: str = ""
    trust_on_first_use: bool = False
    labels: str = ""
    notes: str = ""
    allow_same_host: bool = False
    no_verify: bool = False
    timezone: str = ""

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
            allow_same_host=checked(form, "allow_same_host"),
            no_verify=checked(form, "no_verify"),
            timezone=text(form, "timezone").strip(),
        )

    @classmethod
    def of(cls, target: Target) -> TargetFields:
        """The edit form of an existing target (the host key field stays empty: keep)."""
        return cls(
            name=target.name,
            kind=target.kind,
            host=target.host or "",
            port=str(target.port or 22),
            user=target.user or "root",
            labels=", ".join(f"{k}={val}" for k, val in sorted(target.labels.items())),
            notes=target.notes,
            timezone=target.timezone or "",
        )


def _port(typed: str) -> int:
    """The port as typed; only an empty field means the SSH default (a typed ``0`` goes to
    the service, which refuses it with the allowed range)."""
    port = whole_number(typed, field="port", default=svc.DEFAULT_SSH_PORT)
    return svc.DEFAULT_SSH_PORT if port is None else port


def _local_offered(request: Request, caller: Caller) -> bool:
    """Whether the form offers the local kind: enabled on this host, and the caller an admin."""
    return the_app(request).settings.allow_local_targets and allowed(
        caller.actor.role, "target.local"
    )


def _target_form(
    request: Request,
    caller: Caller,
    fields: TargetFields,
    errors: FieldErrors = NO_ERRORS,
    *,
    target: Target | None = None,
) -> HTMLResponse:
    return page(
        request,
        "target_form.html",
        status_code=422 if errors else 200,
        fields=fields,
        errors=errors,
        target=target,
        local_offered=_local_offered(request, caller)
        or (target is not None and target.kind == "local"),
        local_enabled=the_app(request).settings.allow_local_targets,
        host_key_fingerprint=fingerprint(target.host_key) if target and target.host_key else None,
        notes_max=v.NOTES_MAX_CHARS,
        name_max=v.NAME_MAX_CHARS,
        default_port=svc.DEFAULT_SSH_PORT,
        zones=zone_names(),
        default_zone=the_app(request).settings.timezone,
    )


def _form_errors(exc: FleetcronError, name: str, where: str) -> FieldErrors:
    placed = field_errors(exc, FIELD_NAMES)
    worded = ui_message(exc, name, where)
    if placed.by_field:
        field = next(iter(placed.by_field))
        return FieldErrors({field: worded}, placed.summary)
    return FieldErrors({}, worded)


@router.get("/targets", response_class=HTMLResponse)
def list_targets(
    request: Request, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> HTMLResponse:
    app = the_app(request)
    targets = svc.list_targets(app, caller.actor)
    # One statement for every target's newest run (not two per target).
    newest = target_runs.last_started_runs(app, caller.actor, [t.id for t in targets])
    last = {t.name: newest[t.id] for t in targets if t.id in newest}
    return page(request, "targets.html", targets=targets, last=last)


@router.get("/targets/new", response_class=HTMLResponse)
def new_target(
    request: Request, caller: Annotated[Caller, Depends(requires("target.add"))]
) -> HTMLResponse:
    return _target_form(request, caller, TargetFields())


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
            port=_port(fields.port),
            user=None if local else fields.user,
            private_key=None if local or not private_key else (private_key + "\n").encode(),
            host_key=None if local else fields.host_key or None,
            trust_on_first_use=fields.trust_on_first_use,
            labels=split_items(fields.labels),
            notes=fields.notes,
            allow_same_host=fields.allow_same_host,
            timezone=fields.timezone or None,
        )
    except PermissionDenied:
        raise  # a 403 page (a local target asked for by an operator), not a form error
    except FleetcronError as exc:
        if not existed and _exists(request, caller, fields.name):
            # Added, but pairing failed: the target page offers Edit and Pair.
            return redirect(_here(fields.name), ui_message(exc, fields.name), error=True)
        return _target_form(request, caller, fields, _form_errors(exc, fields.name, "add"))
    message = f"Added and paired target {result.target.name}."
    if result.host_key_fingerprint:
        message += f" Host key {result.host_key_fingerprint}"
        if result.trusted_on_first_use:
            message += " (trusted on first use: compare it with the server's own key)"
        message += "."
    if result.extended_jobs:
        message += f" {plural(len(result.extended_jobs), 'bulk job')} now cover it."
    message += f" {_zone_sentence(result, app.settings.timezone)}"
    return redirect(_here(result.target.name), message)


def _zone_sentence(result: PairResult, default_zone: str) -> str:
    """What pairing found out about the target's time zone (never a failure)."""
    if result.timezone:
        return f"Time zone {result.timezone} ({result.timezone_note})."
    return (
        f"Time zone {result.timezone_note}: jobs in the target zone use the default, "
        f"{default_zone}; set one with Edit."
    )


def _target_page(
    request: Request,
    caller: Caller,
    name: str,
    *,
    new_job: JobFields | None = None,
    errors: FieldErrors = NO_ERRORS,
    pause_reason: str = "",
    pause_errors: FieldErrors = NO_ERRORS,
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
        status_code=422 if errors or pause_errors else 200,
        target=target,
        host_key_fingerprint=fingerprint(target.host_key) if target.host_key else None,
        local_disabled=target.kind == "local" and not app.settings.allow_local_targets,
        individual=individual,
        bulk=bulk,
        enabled_here=enabled_here,
        descriptions={view.name: describe(view) for view in (*individual, *bulk)},
        runs=runs,
        total_runs=total_runs,
        pending=any(run.status in PENDING for run in runs),
        new_job=new_job or JobFields(timezone=app.settings.timezone),
        errors=errors,
        pause_reason=pause_reason,
        pause_errors=pause_errors,
        pause_reason_max=svc.PAUSE_REASON_MAX,
        default_zone=app.settings.timezone,
        local_fires=_local_fires(assignments, target, app.settings.timezone),
        **job_form_context(app),
    )


def _local_fires(
    assignments: list[Assignment], target: Target, default_zone: str
) -> dict[str, tuple[str, str]]:
    """Each job's zone here and its next fire as wall time in that zone."""
    out: dict[str, tuple[str, str]] = {}
    for a in assignments:
        zone = zone_of(a.job, target, default_zone)
        when = a.next_fire_at
        shown = when.astimezone(ZoneInfo(zone)).strftime("%a %Y-%m-%d %H:%M %Z") if when else ""
        out[a.job.name] = (zone, shown)
    return out


@router.get("/targets/{name}", response_class=HTMLResponse)
def show_target(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> HTMLResponse:
    return _target_page(request, caller, name)


def _here(name: str) -> str:
    return f"/targets/{quote(name)}"


# -- edit -------------------------------------------------------------------------------


@router.get("/targets/{name}/edit", response_class=HTMLResponse)
def edit_form(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.edit"))]
) -> HTMLResponse:
    target, _ = svc.show_target(the_app(request), caller.actor, name)
    return _target_form(request, caller, TargetFields.of(target), target=target)


@router.post("/targets/{name}/edit", response_class=HTMLResponse)
def edit_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> Response:
    app = the_app(request)
    target, _ = svc.show_target(app, caller.actor, name)
    fields = replace(TargetFields.posted(form), name=name)
    private_key = text(form, "private_key").replace("\r\n", "\n").strip()
    local = fields.kind == "local"
    try:
        v.validate_choice(fields.kind, ("ssh", "local"), field="kind")
        changes = svc.TargetChanges(
            kind=fields.kind,
            host=None if local else fields.host,
            port=None if local else _port(fields.port),
            user=None if local else fields.user,
            private_key=None if local or not private_key else (private_key + "\n").encode(),
            host_key=None if local else fields.host_key or None,
            trust_on_first_use=not local and fields.trust_on_first_use,
            labels=split_items(fields.labels),
            notes=fields.notes,
            # Only a changed field is the operator's zone (kept over detection); a form
            # without the field keeps the zone.
            timezone=fields.timezone
            if "timezone" in form and fields.timezone != (target.timezone or "")
            else None,
        )
        result = svc.edit_target(
            app,
            caller.actor,
            name,
            changes,
            verify=not fields.no_verify,
            allow_same_host=fields.allow_same_host,
        )
    except PermissionDenied:
        raise
    except FleetcronError as exc:
        return _target_form(request, caller, fields, _form_errors(exc, name, "edit"), target=target)
    message = (
        f"Saved target {name}: {', '.join(c.replace('_', ' ') for c in result.changed)} changed."
    )
    if result.verified:
        message += f" The new connection works (host key {result.host_key_fingerprint})."
    if result.timezone_note:
        message += f" Time zone {result.target.timezone or 'unknown'}: {result.timezone_note}."
    if result.unpaired:
        message += " It is not paired any more: press Pair once the server is ready."
    return redirect(_here(name), message)


# -- pair and re-pin ----------------------------------------------------------------------


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
        return redirect(_here(name), f"Not paired: {ui_message(exc, name)}", error=True)
    message = f"Paired target {name}."
    if result.host_key_fingerprint:
        message += f" Host key {result.host_key_fingerprint}."
    if result.extended_jobs:
        message += f" {plural(len(result.extended_jobs), 'job')} now run here."
    if result.kept_disabled:
        message += f" Still disabled here, as before the unpair: {', '.join(result.kept_disabled)}."
    message += f" {_zone_sentence(result, the_app(request).settings.timezone)}"
    return redirect(_here(name), message)


@router.post("/targets/{name}/repin/check", response_class=HTMLResponse)
def check_repin(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.repin"))],
) -> Response:
    """Step 1 of a re-pin: find the new key (pasted, or offered by the server) and show
    both fingerprints for a human to compare; nothing is written."""
    try:
        plan = svc.plan_repin(
            the_app(request),
            caller.actor,
            name,
            host_key=text(form, "host_key").strip() or None,
            trust_on_first_use=checked(form, "trust_on_first_use"),
        )
    except FleetcronError as exc:
        return redirect(_here(name), f"Not re-pinned: {_repin_wording(exc)}", error=True)
    source = "offered by the server now" if plan.trusted_on_first_use else "pasted"
    return page(
        request,
        "target_confirm.html",
        title=f"Re-pin the host key of {name}?",
        message=(
            "Compare the new fingerprint with the server's own key (on the server: "
            "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) before you pin it. "
            "fleetcron connects once more to check the key and the login."
        ),
        facts=[
            ("Pinned now", plan.old_fingerprint or "none"),
            (f"New ({source})", plan.new_fingerprint),
        ],
        hidden={
            "new_key": plan.new_key,
            "old_fingerprint": plan.old_fingerprint or "",
            "trust_on_first_use": "1" if plan.trusted_on_first_use else "",
        },
        action=f"{_here(name)}/repin",
        button=f"Pin {plan.new_fingerprint}",
        cancel=_here(name),
        danger=False,
    )


def _repin_wording(exc: FleetcronError) -> str:
    if isinstance(exc, InvalidInput) and exc.field == "host_key":
        return (
            "paste the server's new host key, or tick “trust the key the server offers now” "
            "(one of the two)."
        )
    return exc.message


@router.post("/targets/{name}/repin", response_class=HTMLResponse)
def repin_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.repin"))],
) -> Response:
    """Step 2: pin exactly the key that was shown, if the pinned one is still the old one."""
    new_key = text(form, "new_key").strip()
    try:
        new_fingerprint = fingerprint(new_key)
        plan = svc.RepinPlan(
            target_name=name,
            old_fingerprint=text(form, "old_fingerprint").strip() or None,
            new_key=new_key,
            new_fingerprint=new_fingerprint,
            trusted_on_first_use=checked(form, "trust_on_first_use"),
        )
        svc.repin_target(the_app(request), caller.actor, plan)
    except (FleetcronError, ValueError) as exc:
        message = exc.message if isinstance(exc, FleetcronError) else "the new key is not valid"
        return redirect(_here(name), f"Not re-pinned: {message}", error=True)
    return redirect(_here(name), f"Pinned host key {new_fingerprint} for {name}.")


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
        return _target_page(request, caller, name, pause_reason=reason, pause_errors=errors)
    except FleetcronError as exc:
        return redirect(_here(name), f"Not paused: {exc.message}", error=True)
    return redirect(
        _here(name),
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
        return redirect(_here(name), f"Target {name} was not paused.")
    return redirect(_here(name), f"Resumed target {name}: jobs continue from their next slot.")


# -- unpair and remove --------------------------------------------------------------------


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
            "are removed. Its individual jobs wait until it is paired again, and jobs disabled "
            "here stay disabled then; the run history stays. For maintenance, “Pause” keeps "
            "everything in place instead."
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


@router.get("/targets/{name}/delete", response_class=HTMLResponse)
def confirm_remove(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.remove"))]
) -> HTMLResponse:
    app = the_app(request)
    target, _ = svc.show_target(app, caller.actor, name)
    jobs = svc.individual_jobs(app, caller.actor, name)
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
        action=f"{_here(target.name)}/delete",
        button=f"Remove {target.name}",
        cancel=_here(target.name),
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
        return redirect(f"{_here(name)}/delete", ui_message(exc, name), error=True)
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
