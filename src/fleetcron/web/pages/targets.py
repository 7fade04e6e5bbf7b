"""Targets: the list, adding, editing and pairing, re-pinning a host key, and each
target's page with its individual jobs, the bulk jobs that cover it and its recent runs.
The form is :mod:`target_form`; what the page's buttons do (pause, unpair, remove, the
jobs here) is :mod:`target_actions`."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated
from urllib.parse import quote
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from fleetcron.core import statuses
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import FleetcronError, InvalidInput, NotFound, PermissionDenied
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.runs.reads import RunFilter
from fleetcron.services.runs.views import list_run_views
from fleetcron.services.targets import edit as svc
from fleetcron.services.targets import reads as target_reads
from fleetcron.services.targets import runs as target_runs
from fleetcron.services.targets import shares, trust_rules
from fleetcron.services.targets.pairing import PairResult
from fleetcron.services.targets.views import AssignmentView
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import (
    NO_ERRORS,
    FieldErrors,
    Posted,
    checked,
    page,
    plural,
    redirect,
    split_items,
    text,
)
from fleetcron.web.pages.jobs import JobFields, describe, job_form_context
from fleetcron.web.pages.paging import OffsetPager
from fleetcron.web.pages.target_form import (
    TargetFields,
    form_errors,
    target_form,
    typed_port,
    ui_message,
)

router = APIRouter(include_in_schema=False)

RECENT_RUNS = 20
#: Targets on one page of the targets list.
TARGETS_PAGE = 100
PENDING = frozenset(statuses.ACTIVE)


@router.get("/targets", response_class=HTMLResponse)
def list_targets(
    request: Request,
    caller: Annotated[Caller, Depends(requires("target.read"))],
    q: Annotated[str, Query(max_length=200)] = "",
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> HTMLResponse:
    app = the_app(request)
    q = q.strip()
    targets, total = target_reads.list_targets_page(
        app, caller.actor, limit=TARGETS_PAGE, offset=offset, name=q or None
    )
    # One statement for the newest run of every target shown (not two per target).
    newest = target_runs.last_started_runs(app, caller.actor, [t.id for t in targets])
    last = {t.name: newest[t.id] for t in targets if t.id in newest}
    pager = OffsetPager(offset, len(targets), total, {"q": q} if q else {}, TARGETS_PAGE)
    return page(request, "targets.html", targets=targets, last=last, pager=pager, q=q)


@router.get("/targets/new", response_class=HTMLResponse)
def new_target(
    request: Request, caller: Annotated[Caller, Depends(requires("target.add"))]
) -> HTMLResponse:
    return target_form(request, caller, TargetFields())


def _exists(request: Request, caller: Caller, name: str) -> bool:
    try:
        target_reads.show_target(the_app(request), caller.actor, name)
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
    existed = bool(fields.name) and _exists(request, caller, fields.name)
    try:
        spec = _posted_spec(fields, form)
        result = svc.add_target(
            app,
            caller.actor,
            spec,
            trust_on_first_use=fields.trust_on_first_use,
            allow_same_host=fields.allow_same_host,
        )
    except PermissionDenied:
        raise  # a 403 page (a local target asked for by an operator), not a form error
    except FleetcronError as exc:
        if not existed and _exists(request, caller, fields.name):
            # Added, but pairing failed: the target page offers Edit and Pair.
            return redirect(target_url(fields.name), ui_message(exc, fields.name), error=True)
        return target_form(request, caller, fields, form_errors(exc, fields.name, "add"))
    message = f"Added and paired target {result.target.name}."
    if result.host_key_fingerprint:
        message += f" Host key {result.host_key_fingerprint}"
        if result.trusted_on_first_use:
            message += " (trusted on first use: compare it with the server's own key)"
        message += "."
    if result.extended_jobs:
        message += f" {plural(len(result.extended_jobs), 'bulk job')} now cover it."
    message += f" {_zone_sentence(result, app.settings.timezone)}"
    return redirect(target_url(result.target.name), message)


def _posted_spec(fields: TargetFields, form: FormData) -> TargetSpec:
    """The target the add form describes (a local one takes no connection fields)."""
    local = fields.kind == TargetKind.LOCAL
    private_key = text(form, "private_key").replace("\r\n", "\n").strip()
    client_cert = text(form, "client_cert").strip()
    return TargetSpec(
        fields.name,
        TargetKind.parse(fields.kind),
        host=None if local else fields.host,
        port=typed_port(fields.port),
        user=None if local else fields.user,
        private_key=None if local or not private_key else (private_key + "\n").encode(),
        host_key=None if local else fields.host_key or None,
        labels=split_items(fields.labels),
        notes=fields.notes,
        timezone=fields.timezone or None,
        via=None if local else fields.via or None,
        host_ca=None if local else fields.host_ca or None,
        client_cert=None if local or not client_cert else client_cert.encode(),
    )


def _zone_sentence(result: PairResult, default_zone: str) -> str:
    """What pairing found out about the target's time zone (never a failure)."""
    if result.timezone:
        return f"Time zone {result.timezone} ({result.timezone_note})."
    return (
        f"Time zone {result.timezone_note}: jobs in the target zone use the default, "
        f"{default_zone}; set one with Edit."
    )


