"""/api/v1/incidents (list, show, ack) and /api/v1/silences (list, add, expire).

Thin adapters over :mod:`fleetcron.services.alerts.incident_ops` and
:mod:`fleetcron.services.alerts.silences`: roles, CSRF (for browser sessions) and the
audit are theirs and :func:`fleetcron.web.deps.requires`'s; bad input is a 4xx JSON error
naming the field, with nothing changed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from fleetcron.app import App
from fleetcron.services.alerts import incident_ops as ops
from fleetcron.services.alerts import silences as svc
from fleetcron.web.deps import Caller, app_of, requires

router = APIRouter(tags=["alerts"])
AppDep = Annotated[App, Depends(app_of)]
MAX_ID = 2**31 - 1
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]


class AckIn(BaseModel):
    note: str = Field(default="", max_length=2000)


class SilenceIn(BaseModel):
    reason: str = Field(max_length=2000)
    job: str | None = Field(default=None, max_length=200)
    target: str | None = Field(default=None, max_length=200)
    selector: str | None = Field(default=None, max_length=512)
    all: bool = False
    duration_s: float | None = None
    until: datetime | None = None


@router.get("/incidents")
def list_incidents(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("incident.read"))],
    status: Annotated[str, Query(max_length=20)] = "open",
    job: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=ops.LIST_MAX)] = 50,
) -> list[dict[str, Any]]:
    found = ops.list_incidents(app, caller.actor, status=status, job=job, limit=limit)
    return [i.as_dict() for i in found]


@router.get("/incidents/{incident_id}")
def show_incident(
    incident_id: IdPath,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("incident.read"))],
) -> dict[str, Any]:
    return ops.show_incident(app, caller.actor, incident_id).as_dict()


@router.post("/incidents/{incident_id}/ack")
def ack_incident(
    incident_id: IdPath,
    body: AckIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("incident.ack"))],
) -> dict[str, Any]:
    return ops.acknowledge(app, caller.actor, incident_id, note=body.note).as_dict()


@router.get("/silences")
def list_silences(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("silence.read"))],
    expired: bool = False,
) -> list[dict[str, Any]]:
    return [s.as_dict() for s in svc.list_silences(app, caller.actor, include_expired=expired)]


@router.post("/silences", status_code=201)
def add_silence(
    body: SilenceIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("silence.add"))],
) -> dict[str, Any]:
    until = body.until
    if until is not None and until.tzinfo is None:
        until = until.replace(tzinfo=UTC)  # a time without a zone is UTC, as elsewhere
    spec = svc.SilenceSpec(
        reason=body.reason,
        job=body.job,
        target=body.target,
        selector=body.selector,
        everything=body.all,
        duration_s=body.duration_s,
        until=until,
    )
    return svc.add_silence(app, caller.actor, spec).as_dict()


@router.post("/silences/{silence_id}/expire")
def expire_silence(
    silence_id: IdPath,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("silence.expire"))],
) -> dict[str, Any]:
    return svc.expire_silence(app, caller.actor, silence_id).as_dict()
