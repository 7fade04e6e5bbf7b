"""/api/v1/targets"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from fleetcron.services import targets as svc
from fleetcron.services.context import App
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.schemas import LabelsIn, PairIn, PairOut, TargetIn, TargetOut

router = APIRouter(prefix="/targets", tags=["targets"])
AppDep = Annotated[App, Depends(the_app)]


def _pair_out(result: svc.PairResult) -> PairOut:
    return PairOut(
        target=TargetOut.of(result.target),
        host_key_fingerprint=result.host_key_fingerprint,
        trusted_on_first_use=result.trusted_on_first_use,
        extended_jobs=list(result.extended_jobs),
    )


@router.get("", response_model=list[TargetOut])
def list_targets(
    app: AppDep, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> list[TargetOut]:
    return [TargetOut.of(t) for t in svc.list_targets(app, caller.actor)]


@router.post("", response_model=PairOut, status_code=201)
def add_target(
    body: TargetIn, app: AppDep, caller: Annotated[Caller, Depends(requires("target.add"))]
) -> PairOut:
    result = svc.add_target(
        app,
        caller.actor,
        body.name,
        local=body.kind == "local",
        host=body.host,
        port=body.port,
        user=body.user,
        private_key=body.private_key.encode() if body.private_key else None,
        host_key=body.host_key,
        trust_on_first_use=body.trust_on_first_use,
        labels=[f"{k}={v}" for k, v in body.labels.items()],
        notes=body.notes,
        verify=body.verify,
    )
    return _pair_out(result)


@router.get("/{name}", response_model=TargetOut)
def show_target(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> TargetOut:
    target, _ = svc.show_target(app, caller.actor, name)
    return TargetOut.of(target)


@router.post("/{name}/pair", response_model=PairOut)
def pair_target(
    name: str,
    body: PairIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.pair"))],
) -> PairOut:
    result = svc.pair_target(
        app, caller.actor, name, host_key=body.host_key, trust_on_first_use=body.trust_on_first_use
    )
    return _pair_out(result)


@router.post("/{name}/unpair", response_model=TargetOut)
def unpair_target(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.unpair"))]
) -> TargetOut:
    svc.unpair_target(app, caller.actor, name)
    target, _ = svc.show_target(app, caller.actor, name)
    return TargetOut.of(target)


@router.post("/{name}/labels", response_model=TargetOut)
def label_target(
    name: str,
    body: LabelsIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.label"))],
) -> TargetOut:
    target = svc.label_target(app, caller.actor, name, [f"{k}={v}" for k, v in body.labels.items()])
    return TargetOut.of(target)


@router.delete("/{name}", status_code=204)
def remove_target(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.remove"))]
) -> Response:
    svc.remove_target(app, caller.actor, name)
    return Response(status_code=204)
