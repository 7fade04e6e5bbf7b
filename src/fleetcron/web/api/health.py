"""/healthz, /readyz, /metrics and /api/v1/health."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import text

from fleetcron.services.health import report as svc
from fleetcron.web.deps import Caller, requires, the_app

router = APIRouter(tags=["health"])


async def public(request: Request) -> None:
    """Marks a route that answers without credentials (probes and metrics); a coroutine,
    which FastAPI calls on the event loop rather than in a worker thread."""


public.public = True  # type: ignore[attr-defined]


@router.get("/healthz", dependencies=[Depends(public)])
def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "alive"}


OWNING = ("standalone", "owner")
"""Ownership states in which this node runs the jobs (a standalone node always does)."""


@router.get("/readyz", dependencies=[Depends(public)])
def readyz(request: Request) -> JSONResponse:
    """Ready: the database answers, the scheduler loop ticks, ownership is known.

    ``role`` says what a ready node is: ``owner`` (it holds ownership and runs the jobs; a
    standalone node always does) or ``standby`` (a healthy node of a cluster that does not
    hold it, ready to take over). A node that is neither (the database unreachable, the
    loop stalled, ownership invalid or refused) answers 503 with ``role`` null and the
    failing check."""
    app = the_app(request)
    checks: dict[str, Any] = {}
    try:
        with app.db.read() as session:
            session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:  # any failure to reach the database means not ready
        checks["database"] = f"unreachable: {exc.__class__.__name__}"
    scheduler = request.app.state.scheduler
    if scheduler is None:
        checks["scheduler"] = "not running in this process"
    elif scheduler.last_tick is None:
        checks["scheduler"] = "not ticked yet"
    else:
        behind = scheduler.clock() - scheduler.last_tick
        limit = timedelta(seconds=max(3 * app.settings.tick_s, 10))
        checks["scheduler"] = (
            "ok" if behind <= limit else f"last tick {behind.total_seconds():.0f}s ago"
        )
    try:
        ownership = str(request.app.state.ownership())
    except Exception as exc:  # read from the database in a cluster: unknown when it is down
        ownership = f"unknown: {exc.__class__.__name__}"
    checks["ownership"] = "ok" if ownership in (*OWNING, "standby") else ownership
    ready = all(v == "ok" for k, v in checks.items() if k != "scheduler") and checks.get(
        "scheduler"
    ) in ("ok", "not running in this process")
    role = ("owner" if ownership in OWNING else "standby") if ready else None
    return JSONResponse(
        {"ready": ready, "role": role, "ownership": ownership, "checks": checks},
        status_code=200 if ready else 503,
    )


@router.get("/metrics", dependencies=[Depends(public)])
async def metrics(request: Request) -> Response:
    """Prometheus exposition; requires a token when FLEETCRON_METRICS_REQUIRE_AUTH is set."""
    app = the_app(request)
    if app.settings.metrics_require_auth:
        await requires("run.read")(request)
    body = request.app.state.metrics.exposition()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/api/v1/health")
def health(
    request: Request,
    caller: Annotated[Caller, Depends(requires("run.read"))],
    detail: Annotated[
        bool, Query(description="Also list the job × target detail of the lines listed.")
    ] = False,
    limit: Annotated[
        int,
        Query(
            description=f"Lines of each cause (and jobs) to list: 1 to {svc.LIMIT_MAX}. "
            "The counts are always complete."
        ),
    ] = svc.DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Failing, late or missing, and stuck, grouped by cause; ``ok`` is false when anything
    needs attention.

    ``grouped``: at most ``limit`` lines of each cause: one ``unreachable`` line per target
    that cannot be reached (its connection error, the start of the outage, the jobs
    affected), one line per job × target for every other problem. ``groups``: each cause
    counted in full (``total`` lines, ``problems`` job × target, ``more`` not listed,
    ``see_all``: the web UI's list of them all); ``jobs``: the jobs with the most problems,
    counted, with the job page that lists them (``jobs_total``: every job with a problem);
    ``line_count`` and ``problem_count``: the totals. ``problems`` (with ``detail=true``):
    the job × target detail of the lines listed."""
    summary = svc.summary(the_app(request), caller.actor, limit=limit, detail=detail)
    return summary.as_dict(detail=detail)
