"""Bulk jobs: the list, the create and edit form with its target picker, run now, delete.

The edit and delete pages serve individual jobs too (linked from their target's page);
only the list is for bulk jobs alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from itertools import islice
from typing import Annotated, Any
from urllib.parse import quote
from zoneinfo import available_timezones

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from fleetcron.app import SYSTEM, Actor, App
from fleetcron.core import job_options
from fleetcron.core import validation as v
from fleetcron.core.dst_preview import notes_ahead
from fleetcron.core.job_options import BY_KEY, FORM_OPTIONS, START_WINDOW_KEYS, JobOption
from fleetcron.core.labels import format_selector, parse_selector, selector_matches
from fleetcron.core.target_zones import TARGET_LOCAL, dst_policy, effective_zone
from fleetcron.cron import parse
from fleetcron.cron.dst import DEFAULT as DEFAULT_DST
from fleetcron.cron.dst import DstPolicy
from fleetcron.errors import CronError, FleetcronError, InvalidInput
from fleetcron.services.fleet import assignments as fleet_svc
from fleetcron.services.fleet import grid as fleet_grid
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.jobs.edit import JobSpec, JobView
from fleetcron.services.runs import reads as runs_svc
from fleetcron.services.targets import reads as target_reads
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import (
    NO_ERRORS,
    FieldErrors,
    Posted,
    field_errors,
    page,
    plural,
    redirect,
    text,
    texts,
    whole_number,
)

router = APIRouter(include_in_schema=False)

#: Service field names -> the job form's field names.
FIELD_NAMES = {"disabled_on": "targets", "target": "targets", "label": "selector"}
PREVIEW_FIRES = 5
#: The longest job name (core.validation.NAME_RULE); the form shows it and counts.
NAME_MAX = v.NAME_MAX_CHARS
#: The highest value of each number field, as the declaration states it.
NUMBER_RANGES = {o.key: o.high for o in FORM_OPTIONS if o.kind == "int"}

#: What a form field of a run option holds as typed: text, or the checked choices.
Typed = str | list[str]


def _as_typed(option: JobOption, value: Any) -> Typed:
    """An option's value as its form field shows it."""
    if option.kind == "choices":
        return list(value)
    return "" if value is None else str(value)


def _typed_defaults() -> dict[str, Typed]:
    return {o.key: _as_typed(o, o.default) for o in FORM_OPTIONS}


@dataclass
class JobFields:
    """A job form as typed: text, so a refused form comes back exactly as it was sent.

    ``options`` holds the run options the declaration shows in the form
    (:data:`~fleetcron.core.job_options.FORM_OPTIONS`), by form field name."""

    name: str = ""
    schedule: str = ""
    timezone: str = ""
    command: str = ""
    notes: str = ""
    selector: str = ""
    options: dict[str, Typed] = field(default_factory=_typed_defaults)

    @classmethod
    def posted(cls, form: FormData) -> JobFields:
        return cls(
            name=text(form, "name").strip(),
            schedule=text(form, "schedule").strip(),
            timezone=text(form, "timezone").strip(),
            command=text(form, "command").replace("\r\n", "\n"),
            notes=text(form, "notes").replace("\r\n", "\n"),
            selector=text(form, "selector").strip(),
            options={
                o.key: texts(form, o.key)
                if o.kind == "choices"
                else text(form, o.key, o.default if o.kind == "choice" else "")
                for o in FORM_OPTIONS
            },
        )

    @classmethod
    def of(cls, view: JobView) -> JobFields:
        current = view.as_dict()
        return cls(
            name=view.name,
            schedule=view.schedule,
            timezone=view.timezone,
            command=view.command,
            notes=view.notes,
            selector=view.selector,
            options={o.key: _as_typed(o, current[o.name]) for o in FORM_OPTIONS},
        )

    def spec(self) -> JobSpec:
        """The job these fields describe; raises InvalidInput naming a field."""
        return JobSpec(
            schedule=self.schedule,
            command=self.command,
            timezone=self.timezone or None,
            notes=self.notes,
            **{o.name: _parsed(o, self.options[o.key]) for o in FORM_OPTIONS},
        )

    def changes(self, view: JobView, app: App) -> dict[str, Any]:
        """Only what differs from ``view``, so the audit log names what really changed.
        An emptied time zone or timeout means the default the form shows, as when adding."""
        spec = asdict(self.spec())
        names = ("schedule", "command", "notes", "timezone", *(o.name for o in FORM_OPTIONS))
        wanted: dict[str, Any] = {}
        for name in names:
            option = job_options.option(name)
            value = spec[name]
            if value is None and option.setting is not None:
                value = getattr(app.settings, option.setting)
            wanted[name] = option.stored(value)
        if view.origin == "bulk":
            wanted["selector"] = format_selector(parse_selector(self.selector))
        current = view.as_dict()
        return {key: value for key, value in wanted.items() if current[key] != value}


