"""The pages operators live in: the dashboard here, the rest in their own modules.

Every page calls the same service functions as the CLI and the API; every state change is
a POST with the session's CSRF token, declared with ``Depends(requires(action))``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from fleetcron.services import jobs as jobs_svc
from fleetcron.services import runs as runs_svc
from fleetcron.services import targets as targets_svc
from fleetcron.services.context import Actor, App
from fleetcron.services.runs import RUN_STATUSES, RunFilter
from fleetcron.store.schema import Run
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages import accounts, jobs, runs, targets
from fleetcron.web.pages.forms import page

router = APIRouter(include_in_schema=False)

FAILURES = ("failed", "timed_out", "connect_error")
RECENT_FAILURES = 10
WINDOW = timedelta(hours=24)


def runs_by_status(app: App, actor: Actor) -> dict[str, int]:
    """How many runs of the last 24 hours ended (or stand) in each status."""
    since = app.now() - WINDOW
    counts: dict[str, int] = {}
    for status in RUN_STATUSES:
        # One counting query per status: the service has no grouped count.
        _, total = runs_svc.list_runs(app, actor, RunFilter(status=status, since=since), limit=1)
        if total:
            counts[status] = total
    return counts


def recent_failures(app: App, actor: Actor) -> list[Run]:
    found: list[Run] = []
    for status in FAILURES:
        rows, _ = runs_svc.list_runs(app, actor, RunFilter(status=status), limit=RECENT_FAILURES)
        found.extend(rows)
    found.sort(key=lambda run: (run.scheduled_for, run.id), reverse=True)
    return found[:RECENT_FAILURES]


@router.get("/", response_class=HTMLResponse)
def dashboard(
    request: Request, caller: Annotated[Caller, Depends(requires("job.read"))]
) -> HTMLResponse:
    app = the_app(request)
    all_targets = targets_svc.list_targets(app, caller.actor)
    origins = Counter(view.origin for view in jobs_svc.list_jobs(app, caller.actor))
    scheduler = request.app.state.scheduler
    return page(
        request,
        "dashboard.html",
        targets_total=len(all_targets),
        targets_paired=sum(1 for t in all_targets if t.paired),
        bulk_jobs=origins["bulk"],
        individual_jobs=origins["individual"],
        by_status=runs_by_status(app, caller.actor),
        failures=recent_failures(app, caller.actor),
        scheduler_node=app.node_name if scheduler is not None else None,
        last_tick=getattr(scheduler, "last_tick", None),
    )


for _module in (jobs, targets, runs, accounts):
    router.include_router(_module.router)
