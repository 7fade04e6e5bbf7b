"""/api/v1/targets"""

from __future__ import annotations

from datetime import UTC
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from fleetcron.app import Actor, App
from fleetcron.core.target_zones import TARGET_LOCAL
from fleetcron.core.targets import TargetSpec
from fleetcron.cron import parse
from fleetcron.cron.dst import DEFAULT as DEFAULT_DST
from fleetcron.cron.dst import DstPolicy
from fleetcron.errors import Conflict
from fleetcron.services.fleet.assignments import zone_spread
from fleetcron.services.targets import edit as svc
from fleetcron.services.targets import reads as target_reads
from fleetcron.services.targets import trust, trust_rules
from fleetcron.web.deps import Caller, app_of, requires
from fleetcron.web.schemas import (
    CronPreview,
    LabelsIn,
    PairIn,
    PairOut,
    PauseIn,
    RepinIn,
    RepinOut,
    TargetEditOut,
    TargetIn,
    TargetOut,
    TargetPatch,
    TrustCaIn,
    TrustCaOut,
    TrustImportIn,
    TrustImportOut,
    TrustOutcomeOut,
    TrustStateOut,
    ZoneFires,
)

router = APIRouter(prefix="/targets", tags=["targets"])
#: The most targets one page of ``GET /api/v1/targets`` carries.
MAX_PAGE = 1000
#: Fires per zone in a ``tz=target`` preview.
ZONE_PREVIEW_FIRES = 3
AppDep = Annotated[App, Depends(app_of)]


def _pair_out(result: svc.PairResult) -> PairOut:
    return PairOut(
        target=TargetOut.of(result.target),
        host_key_fingerprint=result.host_key_fingerprint,
        trusted_on_first_use=result.trusted_on_first_use,
        extended_jobs=list(result.extended_jobs),
        kept_disabled=list(result.kept_disabled),
        timezone=result.timezone,
        timezone_note=result.timezone_note,
    )


def target_local_preview(
    app: App, actor: Actor, expr: str, n: int, *, dst: DstPolicy = DEFAULT_DST
) -> CronPreview:
    """The schedule preview of a job in the ``target`` zone: its fires spread over the
    zones of the paired targets, under the DST choices ``dst``
    (``/api/v1/cron/preview?tz=target``)."""
    spread = zone_spread(app, actor, expr, max(n, ZONE_PREVIEW_FIRES), dst=dst)
    schedule = parse(expr, app.settings.timezone)
    merged = sorted(
        (fire for zone in spread for fire in zone.fires), key=lambda f: f.astimezone(UTC)
    )
    return CronPreview(
        normalized=schedule.normalized,
        description=schedule.describe(),
        timezone=TARGET_LOCAL,
        extensions=list(schedule.extensions),
        next=merged[:n],
        zones=[
            ZoneFires(
                timezone=z.timezone, targets=z.targets, next=list(z.fires[:ZONE_PREVIEW_FIRES])
            )
            for z in spread
        ],
    )


@router.get("", response_model=list[TargetOut])
def list_targets(
    request: Request,
    response: Response,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.read"))],
    limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    q: Annotated[str | None, Query(max_length=200)] = None,
) -> list[TargetOut]:
    """The targets by name. Without ``limit``, all of them (from ``offset``); with it, one
    page of at most ``limit`` (1 to 1,000). ``q`` keeps the targets whose name contains it,
    ignoring case (a control character in it is refused: 422 naming ``q``). The body is
    the same list either way; ``X-Total-Count`` says how many match, and a ``Link`` header
    with ``rel="next"`` gives the next page while there is one."""
    rows, total = target_reads.list_targets_page(
        app, caller.actor, limit=limit, offset=offset, name=q
    )
    response.headers["X-Total-Count"] = str(total)
    if limit is not None and offset + len(rows) < total:
        following = request.url.include_query_params(offset=offset + len(rows))
        response.headers["Link"] = f'<{following}>; rel="next"'
    return [TargetOut.of(t) for t in rows]


@router.post("", response_model=PairOut, status_code=201)
def add_target(
    body: TargetIn, app: AppDep, caller: Annotated[Caller, Depends(requires("target.add"))]
) -> PairOut:
    """Add a target and pair it (unless ``verify`` is false). A local target needs the
    admin role and the ``allow_local_targets`` setting. Pairing detects the server's time
    zone unless ``timezone`` gives one (``timezone_note`` in the result says how)."""
    spec = TargetSpec(
        body.name,
        body.kind,
        host=body.host,
        port=body.port,
        user=body.user,
        private_key=body.private_key.encode() if body.private_key else None,
        host_key=body.host_key,
        labels=[f"{k}={v}" for k, v in body.labels.items()],
        notes=body.notes,
        timezone=body.timezone,
        via=body.via,
        host_ca=body.host_ca,
        client_cert=body.client_cert.encode() if body.client_cert else None,
    )
    result = svc.add_target(
        app,
        caller.actor,
        spec,
        verify=body.verify,
        trust_on_first_use=body.trust_on_first_use,
        allow_same_host=body.allow_same_host,
    )
    return _pair_out(result)