def _parsed(option: JobOption, typed: Typed) -> Any:
    """A run option's value from its form field; a number field left empty takes the
    option's default (a typed 0 stays 0, and is refused with the service's message when the
    range starts higher)."""
    if option.kind == "choices":
        return tuple(typed)
    assert isinstance(typed, str)
    if option.kind == "int":
        return whole_number(typed, field=option.key, default=option.default)
    return typed


@dataclass(frozen=True)
class Pick:
    """One target in the bulk job form's picker."""

    name: str
    labels: dict[str, str]
    checked: bool

    @property
    def label_text(self) -> str:
        return format_selector(self.labels)


@dataclass(frozen=True)
class Preview:
    """The schedule's description and next fire times, or why it is not valid."""

    description: str = ""
    fires: tuple[str, ...] = ()
    timezone: str = ""
    error: str = ""
    #: What the schedule does at the zone's DST transitions in the next year.
    dst: tuple[str, ...] = ()


def job_errors(error: FleetcronError) -> FieldErrors:
    """Place an error next to its job form field; every cron error (it names the cron
    field, such as "hour") belongs to the schedule."""
    if isinstance(error, CronError):
        return FieldErrors.at("schedule", error.message)
    return field_errors(error, FIELD_NAMES)


def schedule_preview(app: App, fields: JobFields) -> Preview | None:
    """The form's schedule in its zone under its DST choices: the next fire times and
    what it does at the zone's next DST transitions."""
    schedule, timezone = fields.schedule, fields.timezone
    if not schedule.strip():
        return None
    try:
        dst = dst_policy(*(_choice(fields.options.get(key)) for key in ("dst_gap", "dst_fold")))
    except InvalidInput as exc:
        return Preview(error=exc.message)
    if timezone == TARGET_LOCAL:
        return target_local_preview(app, schedule, dst)
    try:
        parsed = parse(schedule, timezone or app.settings.timezone, dst)
    except InvalidInput as exc:
        return Preview(error=exc.message)
    fires = islice(parsed.iter_after(app.now()), PREVIEW_FIRES)
    return Preview(
        description=parsed.describe(),
        fires=tuple(fire_time(when) for when in fires),
        timezone=parsed.tz.key,
        dst=tuple(n.text for n in notes_ahead(schedule, parsed.tz.key, dst, app.now())),
    )


def target_local_preview(app: App, schedule: str, dst: DstPolicy = DEFAULT_DST) -> Preview:
    """A job in the ``target`` zone: its next fire in each zone of the paired targets."""
    try:
        spread = fleet_svc.zone_spread(app, SYSTEM, schedule, 3, dst=dst)
        description = parse(schedule, app.settings.timezone).describe()
    except InvalidInput as exc:
        return Preview(error=exc.message)
    fires = tuple(
        f"{z.timezone} ({plural(z.targets, 'target')}): "
        + ", ".join(fire_time(when) for when in z.fires)
        for z in spread
    )
    return Preview(description=description, fires=fires, timezone="each target's local time")


def _choice(value: Typed | None) -> str | None:
    """A form's choice as typed (None: not in the form, the default)."""
    return value if isinstance(value, str) and value else None


def fire_time(value: datetime) -> str:
    """A fire time in the job's own zone (the one its schedule is written in)."""
    return value.strftime("%a %Y-%m-%d %H:%M")


@lru_cache(maxsize=1)
def zone_names() -> tuple[str, ...]:
    return tuple(sorted(available_timezones()))


def describe(view: JobView) -> str:
    try:
        return parse(view.schedule, effective_zone(view.timezone, None, "UTC")).describe()
    except InvalidInput:
        return "(schedule no longer valid)"


def _paired_targets(app: App, actor: Actor) -> list[Pick]:
    """The picker of a new bulk job: every paired target's name and labels (only those two
    columns are read)."""
    return [
        Pick(name, labels, True) for name, labels in target_reads.paired_target_labels(app, actor)
    ]


