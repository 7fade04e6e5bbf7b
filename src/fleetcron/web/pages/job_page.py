"""The job page: one job on every one of its targets, its slots, and the actions on a
selection of its targets (re-run failed, run on selected, pause / resume selected).

Registered after the jobs pages, so that ``/jobs/new`` stays the form and not a job named
"new". Every action is a POST with the session's CSRF token; the runs it asks for are queued
and started by the scheduler that owns the jobs, as every manual run is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from fleetcron.app import Actor, App
from fleetcron.core.labels import parse_selector
from fleetcron.core.permissions import may
from fleetcron.core.target_zones import effective_zone
from fleetcron.cron import parse
from fleetcron.errors import FleetcronError, InvalidInput
from fleetcron.services.alerts import incident_ops
from fleetcron.services.fleet import job_page as fleet_svc
from fleetcron.services.fleet.job_page import TargetQuery, TargetsPage
from fleetcron.services.jobs.plan import not_succeeded_counts
from fleetcron.services.jobs.selection import Selection, set_enabled_on
from fleetcron.services.jobs.slots import SlotsPage, halted, job_slots
from fleetcron.services.jobs.upcoming import dst_preview_of
from fleetcron.services.runs import reads as runs_svc
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, page, plural, redirect, text, texts

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
SLOTS_SHOWN = 10
Text = Annotated[str, Query(max_length=200)]
Offset = Annotated[int, Query(ge=0, le=10_000_000)]


def job_url(name: str, **query: str | int | list[str]) -> str:
    base = f"/jobs/{quote(name, safe='')}"
    kept = {key: value for key, value in query.items() if value not in ("", [], None)}
    return base + ("?" + urlencode(kept, doseq=True) if kept else "")


def slot_runs_url(job: str, at: datetime) -> str:
    """The runs list filtered to one slot: that job, from the slot's minute to the next
    (the runs list filters by minutes in the viewer's zone; see :func:`slot_window`)."""
    return "/runs?" + urlencode({"job": job, **slot_window(at)})


def slot_window(at: datetime) -> dict[str, str]:
    start = at.replace(second=0, microsecond=0)
    return {
        "since": start.isoformat(timespec="seconds"),
        "until": (start + timedelta(minutes=1)).isoformat(timespec="seconds"),
    }


@dataclass(frozen=True)
class Filters:
    """The filter form as typed, and the query it makes."""

    statuses: tuple[str, ...]
    label: str
    sort: str
    offset: int

    def query(self) -> TargetQuery:
        labels = [f"{k}={v}" for k, v in parse_selector(self.label).items()] if self.label else []
        return TargetQuery(
            statuses=self.statuses,
            labels=labels,
            sort=self.sort,
            limit=PAGE_SIZE,
            offset=self.offset,
        )

    def link(self, name: str, **changes: str | int) -> str:
        values: dict[str, str | int | list[str]] = {
            "status": list(self.statuses),
            "label": self.label,
            "sort": "" if self.sort == "target" else self.sort,
            "offset": self.offset or "",
        }
        values.update(changes)
        return job_url(name, **values)


@router.get("/jobs/{name}", response_class=HTMLResponse)
def job_page(
    name: str,
    request: Request,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    status: Annotated[list[str] | None, Query(max_length=20)] = None,
    label: Text = "",
    sort: Text = "target",
    offset: Offset = 0,
) -> HTMLResponse:
    app = the_app(request)
    view = fleet_svc.job_header(app, caller.actor, name)
    filters = Filters(tuple(s for s in status or () if s), label.strip(), sort or "target", offset)
    filters, targets, error = _filtered_targets(app, caller, name, filters)
    slots = job_slots(app, caller.actor, name, limit=SLOTS_SHOWN)
    stopped = halted(
        app,
        caller.actor,
        name,
        [slot.scheduled_for for slot in slots.items],
        [row.last.run_id for row in targets.items if row.last is not None],
    )
    return page(
        request,
        "job_page.html",
        status_code=422 if error else 200,
        job=view,
        description=_description(view.schedule, view.timezone),
        dst_notes=dst_preview_of(app, caller.actor, name),
        targets=targets,
        slots=slots,
        halted=stopped,
        not_succeeded=not_succeeded_counts(app, caller.actor, name),
        filters=filters,
        filter_error=error,
        pager=_pager(view.name, filters, targets),
        status_choices=fleet_svc.STATUS_FILTERS,
        sort_choices=fleet_svc.SORTS,
        slot_runs_url=slot_runs_url,
        job_url=job_url,
        **_incidents(app, caller.actor, view.name),
    )


def _incidents(app: App, actor: Actor, job: str) -> dict[str, Any]:
    """The job's open incidents in the project the page acts in (the job's), for whoever
    may read its incidents there."""
    if not may(actor, "incident.read", actor.project):
        return {"open_incidents": [], "open_incident_count": 0}
    return {
        "open_incidents": incident_ops.list_incidents(app, actor, status="open", job=job, limit=5),
        "open_incident_count": incident_ops.count_open(app, actor, job=job),
    }


def _filtered_targets(
    app: App, caller: Caller, name: str, filters: Filters
) -> tuple[Filters, TargetsPage, str]:
    """The page of targets the filters ask for; with filters that do not parse, the
    first page unfiltered and the error."""
    try:
        return filters, fleet_svc.job_targets(app, caller.actor, name, filters.query()), ""
    except InvalidInput as exc:
        plain = Filters((), "", "target", 0)
        return plain, fleet_svc.job_targets(app, caller.actor, name, plain.query()), exc.message


def _description(schedule: str, timezone: str) -> str:
    try:
        return parse(schedule, effective_zone(timezone, None, "UTC")).describe()
    except (InvalidInput, ValueError):
        return "(schedule no longer valid)"


@dataclass(frozen=True)
class PageLinks:
    first: int
    last: int
    matched: int
    previous: str | None
    next: str | None


def _pager(name: str, filters: Filters, targets: TargetsPage) -> PageLinks:
    shown = len(targets.items)
    previous = (
        filters.link(name, offset=max(0, filters.offset - PAGE_SIZE) or "")
        if filters.offset
        else None
    )
    more = filters.offset + shown < targets.matched
    return PageLinks(
        first=filters.offset + 1 if shown else 0,
        last=filters.offset + shown,
        matched=targets.matched,
        previous=previous,
        next=filters.link(name, offset=filters.offset + PAGE_SIZE) if more else None,
    )


def _back(name: str, form: FormData) -> str:
    """Back to the job page the form was posted from (its filters kept); only a link to
    this job's own page is followed."""
    back = text(form, "back")
    prefix = f"/jobs/{quote(name, safe='')}"
    return back if back == prefix or back.startswith(prefix + "?") else prefix


def _queued(name: str, run_ids: list[int], where: str) -> str:
    return (
        f"Queued {plural(len(run_ids), 'run')} of {name} {where}; "
        "the scheduler starts them on its next tick."
    )


@router.post("/jobs/{name}/rerun-failed", response_class=HTMLResponse)
def rerun_failed(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.run"))],
) -> Response:
    back = _back(name, form)
    try:
        run_ids = runs_svc.request_run(
            the_app(request), caller.actor, name, selection=Selection(failed=True)
        )
    except FleetcronError as exc:
        return redirect(back, exc.message, error=True)
    return redirect(back, _queued(name, run_ids, "on the targets whose last run did not succeed"))


@router.post("/jobs/{name}/run-selected", response_class=HTMLResponse)
def run_selected(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.run"))],
) -> Response:
    back = _back(name, form)
    chosen = tuple(texts(form, "target"))
    if not chosen:
        return redirect(back, "Select at least one target to run the job on.", error=True)
    try:
        run_ids = runs_svc.request_run(
            the_app(request), caller.actor, name, selection=Selection(targets=chosen)
        )
    except FleetcronError as exc:
        return redirect(back, exc.message, error=True)
    return redirect(back, _queued(name, run_ids, f"on {plural(len(chosen), 'selected target')}"))


def _set_selected(request: Request, caller: Caller, name: str, form: Posted, on: bool) -> Response:
    back = _back(name, form)
    chosen = texts(form, "target")
    if not chosen:
        verb = "resume" if on else "pause"
        return redirect(back, f"Select at least one target to {verb} the job on.", error=True)
    try:
        changed = set_enabled_on(the_app(request), caller.actor, name, chosen, on)
    except FleetcronError as exc:
        return redirect(back, exc.message, error=True)
    verb = "Resumed" if on else "Paused"
    return redirect(
        back, f"{verb} job {name} on {plural(changed, 'target')} of {len(chosen)} selected."
    )


@router.post("/jobs/{name}/pause-selected", response_class=HTMLResponse)
def pause_selected(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.disable"))],
) -> Response:
    return _set_selected(request, caller, name, form, False)


@router.post("/jobs/{name}/resume-selected", response_class=HTMLResponse)
def resume_selected(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.enable"))],
) -> Response:
    return _set_selected(request, caller, name, form, True)


__all__ = ["SlotsPage", "job_url", "router", "slot_runs_url"]
