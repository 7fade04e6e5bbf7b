"""/api/v1/projects: projects, roles in them; /api/v1/targets/{name}/shares: a target
shared into other projects. Changes are for global admins; ``?project=`` names the project
the target of a share belongs to (default: default)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Response

from fleetcron.app import App
from fleetcron.services.projects import admin as svc
from fleetcron.services.targets import shares
from fleetcron.web.deps import Caller, app_of, requires
from fleetcron.web.schemas import MemberIn, MemberOut, ProjectIn, ProjectOut, ShareIn, SharesOut

router = APIRouter(tags=["projects"])
AppDep = Annotated[App, Depends(app_of)]


@router.get("/projects", response_model=list[ProjectOut])
def list_projects(
    app: AppDep, caller: Annotated[Caller, Depends(requires("project.read"))]
) -> list[ProjectOut]:
    return [ProjectOut(**asdict(p)) for p in svc.list_projects(app, caller.actor)]


@router.post("/projects", response_model=ProjectOut, status_code=201)
def add_project(
    body: ProjectIn, app: AppDep, caller: Annotated[Caller, Depends(requires("project.add"))]
) -> ProjectOut:
    return ProjectOut(**asdict(svc.add_project(app, caller.actor, body.name, body.description)))


@router.get("/projects/{name}/members", response_model=list[MemberOut])
def list_members(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("project.grant"))]
) -> list[MemberOut]:
    return [MemberOut(**asdict(m)) for m in svc.members(app, caller.actor, name)]


@router.put("/projects/{name}/members/{user}", response_model=MemberOut)
def grant(
    name: str,
    user: str,
    body: MemberIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("project.grant"))],
) -> MemberOut:
    return MemberOut(**asdict(svc.grant(app, caller.actor, name, user, body.role)))


@router.delete("/projects/{name}/members/{user}", status_code=204)
def revoke(
    name: str,
    user: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("project.grant"))],
) -> Response:
    svc.revoke(app, caller.actor, name, user)
    return Response(status_code=204)


@router.get("/targets/{name}/shares", response_model=SharesOut)
def list_shares(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> SharesOut:
    return SharesOut(target=name, projects=shares.shared_into(app, caller.actor, name))


@router.post("/targets/{name}/shares", response_model=SharesOut, status_code=201)
def share(
    name: str,
    body: ShareIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("project.share"))],
) -> SharesOut:
    extended = shares.share_target(app, caller.actor, name, body.into)
    projects = shares.shared_into(app, caller.actor, name)
    return SharesOut(target=name, projects=projects, extended=extended)


@router.delete("/targets/{name}/shares/{project}", status_code=204)
def unshare(
    name: str,
    project: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("project.share"))],
) -> Response:
    shares.unshare_target(app, caller.actor, name, project)
    return Response(status_code=204)