def job_form_context(app: App) -> dict[str, Any]:
    """What the job fields need besides the values: choices, defaults and limits."""
    return {
        "zones": zone_names(),
        "form_options": FORM_OPTIONS,
        # shown together, under one explanation of the start window
        "start_window_options": [BY_KEY[key] for key in START_WINDOW_KEYS],
        "start_window_max": v.MAX_JITTER_S,
        # what an empty field means, for the options whose default is a setting
        "setting_defaults": {
            o.key: getattr(app.settings, o.setting) for o in FORM_OPTIONS if o.setting
        },
        "command_max": app.settings.command_max_length,
        "schedule_max": v.SCHEDULE_MAX_CHARS,
        "notes_max": v.NOTES_MAX_CHARS,
        "name_max": NAME_MAX,
        "ranges": NUMBER_RANGES,
    }


def _form_page(
    request: Request,
    *,
    mode: str,
    fields: JobFields,
    origin: str,
    picker: Sequence[Pick] = (),
    errors: FieldErrors = NO_ERRORS,
    target: str | None = None,
) -> HTMLResponse:
    app = the_app(request)
    return page(
        request,
        "job_form.html",
        status_code=422 if errors else 200,
        mode=mode,
        origin=origin,
        fields=fields,
        picker=picker,
        errors=errors,
        target=target,
        preview=schedule_preview(app, fields),
        **job_form_context(app),
    )


def job_home(view: JobView) -> str:
    """Where a job lives in the UI: the bulk list, or its target's page."""
    if view.origin == "bulk" or view.target is None:
        return "/jobs"
    return f"/targets/{quote(view.target)}"


@router.get("/jobs", response_class=HTMLResponse)
def list_bulk_jobs(
    request: Request, caller: Annotated[Caller, Depends(requires("job.read"))]
) -> HTMLResponse:
    app = the_app(request)
    views = jobs_svc.list_jobs(app, caller.actor, origin="bulk")
    _, paired = target_reads.count_targets(app, caller.actor)
    return page(
        request,
        "jobs.html",
        jobs=views,
        descriptions={view.name: describe(view) for view in views},
        counts=fleet_grid.job_counts(app, caller.actor),
        paired=paired,
    )


@router.get("/jobs/new", response_class=HTMLResponse)
def new_bulk_job(
    request: Request, caller: Annotated[Caller, Depends(requires("job.add"))]
) -> HTMLResponse:
    app = the_app(request)
    fields = JobFields(timezone=app.settings.timezone)
    return _form_page(
        request,
        mode="new",
        fields=fields,
        origin="bulk",
        picker=_paired_targets(app, caller.actor),
    )


@router.post("/jobs/new", response_class=HTMLResponse)
def create_bulk_job(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.add"))],
) -> Response:
    app = the_app(request)
    fields = JobFields.posted(form)
    enabled = set(texts(form, "enabled_on"))
    # Only targets the form showed can be unchecked; one paired since stays enabled.
    shown = set(texts(form, "picker"))
    picker = [replace(p, checked=p.name in enabled) for p in _paired_targets(app, caller.actor)]
    try:
        selector = parse_selector(fields.selector)
        disabled_on = [
            p.name
            for p in picker
            if p.name in shown and not p.checked and selector_matches(selector, p.labels)
        ]
        view = jobs_svc.add_job(
            app,
            caller.actor,
            fields.name,
            fields.spec(),
            bulk=True,
            selector=fields.selector,
            disabled_on=disabled_on,
        )
    except FleetcronError as exc:
        return _form_page(
            request,
            mode="new",
            fields=fields,
            origin="bulk",
            picker=picker,
            errors=job_errors(exc),
        )
    return redirect(
        "/jobs",
        f"Created bulk job {view.name}: enabled on {view.enabled} of {view.total} "
        f"{'target' if view.total == 1 else 'targets'}.",
    )


def _edit_picker(app: App, actor: Actor, view: JobView) -> list[Pick]:
    labels = target_reads.labels_of(app, actor, (a.target for a in view.assignments))
    return [Pick(a.target, labels.get(a.target, {}), a.enabled) for a in view.assignments]


def _flips(
    app: App,
    actor: Actor,
    view: JobView,
    shown: set[str],
    enabled: set[str],
    selector: str | None,
) -> dict[str, bool]:
    """The targets whose box the form changed: target -> wanted flag. Only targets the form
    showed count (one paired since stays as it is); with a new selector, only those it
    still matches (the others leave the job in the same save)."""
    kept = None if selector is None else parse_selector(selector)
    return {
        p.name: p.name in enabled
        for p in _edit_picker(app, actor, view)
        if p.name in shown
        and (p.name in enabled) != p.checked
        and (kept is None or selector_matches(kept, p.labels))
    }


