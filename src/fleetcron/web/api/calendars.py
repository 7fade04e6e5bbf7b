"""/api/v1/calendars (list, show, add, import, remove).

Thin adapters over :mod:`fleetcron.services.calendars.sets`: roles, CSRF (for browser
sessions) and the audit are theirs and :func:`fleetcron.web.deps.requires`'s; bad input is
a 4xx JSON error naming the field (``file`` for an iCalendar text that does not parse),
with nothing saved.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from fleetcron.app import App
from fleetcron.services.calendars import sets as svc
from fleetcron.web.deps import Caller, app_of, requires

router = APIRouter(tags=["calendars"])
AppDep = Annotated[App, Depends(app_of)]
NamePath = Annotated[str, Path(max_length=64)]
#: The largest iCalendar text accepted (a calendar of holidays is a few kilobytes).
ICS_MAX_CHARS = 5 * 1024 * 1024


class CalendarIn(BaseModel):
    name: str = Field(max_length=64)
    description: str = Field(default="", max_length=500)
    dates: list[str] = Field(default_factory=list, max_length=20_000)
    weekdays: str = Field(default="", max_length=40)
    except_name: str | None = Field(default=None, alias="except", max_length=64)


class ImportIn(BaseModel):
    name: str = Field(max_length=64)
    ics: str = Field(max_length=ICS_MAX_CHARS)
    description: str = Field(default="", max_length=500)
    replace: bool = False


@router.get("/calendars")
def list_calendars(
    app: AppDep, caller: Annotated[Caller, Depends(requires("calendar.read"))]
) -> list[dict[str, Any]]:
    return [view.as_dict() for view in svc.list_calendars(app, caller.actor)]


@router.get("/calendars/{name}")
def show_calendar(
    name: NamePath, app: AppDep, caller: Annotated[Caller, Depends(requires("calendar.read"))]
) -> dict[str, Any]:
    return svc.show_calendar(app, caller.actor, name).as_dict()


@router.post("/calendars", status_code=201)
def add_calendar(
    body: CalendarIn, app: AppDep, caller: Annotated[Caller, Depends(requires("calendar.add"))]
) -> dict[str, Any]:
    spec = svc.CalendarSpec(
        body.name, body.description, body.dates, body.weekdays, body.except_name
    )
    return svc.add_calendar(app, caller.actor, spec).as_dict()


@router.post("/calendars/import", status_code=201)
def import_calendar(
    body: ImportIn, app: AppDep, caller: Annotated[Caller, Depends(requires("calendar.add"))]
) -> dict[str, Any]:
    view = svc.import_calendar(
        app,
        caller.actor,
        body.name,
        body.ics.encode(),
        description=body.description,
        replace=body.replace,
    )
    return view.as_dict()


@router.delete("/calendars/{name}", status_code=204)
def remove_calendar(
    name: NamePath, app: AppDep, caller: Annotated[Caller, Depends(requires("calendar.remove"))]
) -> None:
    svc.remove_calendar(app, caller.actor, name)
