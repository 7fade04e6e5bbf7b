"""The job page's Preview: what a run now of a job would do, before anything runs, and the
run itself with an explicit choice of the rollout or all at once.

``GET /jobs/{name}/plan`` shows the plan (``services/jobs/plan.py``, the same as
``fleetcron job plan`` and ``GET /api/v1/jobs/{name}/plan``) for the targets chosen in its
query (``failed``, ``only``, ``selector``, ``target``); ``POST /jobs/{name}/run-plan``
runs that choice, with the session's CSRF token and the ``rollout`` field saying how:
``job`` (the job's rollout) or ``all_at_once``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field
from starlette.datastructures import FormData

from fleetcron.errors import FleetcronError, InvalidInput
from fleetcron.services.jobs.plan import UNREACHABLE_WHY, plan_job_run
from fleetcron.services.jobs.selection import ONLY_CHOICES, Selection, check_only
from fleetcron.services.runs import reads as runs_svc
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, page, plural, redirect, text, texts

router = APIRouter(include_in_schema=False)

#: The ``rollout`` field of the run form: how the run starts its targets.
ROLLOUT_CHOICES = ("job", "all_at_once")
Words = Annotated[list[str] | None, Field(max_length=10_000)]


class PreviewQuery(BaseModel):
    """The preview's query: the targets chosen (as the job page's links and the form write
    them) and whether the run would skip the rollout."""

    failed: bool = False
    only: Words = None
    selector: Annotated[str, Field(max_length=500)] = ""
    target: Words = None
    slot: Annotated[str, Field(max_length=64)] = ""
    all_at_once: bool = False

    def selection(self) -> Selection | None:
        return _selection(self.failed, self.only or [], self.selector, self.target or [], self.slot)


def plan_url(name: str, selection: Selection | None, **extra: str) -> str:
    query: dict[str, str | list[str]] = {}
    if selection is not None:
        if selection.failed:
            query["failed"] = "1"
        if selection.only:
            query["only"] = list(selection.only)
        if selection.selector:
            query["selector"] = selection.selector
        if selection.targets:
            query["target"] = list(selection.targets)
        if selection.slot is not None:
            query["slot"] = selection.slot.isoformat()
    query.update(extra)
    base = f"/jobs/{quote(name, safe='')}/plan"
    return base + ("?" + urlencode(query, doseq=True) if query else "")


def _slot(value: str) -> datetime | None:
    if not value.strip():
        return None
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        raise InvalidInput(
            f"slot: {value!r} is not a slot time; allowed: an ISO-8601 time with its offset, "
            "as the job page's slots link it",
            field="slot",
            value=value,
            allowed="an ISO-8601 time with its offset",
        )
    return at.astimezone(UTC)


def _selection(
    failed: bool, only: list[str], selector: str, targets: list[str], slot: str = ""
) -> Selection | None:
    words = check_only([w for w in only if w])
    chosen = tuple(t for t in targets if t)
    at = _slot(slot)
    if not (failed or words or at or selector.strip() or chosen):
        return None
    return Selection(
        failed=failed, only=words, selector=selector.strip() or None, targets=chosen, slot=at
    )


@router.get("/jobs/{name}/plan", response_class=HTMLResponse)
def preview(
    name: str,
    request: Request,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    query: Annotated[PreviewQuery, Query()],
) -> HTMLResponse:
    app = the_app(request)
    error = ""
    view = None
    selection = None
    try:
        selection = query.selection()
        view = plan_job_run(
            app, caller.actor, name, selection=selection, all_at_once=query.all_at_once
        )
    except InvalidInput as exc:
        error = exc.message
    return page(
        request,
        "job_plan.html",
        status_code=422 if error else 200,
        name=name,
        view=view,
        error=error,
        selection=selection,
        only_choices=ONLY_CHOICES,
        unreachable_why=UNREACHABLE_WHY,
        all_at_once=query.all_at_once,
        plan_url=plan_url,
    )


def _posted_selection(form: FormData) -> Selection | None:
    return _selection(
        text(form, "failed") in ("1", "on", "true"),
        texts(form, "only"),
        text(form, "selector"),
        texts(form, "target"),
        text(form, "slot"),
    )


@router.post("/jobs/{name}/run-plan", response_class=HTMLResponse)
def run_plan(
    name: str,
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("job.run"))],
) -> Response:
    job_home = f"/jobs/{quote(name, safe='')}"
    back = plan_url(name, None)
    try:
        selection = _posted_selection(form)
        back = plan_url(name, selection)
        how = text(form, "rollout")
        if how not in ROLLOUT_CHOICES:
            raise InvalidInput(
                f"rollout: {how!r} is not a way to start the run; allowed: job (the job's "
                "rollout) or all_at_once",
                field="rollout",
                value=how,
                allowed="job or all_at_once",
            )
        run_ids = runs_svc.request_run(
            the_app(request),
            caller.actor,
            name,
            selection=selection,
            all_at_once=how == "all_at_once",
        )
    except FleetcronError as exc:
        return redirect(back, exc.message, error=True)
    way = "all at once" if how == "all_at_once" else "following the job's rollout"
    return redirect(
        job_home,
        f"Queued {plural(len(run_ids), 'run')} of {name}, {way}; "
        "the scheduler starts them on its next tick.",
    )


__all__ = ["ROLLOUT_CHOICES", "plan_url", "router"]
