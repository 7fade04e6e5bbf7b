"""The incidents pages: open, acknowledged and resolved incidents; one incident with its
targets and the timeline of messages sent with their delivery status; acknowledging."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from fleetcron.errors import FleetcronError, InvalidInput
from fleetcron.services.alerts import incident_ops as ops
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, page, redirect, text

router = APIRouter(include_in_schema=False)
IncidentId = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.get("/incidents", response_class=HTMLResponse)
def incidents_page(
    request: Request,
    caller: Annotated[Caller, Depends(requires("incident.read"))],
    status: Annotated[str, Query(max_length=20)] = "open",
    job: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    """Incidents by status, of every job or of one (``job``: the job page links here)."""
    app = the_app(request)
    error = ""
    try:
        found = ops.list_incidents(app, caller.actor, status=status, job=job, limit=200)
    except InvalidInput as exc:
        error, status = exc.message, "open"
        found = ops.list_incidents(app, caller.actor, status=status, job=job, limit=200)
    return page(
        request,
        "incidents.html",
        status_code=422 if error else 200,
        incidents=found,
        status=status,
        statuses=ops.LIST_STATUSES,
        job=job or None,
        error=error,
    )


@router.get("/incidents/{incident_id}", response_class=HTMLResponse)
def incident_page(
    incident_id: IncidentId,
    request: Request,
    caller: Annotated[Caller, Depends(requires("incident.read"))],
) -> HTMLResponse:
    detail = ops.show_incident(the_app(request), caller.actor, incident_id)
    return page(request, "incident.html", detail=detail, incident=detail.incident)


@router.post("/incidents/{incident_id}/ack", response_class=HTMLResponse)
def acknowledge(
    incident_id: IncidentId,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("incident.ack"))],
) -> Response:
    home = f"/incidents/{incident_id}"
    try:
        ops.acknowledge(the_app(request), caller.actor, incident_id, note=text(form, "note"))
    except FleetcronError as exc:
        return redirect(home, exc.message, error=True)
    return redirect(home, f"Incident #{incident_id} acknowledged: no more reminders.")
