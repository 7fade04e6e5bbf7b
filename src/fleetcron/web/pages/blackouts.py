"""The blackout windows page: the windows in force (or all), a form to add one, and a
button to lift one early (``services/blackouts``). Every form carries the CSRF token; a
refusal shows the form again with what was typed and the message naming the field, and
saves nothing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.datastructures import FormData

from fleetcron.core.blackouts import WINDOW_KEYS
from fleetcron.core.incidents import parse_duration
from fleetcron.errors import FleetcronError, NotFound
from fleetcron.services.blackouts import windows as svc
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, page, redirect, text

router = APIRouter(include_in_schema=False)
BlackoutId = Annotated[int, Path(ge=1, le=2**31 - 1)]


def _blank(value: str) -> str | None:
    return value.strip() or None


def _spec(form: FormData) -> svc.BlackoutSpec:
    """The window the form describes; an unparsable duration is refused naming it."""
    duration = text(form, "duration").strip()
    seconds = int(parse_duration(duration).total_seconds()) if duration else None
    return svc.BlackoutSpec(
        name=text(form, "name"),
        reason=text(form, "reason"),
        job=_blank(text(form, "job")),
        target=_blank(text(form, "target")),
        selector=_blank(text(form, "selector")),
        zone=text(form, "zone").strip() or "UTC",
        start=_blank(text(form, "start").replace("T", " ")),
        end=_blank(text(form, "end").replace("T", " ")),
        cron=_blank(text(form, "cron")),
        weekly=_blank(text(form, "weekly")),
        duration_s=seconds,
        until=_blank(text(form, "until").replace("T", " ")),
    )


def _page(
    request: Request,
    caller: Caller,
    *,
    show_all: bool = False,
    fields: dict[str, str] | None = None,
    error: FleetcronError | None = None,
) -> HTMLResponse:
    found = svc.list_blackouts(the_app(request), caller.actor, include_ended=show_all)
    return page(
        request,
        "blackouts.html",
        status_code=(404 if isinstance(error, NotFound) else 422) if error else 200,
        windows=found,
        show_all=show_all,
        fields=fields or {"zone": "UTC"},
        error=error.message if error else "",
        error_field=getattr(error, "field", None) or "",
    )


@router.get("/blackouts", response_class=HTMLResponse)
def blackouts_page(
    request: Request,
    caller: Annotated[Caller, Depends(requires("blackout.read"))],
    show_all: Annotated[bool, Query(alias="all")] = False,
) -> HTMLResponse:
    return _page(request, caller, show_all=show_all)


@router.post("/blackouts", response_class=HTMLResponse)
def add_window(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("blackout.add"))],
) -> Response:
    fields = {name: text(form, name) for name in WINDOW_KEYS}
    try:
        view = svc.add_blackout(the_app(request), caller.actor, _spec(form))
    except FleetcronError as exc:
        return _page(request, caller, fields=fields, error=exc)
    note = (
        f" It overlaps window(s) {', '.join(f'#{o}' for o in view.overlaps)}."
        if view.overlaps
        else ""
    )
    return redirect(
        "/blackouts", f'Blackout window #{view.id} "{view.name}" added: {view.when}.{note}'
    )


@router.post("/blackouts/{blackout_id}/lift", response_class=HTMLResponse)
def lift_window(
    blackout_id: BlackoutId,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("blackout.lift"))],
) -> Response:
    try:
        view = svc.lift_blackout(the_app(request), caller.actor, blackout_id, text(form, "reason"))
    except FleetcronError as exc:
        return redirect("/blackouts", exc.message, error=True)
    return redirect("/blackouts", f'Blackout window #{view.id} "{view.name}" lifted.')