def target_page(
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
    target, assignments = target_reads.show_target(app, caller.actor, name)
    enabled_here = {a.job.name: a.enabled for a in assignments}
    individual = jobs_svc.list_jobs(app, caller.actor, origin="individual", target=name)
    bulk = jobs_svc.list_jobs(app, caller.actor, origin="bulk", target=name)
    runs, total_runs = list_run_views(app, caller.actor, RunFilter(target=name), limit=RECENT_RUNS)
    return page(
        request,
        "target.html",
        status_code=422 if errors or pause_errors else 200,
        target=target,
        host_key_fingerprint=fingerprint(target.host_key) if target.host_key else None,
        ca_from=trust_rules.ca_source(app, target),
        local_disabled=target.kind is TargetKind.LOCAL and not app.settings.allow_local_targets,
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
        local_fires=_local_fires(assignments),
        sharing=shares.sharing(app, caller.actor, name),
        **job_form_context(app),
    )


def _local_fires(
    assignments: list[AssignmentView],
) -> dict[str, tuple[str, str]]:
    """Each job's zone here and its next fire as wall time in that zone."""
    out: dict[str, tuple[str, str]] = {}
    for a in assignments:
        when = a.next_fire_at
        shown = when.astimezone(ZoneInfo(a.zone)).strftime("%a %Y-%m-%d %H:%M %Z") if when else ""
        out[a.job.name] = (a.zone, shown)
    return out


@router.get("/targets/{name}", response_class=HTMLResponse)
def show_target(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> HTMLResponse:
    return target_page(request, caller, name)


def target_url(name: str) -> str:
    """The address of a target's page."""
    return f"/targets/{quote(name)}"


# -- edit -------------------------------------------------------------------------------


@router.get("/targets/{name}/edit", response_class=HTMLResponse)
def edit_form(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("target.edit"))]
) -> HTMLResponse:
    target, _ = target_reads.show_target(the_app(request), caller.actor, name)
    return target_form(request, caller, TargetFields.of(target), target=target)


@router.post("/targets/{name}/edit", response_class=HTMLResponse)
def edit_target(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> Response:
    app = the_app(request)
    target, _ = target_reads.show_target(app, caller.actor, name)
    fields = replace(TargetFields.posted(form), name=name)
    try:
        changes = _posted_changes(fields, form, target.timezone)
        if target.host_ca_rule_id is not None and not fields.host_ca:
            changes = replace(changes, host_ca=None)  # the label's CA stays, as shown
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
        return target_form(request, caller, fields, form_errors(exc, name, "edit"), target=target)
    message = (
        f"Saved target {name}: {', '.join(c.replace('_', ' ') for c in result.changed)} changed."
    )
    if result.verified:
        message += f" The new connection works (host key {result.host_key_fingerprint})."
    if result.timezone_note:
        message += f" Time zone {result.target.timezone or 'unknown'}: {result.timezone_note}."
    if result.unpaired:
        message += " It is not paired any more: press Pair once the server is ready."
    return redirect(target_url(name), message)


def _posted_changes(fields: TargetFields, form: FormData, zone: str | None) -> svc.TargetChanges:
    """The changes the edit form describes (a local target takes no connection fields)."""
    private_key = text(form, "private_key").replace("\r\n", "\n").strip()
    client_cert = text(form, "client_cert").strip()
    local = fields.kind == TargetKind.LOCAL
    return svc.TargetChanges(
        kind=TargetKind.parse(fields.kind),
        host=None if local else fields.host,
        port=None if local else typed_port(fields.port),
        user=None if local else fields.user,
        private_key=None if local or not private_key else (private_key + "\n").encode(),
        host_key=None if local else fields.host_key or None,
        trust_on_first_use=not local and fields.trust_on_first_use,
        via=None if local else fields.via,
        host_ca=None if local else fields.host_ca,
        client_cert=None if local or not client_cert else client_cert.encode(),
        labels=split_items(fields.labels),
        notes=fields.notes,
        # Only a changed field is the operator's zone (kept over detection); a form
        # without the field keeps the zone.
        timezone=fields.timezone
        if "timezone" in form and fields.timezone != (zone or "")
        else None,
    )


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
        return redirect(target_url(name), f"Not paired: {ui_message(exc, name)}", error=True)
    message = f"Paired target {name}."
    if result.host_key_fingerprint:
        message += f" Host key {result.host_key_fingerprint}."
    if result.extended_jobs:
        message += f" {plural(len(result.extended_jobs), 'job')} now run here."
    if result.kept_disabled:
        message += f" Still disabled here, as before the unpair: {', '.join(result.kept_disabled)}."
    message += f" {_zone_sentence(result, the_app(request).settings.timezone)}"
    return redirect(target_url(name), message)


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
        return redirect(target_url(name), f"Not re-pinned: {_repin_wording(exc)}", error=True)
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
        action=f"{target_url(name)}/repin",
        button=f"Pin {plan.new_fingerprint}",
        cancel=target_url(name),
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
        return redirect(target_url(name), f"Not re-pinned: {message}", error=True)
    return redirect(target_url(name), f"Pinned host key {new_fingerprint} for {name}.")
