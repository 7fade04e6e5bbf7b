"""/api/v1/blackouts (list, show, add, change, lift).

Thin adapters over :mod:`fleetcron.services.blackouts.windows`: roles, CSRF (for browser
sessions) and the audit are theirs and :func:`fleetcron.web.deps.requires`'s; bad input is
a 4xx JSON error naming the field, with nothing saved. Times without an offset are
wall-clock times in the window's zone.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from fleetcron.app import App
from fleetcron.services.blackouts import windows as svc
from fleetcron.web.deps import Caller, app_of, requires

router = APIRouter(tags=["blackouts"])
AppDep = Annotated[App, Depends(app_of)]
MAX_ID = 2**31 - 1
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]


class BlackoutIn(BaseModel):
    """A window: one-off (``start`` with ``end`` or ``duration_s``) or recurring (``cron``
    or ``weekly`` with ``duration_s``, optionally ``until``)."""

    name: str = Field(max_length=200)
    reason: str = Field(max_length=2000)
    job: str | None = Field(default=None, max_length=200)
    target: str | None = Field(default=None, max_length=200)
    selector: str | None = Field(default=None, max_length=512)
    zone: str = Field(default="UTC", max_length=64)
    start: str | None = Field(default=None, max_length=40)
    end: str | None = Field(default=None, max_length=40)
    cron: str | None = Field(default=None, max_length=255)
    weekly: str | None = Field(default=None, max_length=100)
    duration_s: int | None = Field(default=None, ge=0, le=10**8)
    until: str | None = Field(default=None, max_length=40)

    def spec(self) -> svc.BlackoutSpec:
        return svc.BlackoutSpec(**self.model_dump())


class LiftIn(BaseModel):
    reason: str = Field(max_length=2000)


@router.get("/blackouts")
def list_blackouts(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("blackout.read"))],
    ended: bool = False,
) -> list[dict[str, Any]]:
    found = svc.list_blackouts(app, caller.actor, include_ended=ended)
    return [view.as_dict() for view in found]


@router.get("/blackouts/{blackout_id}")
def show_blackout(
    blackout_id: IdPath,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("blackout.read"))],
) -> dict[str, Any]:
    return svc.show_blackout(app, caller.actor, blackout_id).as_dict()


@router.post("/blackouts", status_code=201)
def add_blackout(
    body: BlackoutIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("blackout.add"))],
) -> dict[str, Any]:
    return svc.add_blackout(app, caller.actor, body.spec()).as_dict()


@router.put("/blackouts/{blackout_id}")
def change_blackout(
    blackout_id: IdPath,
    body: BlackoutIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("blackout.change"))],
) -> dict[str, Any]:
    return svc.change_blackout(app, caller.actor, blackout_id, body.spec()).as_dict()


@router.post("/blackouts/{blackout_id}/lift")
def lift_blackout(
    blackout_id: IdPath,
    body: LiftIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("blackout.lift"))],
) -> dict[str, Any]:
    return svc.lift_blackout(app, caller.actor, blackout_id, body.reason).as_dict()
