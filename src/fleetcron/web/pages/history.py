"""Pages of a job's history: its versions with diffs and a revert (with a confirmation);
the Upcoming page; and the functions the job page's history partials call (``job_chart.html``,
``job_history.html``), so the job page route needs no change to show them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from fleetcron.core.upcoming import MAX_HOURS
from fleetcron.core.versions import FieldChange
from fleetcron.errors import FleetcronError, InvalidInput, NotFound
from fleetcron.services.jobs import versions as versions_svc
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires
from fleetcron.services.runs import history as history_svc
from fleetcron.services.runs.search import SearchPage
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, page, redirect, text, whole_number
from fleetcron.web.pages.render import templates

router = APIRouter(include_in_schema=False)
Version = Annotated[int | None, Query(ge=1, le=2**31 - 1)]
SHOWN_ON_JOB_PAGE = 10
#: Fires listed on the Upcoming page (the API and the CLI take a --limit).
PAGE_FIRES = 500


def _job_url(name: str) -> str:
    return f"/jobs/{quote(name, safe='')}"


def job_chart_of(request: Request, caller: Caller, name: str) -> history_svc.Chart:
    return history_svc.job_chart(the_app(request), caller.actor, name)


def job_durations_of(request: Request, caller: Caller, name: str) -> history_svc.Durations:
    return history_svc.duration_percentiles(the_app(request), caller.actor, name)


def job_versions_of(request: Request, caller: Caller, name: str) -> list[versions_svc.VersionView]:
    return versions_svc.list_versions(the_app(request), caller.actor, name, limit=SHOWN_ON_JOB_PAGE)


def target_strips_of(request: Request, caller: Caller, name: str) -> list[history_svc.Strip]:
    return history_svc.target_strips(the_app(request), caller.actor, name)


def show(value: Any) -> str:
    """A definition value as the diff shows it."""
    if value is None or value == "":
        return "(none)"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "(none)"
    return str(value)


templates.env.globals.update(
    job_chart_of=job_chart_of,
    job_durations_of=job_durations_of,
    job_versions_of=job_versions_of,
    target_strips_of=target_strips_of,
)


@router.get("/jobs/{name}/versions", response_class=HTMLResponse)
def versions_page(
    name: str,
    request: Request,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    v: Version = None,
    base: Annotated[int | None, Query(alias="from", ge=1, le=2**31 - 1)] = None,
) -> HTMLResponse:
    app = the_app(request)
    versions = versions_svc.list_versions(app, caller.actor, name)
    current_exists = any(x.current for x in versions)
    shown = before = None
    changes: list[FieldChange] = []
    if versions:
        number = v if v is not None else versions[0].version
        shown = versions_svc.get_version(app, caller.actor, name, number)
        older = base if base is not None else (number - 1 if number > 1 else None)
        if older is not None:
            before = versions_svc.get_version(app, caller.actor, name, older)
            changes = versions_svc.diff_versions(app, caller.actor, name, older, number)
    return page(
        request,
        "job_versions.html",
        name=name,
        versions=versions,
        shown=shown,
        base=before,
        changes=changes,
        current_exists=current_exists,
        show=show,
    )


#: The largest version a page takes, as the API's (a larger one reached the database).
MAX_VERSION = 2**31 - 1


def _to(request: Request, value: str) -> int:
    number = whole_number(value or request.query_params.get("to", ""), field="to")
    if number is None or not 1 <= number <= MAX_VERSION:
        raise InvalidInput(
            "to: name the version to go back to",
            field="to",
            value=value,
            allowed=f"a version number (1 to {MAX_VERSION})",
        )
    return number


@router.get("/jobs/{name}/revert", response_class=HTMLResponse)
def confirm_revert(
    name: str,
    request: Request,
    caller: Annotated[Caller, Depends(requires("job.revert"))],
    to: Annotated[int, Query(ge=1, le=2**31 - 1)],
) -> HTMLResponse:
    app = the_app(request)
    changes = versions_svc.diff_versions(app, caller.actor, name, to)
    what = "; ".join(
        f"{c.field}: {show(c.new)} → {show(c.old)}" if not c.lines else f"{c.field} changes"
        for c in changes
    )
    return page(
        request,
        "confirm.html",
        title=f"Revert job {name} to version {to}?",
        message=(
            f"The job gets the definition of version {to} again, as a new version "
            f"({what or 'no difference'})."
        ),
        action=f"{_job_url(name)}/revert?to={to}",
        button=f"Revert to v{to}",
        cancel=f"{_job_url(name)}/versions?v={to}",
        danger=False,
    )


@router.post("/jobs/{name}/revert", response_class=HTMLResponse)
def revert(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.revert"))],
) -> Response:
    app = the_app(request)
    try:
        to = _to(request, text(form, "to"))
        version, _ = versions_svc.revert_job(app, caller.actor, name, to)
    except FleetcronError as exc:
        return redirect(f"{_job_url(name)}/versions", exc.message, error=True)
    return redirect(
        _job_url(name), f"Job {name} has the definition of version {to} again (now v{version})."
    )


@router.get("/upcoming", response_class=HTMLResponse)
def upcoming_page(
    request: Request,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    hours: Annotated[str, Query(max_length=8)] = "24",
    job: Annotated[str, Query(max_length=64)] = "",
    target: Annotated[str, Query(max_length=64)] = "",
) -> HTMLResponse:
    app = the_app(request)
    error = ""
    result = None
    try:
        try:
            span = float(hours)
        except ValueError:
            raise InvalidInput(
                f"hours: {hours!r} is not a number",
                field="hours",
                value=hours,
                allowed=f"a number of hours, more than 0 and at most {MAX_HOURS}",
            ) from None
        result = upcoming_fires(
            app,
            caller.actor,
            UpcomingQuery(hours=span, job=job or None, target=target or None, limit=PAGE_FIRES),
        )
    except (InvalidInput, NotFound) as exc:
        error = exc.message
    return page(
        request,
        "upcoming.html",
        status_code=422 if error else 200,
        result=result,
        error=error,
        hours=hours,
        job=job,
        target=target,
        max_hours=MAX_HOURS,
    )


@dataclass(frozen=True)
class KeysetPager:
    """The runs list's place and links when pages are read by key: "Older" continues after
    the last run shown (its cursor), "Newer" goes back to the newest page."""

    query: dict[str, str]
    before: int  # runs on the pages before this one
    shown: int
    found: SearchPage | None

    @property
    def first(self) -> int:
        return self.before + 1 if self.shown else 0

    @property
    def last(self) -> int:
        return self.before + self.shown

    @property
    def total(self) -> int | str:
        if self.found is None:
            return 0
        return f"more than {self.found.matched:,}" if self.found.more else self.found.matched

    @property
    def previous(self) -> str | None:
        return "?" + urlencode(self.query) if self.before else None

    @property
    def next(self) -> str | None:
        if self.found is None or self.found.next_cursor is None:
            return None
        return "?" + urlencode(
            {**self.query, "cursor": self.found.next_cursor, "before": self.last}
        )
