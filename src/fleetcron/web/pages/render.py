"""Rendering templates with what every page needs: the caller, the CSRF token, times."""

from __future__ import annotations

from datetime import datetime
from importlib.resources import files
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from fleetcron.app import Actor
from fleetcron.core.permissions import may, role_in
from fleetcron.core.start_window import window_words
from fleetcron.core.status_display import TONE_OF, display_of
from fleetcron.errors import AuthenticationFailed
from fleetcron.logs import escape_output_controls
from fleetcron.services.projects.admin import project_names
from fleetcron.web.deps import Caller, optional_caller

templates = Jinja2Templates(directory=str(files("fleetcron.web") / "templates"))
templates.env.filters["shown_output"] = escape_output_controls
templates.env.globals["status_display"] = display_of
templates.env.globals["state_tone"] = TONE_OF.__getitem__
templates.env.globals["window_words"] = window_words
TZ_COOKIE = "fleetcron_tz"


def viewer_zone(request: Request) -> ZoneInfo:
    """The viewer's time zone (cookie set by the page script, else the server's default)."""
    default = request.app.state.fleetcron.settings.timezone
    name = request.cookies.get(TZ_COOKIE) or default
    for candidate in (name, default):
        # A cookie is the client's text: a tzdata directory ("America") is an OSError, an
        # over-long name too, and neither may break every page.
        if len(candidate) > 64:
            continue
        try:
            return ZoneInfo(candidate)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            continue
    return ZoneInfo("UTC")


def _when(zone: ZoneInfo) -> Any:
    def when(value: datetime | None) -> str:
        if value is None:
            return ""
        return value.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")

    return when


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    try:
        caller = optional_caller(request)
    except AuthenticationFailed:  # a bad bearer token on a page: render it as anonymous
        caller = None
    zone = viewer_zone(request)
    return templates.TemplateResponse(
        request,
        template,
        {
            "caller": caller,
            "csrf_token": caller.csrf_token if caller else "",
            "can": lambda action: caller is not None and can(caller.actor, action),
            "when": _when(zone),
            "zone": zone.key,
            **project_context(request, caller),
            **context,
        },
        status_code=status_code,
    )


def can(actor: Actor, action: str) -> bool:
    """Whether the page offers ``action``: in the project it acts in, as its operations
    weigh it."""
    return may(actor, action, actor.project)


#: The list pages the switcher reopens in the chosen project; elsewhere (an object's page,
#: which the chosen project may not hold) it opens the dashboard.
SWITCHED_PAGES = frozenset({"/", "/jobs", "/targets", "/runs", "/upcoming"})


def project_context(request: Request, caller: Caller | None) -> dict[str, Any]:
    """The project the page acts in, the caller's role there and the switcher's choices:
    the projects the caller sees, none when it sees one."""
    if caller is None:
        return {"project": "", "projects": [], "switch_to": "/", "role_here": ""}
    actor = caller.actor
    names = project_names(request.app.state.fleetcron, actor)
    path = request.url.path
    return {
        "project": actor.project,
        "projects": names if len(names) > 1 else [],
        "switch_to": path if path in SWITCHED_PAGES else "/",
        # the role its jobs, targets and runs are weighed with here (a member: none globally)
        "role_here": role_in(actor, actor.project),
    }


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    if status == 401:
        from fastapi.responses import RedirectResponse

        target = request.url.path
        return RedirectResponse(f"/login?next={target}", status_code=303)  # type: ignore[return-value]
    return render(request, "error.html", status_code=status, status=status, message=message)