@router.get("/trust", response_model=list[TrustStateOut])
def list_trust(
    app: AppDep, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> list[TrustStateOut]:
    """Every target and how its host is trusted (``fleetcron target trust list``)."""
    return [
        TrustStateOut(
            name=s.name,
            kind=s.kind,
            address=s.address,
            state=s.state,
            fingerprint=s.fingerprint,
            via=s.via,
            client_cert_expires_at=s.client_cert_expires_at,
            ca_from=s.ca_from,
        )
        for s in trust.trust_states(app, caller.actor)
    ]


def _ca_out(view: trust_rules.TrustRuleView) -> TrustCaOut:
    return TrustCaOut(
        label=view.selector,
        ca_fingerprints=list(view.ca_fingerprints),
        revoked=view.revoked,
        created_by=view.created_by,
        created_at=view.created_at,
        targets=list(view.targets),
    )


@router.get("/trust/cas", response_model=list[TrustCaOut])
def list_trust_cas(
    app: AppDep, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> list[TrustCaOut]:
    """The host CAs attached to label selectors (``fleetcron target trust ca list``)."""
    return [_ca_out(v) for v in trust_rules.trust_rules(app, caller.actor)]


@router.post("/trust/cas", response_model=TrustCaOut, status_code=201)
def add_trust_ca(
    body: TrustCaIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> TrustCaOut:
    """Trust the hosts of the targets matching ``label`` by a host CA (a target's own
    host CA wins, then the oldest matching label, then its pinned key); audited."""
    return _ca_out(trust_rules.add_trust_rule(app, caller.actor, body.label, body.ca))


@router.delete("/trust/cas", response_model=list[str])
def remove_trust_ca(
    label: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> list[str]:
    """Remove the host CA attached to ``label``; answers the targets whose trust changed."""
    return trust_rules.remove_trust_rule(app, caller.actor, label)


@router.post("/trust/import", response_model=TrustImportOut)
def import_trust(
    body: TrustImportIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.pair"))],
) -> TrustImportOut:
    """Pin the host keys of ``text`` for the targets that have none (``fleetcron target
    trust import``): a different key already pinned is a conflict, left as it is (re-pin
    to change it); an import is written whole or not at all, each pin audited."""
    report = trust.import_trust(app, caller.actor, body.text, dry_run=body.dry_run)
    return TrustImportOut(
        dry_run=report.dry_run,
        entries=report.entries,
        markers=report.markers,
        bad_lines=list(report.bad_lines),
        counts={o: report.count(o) for o in trust.OUTCOMES},
        outcomes=[
            TrustOutcomeOut(
                name=o.name, outcome=o.outcome, fingerprint=o.fingerprint, pinned=o.pinned
            )
            for o in report.outcomes
        ],
    )


@router.get("/{name}", response_model=TargetOut)
def show_target(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> TargetOut:
    target, _ = target_reads.show_target(app, caller.actor, name)
    return TargetOut.of(target)


@router.patch("/{name}", response_model=TargetEditOut)
def edit_target(
    name: str,
    body: TargetPatch,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> TargetEditOut:
    """Change a target. A paired SSH target's new connection is checked first (nothing is
    saved when the check fails); ``verify: false`` saves it unchecked and unpairs it."""
    result = svc.edit_target(
        app,
        caller.actor,
        name,
        svc.TargetChanges(
            kind=body.kind,
            host=body.host,
            port=body.port,
            user=body.user,
            private_key=body.private_key.encode() if body.private_key else None,
            host_key=body.host_key,
            trust_on_first_use=body.trust_on_first_use,
            labels=None if body.labels is None else [f"{k}={v}" for k, v in body.labels.items()],
            notes=body.notes,
            timezone=body.timezone,
            via=body.via,
            host_ca=body.host_ca,
            client_cert=None if body.client_cert is None else body.client_cert.encode(),
        ),
        verify=body.verify,
        allow_same_host=body.allow_same_host,
    )
    return TargetEditOut(
        target=TargetOut.of(result.target),
        changed=list(result.changed),
        verified=result.verified,
        unpaired=result.unpaired,
    )


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


@router.post("/{name}/repin", response_model=RepinOut)
def repin_target(
    name: str,
    body: RepinIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.repin"))],
) -> RepinOut:
    """Replace the pinned host key. ``dry_run`` shows the old and the new fingerprint;
    ``expected_fingerprint`` pins only the key a human compared."""
    plan = svc.plan_repin(
        app,
        caller.actor,
        name,
        host_key=body.host_key,
        trust_on_first_use=body.trust_on_first_use,
    )
    if body.expected_fingerprint and body.expected_fingerprint != plan.new_fingerprint:
        raise Conflict(
            f"host key: target {name} presents {plan.new_fingerprint}, not the expected "
            f"{body.expected_fingerprint}; nothing was pinned",
            field="expected_fingerprint",
        )
    if not body.dry_run:
        svc.repin_target(app, caller.actor, plan)
    return RepinOut(
        target=name,
        old_fingerprint=plan.old_fingerprint,
        new_fingerprint=plan.new_fingerprint,
        trusted_on_first_use=plan.trusted_on_first_use,
        pinned=not body.dry_run,
    )


@router.post("/{name}/pause", response_model=TargetOut)
def pause_target(
    name: str,
    body: PauseIn,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.pause"))],
) -> TargetOut:
    """Maintenance pause: due slots are recorded as skipped; every job keeps its flag."""
    return TargetOut.of(svc.pause_target(app, caller.actor, name, body.reason).target)


@router.post("/{name}/resume", response_model=TargetOut)
def resume_target(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.pause"))]
) -> TargetOut:
    """End a pause; every job continues from its next slot."""
    return TargetOut.of(svc.resume_target(app, caller.actor, name).target)


@router.post("/{name}/unpair", response_model=TargetOut)
def unpair_target(
    name: str, app: AppDep, caller: Annotated[Caller, Depends(requires("target.unpair"))]
) -> TargetOut:
    svc.unpair_target(app, caller.actor, name)
    target, _ = target_reads.show_target(app, caller.actor, name)
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
    name: str,
    app: AppDep,
    caller: Annotated[Caller, Depends(requires("target.remove"))],
    with_jobs: Annotated[
        bool, Query(description="also remove the target's individual jobs")
    ] = False,
) -> Response:
    svc.remove_target(app, caller.actor, name, with_jobs=with_jobs)
    return Response(status_code=204)
