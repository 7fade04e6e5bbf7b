"""The pages operators live in: the dashboard here, the rest in their own modules.

Every page calls the same service functions as the CLI and the API; every state change is
a POST with the session's CSRF token, declared with ``Depends(requires(action))``.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from fleetcron.core.permissions import allowed
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
    app = the_app(request)
    targets_total, targets_paired = target_reads.count_targets(app, caller.actor)
    origins = Counter(jobs_svc.count_by_origin(app, caller.actor))
    scheduler = request.app.state.scheduler
    summary = health_svc.summary(app, caller.actor, limit=ATTENTION_LIMIT, detail=False)
    return page(
        request,
        "dashboard.html",
        targets_total=targets_total,
        targets_paired=targets_paired,
        bulk_jobs=origins["bulk"],
        individual_jobs=origins["individual"],
        by_status=summary.runs_24h,
        problems=summary.grouped,
        attention=summary,
        attention_words=ATTENTION_WORDS,
        attention_lists=ATTENTION_LISTS,
        failures=failures_svc.recent_failures(app, caller.actor),
        failures_24h=summary.failures_24h,
        scheduler_node=app.node_name if scheduler is not None else None,
        last_tick=getattr(scheduler, "last_tick", None),
        cluster_line=cluster_svc.status(app, caller.actor, cluster_node(app)).one_line(),
        job_counts=fleet_grid.job_counts(app, caller.actor),
        grid=fleet_grid.fleet_grid(app, caller.actor, offset=grid_offset),
        grid_page=fleet_grid.GRID_TARGETS,
        open_incidents=incident_ops.count_open(app, caller.actor)
        if allowed(caller.actor.role, "incident.read", caller.actor.scope)
        else None,
    )


# The job page after the jobs pages: /jobs/new is the form, not a job named "new".
# The trust page before the target page: /targets/trust is not a target named "trust".
for _module in (jobs, history, job_page, trust, targets, target_actions, runs, accounts, cluster):
    router.include_router(_module.router)
router.include_router(job_plan.router)
router.include_router(incidents.router)
router.include_router(blackouts.router)
