"""/api/v1/jobs/{name}/versions, /api/v1/jobs/{name}/revert: versions of a job's definition;
/api/v1/upcoming: what fires in the next hours.

Also :class:`ChangeSource`, the middleware that tells the version writer whether a change
came through the API or a page.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import Receive, Scope, Send

from fleetcron.app import App
from fleetcron.core.upcoming import MAX_HOURS
from fleetcron.services.jobs import versions as svc
from fleetcron.services.jobs.upcoming import UpcomingQuery, upcoming_fires
from fleetcron.services.jobs.version_writes import change_source
from fleetcron.web.deps import Caller, app_of, requires
from fleetcron.web.middleware import HttpMiddleware

router = APIRouter(tags=["jobs"])
AppDep = Annotated[App, Depends(app_of)]


class ChangeSource(HttpMiddleware):
    """Job changes made while answering a request are recorded as ``api`` (under
    ``/api/``) or ``web`` (pages); set here once rather than passed through every route."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        source = "api" if str(scope.get("path", "")).startswith("/api/") else "web"
        with change_source(source):
            await self.app(scope, receive, send)


class VersionOut(BaseModel):
    job: str
    version: int
    at: datetime
    actor: str
    source: str
    changed: list[str]
    summary: str
    current: bool
    definition: dict[str, Any] | None = None


class ChangeOut(BaseModel):
    field: str
    old: Any
    new: Any
    lines: list[str]


class VersionDetailOut(VersionOut):
    definition: dict[str, Any] | None
    changes: list[ChangeOut] = Field(description="what changed from the previous version")


class RevertIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: int = Field(ge=1, le=2**31 - 1, description="the version to go back to")


class RevertOut(BaseModel):
    job: str
    version: int
    reverted_to: int
    changes: list[ChangeOut]


@router.get("/jobs/{name}/versions", response_model=list[VersionOut])
def list_versions(
    name: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[VersionOut]:
    return [
        VersionOut(**v.as_dict(with_definition=False))
        for v in svc.list_versions(app, caller.actor, name, limit=limit)
    ]


@router.get("/jobs/{name}/versions/{version}", response_model=VersionDetailOut)
def show_version(
    name: str,
    version: Annotated[int, Field(ge=1, le=2**31 - 1)],
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
) -> VersionDetailOut:
    view = svc.get_version(app, caller.actor, name, version)
    changes = (
        svc.diff_versions(app, caller.actor, name, version - 1, version) if version > 1 else []
    )
    return VersionDetailOut(**view.as_dict(), changes=[ChangeOut(**c.as_dict()) for c in changes])


@router.post("/jobs/{name}/revert", response_model=RevertOut)
def revert_job(
    name: str,
    body: RevertIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.revert"))],
) -> RevertOut:
    version, changes = svc.revert_job(app, caller.actor, name, body.to)
    return RevertOut(
        job=name,
        version=version,
        reverted_to=body.to,
        changes=[ChangeOut(**c.as_dict()) for c in changes],
    )


class TargetCounts(BaseModel):
    active: int = Field(description="targets that run the fire")
    paused: int = Field(description="targets paused: the fire is recorded as skipped there")
    disabled: int = Field(description="assignments disabled: nothing is recorded")


class RolloutOut(BaseModel):
    canaries: int
    waves: int
    batch: int
    pause_s: int
    max_failures: int | None
    halted: str | None = Field(
        default=None, description="why the rollout skips the whole fire before anything starts"
    )
    text: str


class FireOut(BaseModel):
    at: datetime
    job: str
    origin: str
    zone: str
    state: str = Field(
        description="fires, halted (its rollout skips it: no canary, or a canary paused), "
        "paused (only paused targets) or disabled"
    )
    targets: TargetCounts
    spread_s: int
    rollout: RolloutOut | None


class DstNoteOut(BaseModel):
    job: str
    zone: str
    at: datetime = Field(description="the transition's instant")
    day: str = Field(description="its local date")
    kind: str = Field(description="gap (a time skipped) or fold (a time repeated)")
    times: list[str] = Field(description="the job's scheduled times in the interval (a few)")
    affected: int = Field(description="how many scheduled times are in the interval")
    text: str = Field(description="what the job does there, in words")


class UpcomingOut(BaseModel):
    start: datetime = Field(alias="from")
    until: datetime
    truncated: bool
    fires: list[FireOut]
    dst: list[DstNoteOut] = Field(
        default_factory=list,
        description="the next DST transitions of the jobs' zones and what each job does at "
        "them (every one with ?job=, else those that change a scheduled time)",
    )

    model_config = ConfigDict(populate_by_name=True)


@router.get("/upcoming", response_model=UpcomingOut, response_model_by_alias=True)
def upcoming(
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("job.read"))],
    hours: Annotated[float, Query(gt=0, le=MAX_HOURS)] = 24,
    job: Annotated[str | None, Query(max_length=64)] = None,
    target: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> UpcomingOut:
    result = upcoming_fires(
        app, caller.actor, UpcomingQuery(hours=hours, job=job, target=target, limit=limit)
    )
    return UpcomingOut.model_validate(
        {
            "from": result.start,
            "until": result.end,
            "truncated": result.truncated,
            "fires": [f.as_dict() for f in result.fires],
            "dst": [n.as_dict() for n in result.dst],
        }
    )