@router.get("/jobs/{name}/edit", response_class=HTMLResponse)
def edit_job_form(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("job.edit"))]
) -> HTMLResponse:
    app = the_app(request)
    view = jobs_svc.show_job(app, caller.actor, name)
    return _form_page(
        request,
        mode="edit",
        fields=JobFields.of(view),
        origin=view.origin,
        picker=_edit_picker(app, caller.actor, view) if view.origin == "bulk" else (),
        target=view.target,
    )


@router.post("/jobs/{name}/edit", response_class=HTMLResponse)
def save_job(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.edit"))],
) -> Response:
    app = the_app(request)
    view = jobs_svc.show_job(app, caller.actor, name)
    fields = replace(JobFields.posted(form), name=view.name)
    enabled = set(texts(form, "enabled_on"))
    shown = set(texts(form, "picker"))
    enabled_on: dict[str, bool] = {}
    try:
        changes = fields.changes(view, app)
        if view.origin == "bulk":
            enabled_on = _flips(app, caller.actor, view, shown, enabled, changes.get("selector"))
        if changes or enabled_on:
            # One transaction: the fields and every target's flag, or nothing.
            jobs_svc.edit_job(app, caller.actor, name, enabled_on=enabled_on, **changes)
    except FleetcronError as exc:
        picker = [
            replace(p, checked=p.name in enabled) for p in _edit_picker(app, caller.actor, view)
        ]
        return _form_page(
            request,
            mode="edit",
            fields=fields,
            origin=view.origin,
            picker=picker if view.origin == "bulk" else (),
            errors=job_errors(exc),
            target=view.target,
        )
    saved = jobs_svc.show_job(app, caller.actor, name)
    parts = [f"Saved job {name}"]
    if not changes and not enabled_on:
        parts = [f"Nothing changed in job {name}"]
    if saved.origin == "bulk":
        parts.append(f"enabled on {saved.enabled} of {saved.total} targets")
    return redirect(job_home(saved), ": ".join(parts) + ".")


@router.post("/jobs/{name}/run", response_class=HTMLResponse)
def run_job_everywhere(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.run"))],
) -> Response:
    try:
        run_ids = runs_svc.request_run(the_app(request), caller.actor, name)
    except FleetcronError as exc:
        return redirect("/jobs", exc.message, error=True)
    return redirect(
        "/jobs",
        f"Queued {plural(len(run_ids), 'run')} of {name}; "
        "the scheduler starts them on its next tick. See Runs for the outcome.",
    )


@router.get("/jobs/{name}/delete", response_class=HTMLResponse)
def confirm_delete_job(
    name: str, request: Request, caller: Annotated[Caller, Depends(requires("job.remove"))]
) -> HTMLResponse:
    view = jobs_svc.show_job(the_app(request), caller.actor, name)
    where = (
        f"It runs on {plural(view.total, 'target')} ({view.enabled} enabled); "
        "every one of them stops running it."
        if view.origin == "bulk"
        else f"It runs on target {view.target} only."
    )
    return page(
        request,
        "confirm.html",
        title=f"Delete job {view.name}?",
        message=f"{where} The run history stays. This cannot be undone.",
        action=f"/jobs/{quote(view.name)}/delete",
        button=f"Delete {view.name}",
        cancel=job_home(view),
        danger=True,
    )


@router.post("/jobs/{name}/delete", response_class=HTMLResponse)
def delete_job(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.remove"))],
) -> Response:
    app = the_app(request)
    view = jobs_svc.show_job(app, caller.actor, name)
    removed = jobs_svc.remove_job(app, caller.actor, name)
    return redirect(
        job_home(view),
        f"Deleted job {name} from {plural(removed, 'target')}; its run history stays.",
    )


def new_individual_job(
    app: App, actor: Actor, target: str, form: FormData
) -> tuple[JobFields, FieldErrors, JobView | None]:
    """Create an individual job from the inline form of a target's page."""
    fields = JobFields.posted(form)
    try:
        view = jobs_svc.add_job(app, actor, fields.name, fields.spec(), target=target)
    except FleetcronError as exc:
        return fields, job_errors(exc), None
    return fields, NO_ERRORS, view


__all__ = ["JobFields", "describe", "job_form_context", "new_individual_job", "router"]
