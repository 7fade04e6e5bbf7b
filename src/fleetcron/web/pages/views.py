"""The pages operators live in: the dashboard here, the rest in their own modules.

Every page calls the same service functions as the CLI and the API; every state change is
a POST with the session's CSRF token, declared with ``Depends(requires(action))``.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from fleetcron.core.permissions import may
from fleetcron.services.alerts import incident_ops
from fleetcron.services.cluster import status as cluster_svc
from fleetcron.services.fleet import grid as fleet_grid
from fleetcron.services.health import report as health_svc
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.runs import failures as failures_svc
from fleetcron.services.targets import reads as target_reads
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages import (
    accounts,
    blackouts,
    cluster,
    history,
    incidents,
    job_page,
    job_plan,
    jobs,
    runs,
    target_actions,
    targets,
    trust,
)
from fleetcron.web.pages.cluster import cluster_node
from fleetcron.web.pages.forms import page

router = APIRouter(include_in_schema=False)

#: Lines of each cause *Needs attention* lists (each cause says how many more, and where).
ATTENTION_LIMIT = health_svc.DEFAULT_LIMIT
#: How *Needs attention* names each cause, and the list its "more" line links to.
ATTENTION_WORDS = {
    "unreachable": "unreachable target(s)",
    "failing": "failing job × target",
    "stuck": "stuck run(s)",
    "late": "late job × target",
}
ATTENTION_LISTS = {
    "unreachable": "the runs that could not connect",
    "stuck": "the running runs",
}


@router.get("/", response_class=HTMLResponse)
def dashboard(
    request: Request,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    grid_offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> HTMLResponse:
    """The project's counts, recent failures, fleet grid and health (needs attention,
    hosts down, the day's runs)."""
    app, actor = the_app(request), caller.actor
    targets_total, targets_paired = target_reads.count_targets(app, actor)
    origins = Counter(jobs_svc.count_by_origin(app, actor))
    scheduler = request.app.state.scheduler
    failures = failures_svc.recent_failures(app, actor)
    return page(
        request,
        "dashboard.html",
        targets_total=targets_total,
        targets_paired=targets_paired,
        bulk_jobs=origins["bulk"],
        individual_jobs=origins["individual"],
        failures=failures,
        scheduler_node=app.node_name if scheduler is not None else None,
        last_tick=getattr(scheduler, "last_tick", None),
        cluster_line=cluster_svc.status(app, actor, cluster_node(app)).one_line()
        if may(actor, "cluster.read")
        else None,
        job_counts=fleet_grid.job_counts(app, actor),
        grid=fleet_grid.fleet_grid(app, actor, offset=grid_offset),
        grid_page=fleet_grid.GRID_TARGETS,
        open_incidents=incident_ops.count_open(app, actor) if may(actor, "incident.read") else None,
        **_health(request, caller, failures.read),
    )


def _health(request: Request, caller: Caller, failures_read: int) -> dict[str, Any]:
    """The health of the project the dashboard acts in, for whoever reads its runs (a
    global role too: the install's is ``fleetcron health`` and ``/api/v1/health``); for
    anyone else, nothing but the count of the project's recent failures."""
    app, actor = the_app(request), caller.actor
    if not may(actor, "run.read", actor.project):
        empty = health_svc.HealthSummary(checked_at=app.now())
        return {
            "by_status": None,
            "problems": [],
            "attention": empty,
            "failures_24h": failures_read,
        }
    summary = health_svc.summary(
        app, actor, limit=ATTENTION_LIMIT, detail=False, project=actor.project
    )
    return {
        "by_status": summary.runs_24h,
        "problems": summary.grouped,
        "attention": summary,
        "failures_24h": summary.failures_24h,
        "attention_words": ATTENTION_WORDS,
        "attention_lists": ATTENTION_LISTS,
    }


# The job page after the jobs pages: /jobs/new is the form, not a job named "new".
# The trust page before the target page: /targets/trust is not a target named "trust".
for _module in (jobs, history, job_page, trust, targets, target_actions, runs, accounts, cluster):
    router.include_router(_module.router)
router.include_router(job_plan.router)
router.include_router(incidents.router)
router.include_router(blackouts.router)
