"""The host trust page (``/targets/trust``): how each target's host is trusted (pinned,
CA-trusted with the CA and where it comes from, not yet trusted), the host CAs attached to
labels, and a form to pin many host keys from ``known_hosts`` or ``ssh-keyscan`` text
(``services/targets/trust.py``, as ``fleetcron target trust list|import``). The import
needs the operator's ``target.pair`` and the session's CSRF token; it is audited by the
service, and its report (conflicts first) is shown on the page. Operators with
``target.edit`` attach a host CA to a label selector, or remove one, through the same
service as ``target trust ca add|remove``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from fleetcron.errors import FleetcronError
from fleetcron.services.targets import trust as svc
from fleetcron.services.targets import trust_rules
from fleetcron.web.deps import Caller, requires, the_app
from fleetcron.web.pages.forms import Posted, checked, page, redirect, text

router = APIRouter(include_in_schema=False)

#: The outcomes listed one target per line in an import's report (the others are counted).
LISTED = (svc.CONFLICT, svc.PINNED)
#: The states counted at the top of the page.
SHOWN_STATES = (svc.PINNED, svc.CA_TRUSTED, svc.NOT_TRUSTED)


def _page(
    request: Request,
    caller: Caller,
    *,
    report: svc.ImportReport | None = None,
    pasted: str = "",
    error: FleetcronError | None = None,
    ca_fields: dict[str, str] | None = None,
    ca_error: FleetcronError | None = None,
) -> HTMLResponse:
    app = the_app(request)
    states = svc.trust_states(app, caller.actor)
    return page(
        request,
        "trust.html",
        status_code=422 if error or ca_error else 200,
        states=states,
        counts={s: sum(1 for t in states if t.state == s) for s in SHOWN_STATES},
        rules=trust_rules.trust_rules(app, caller.actor),
        report=report,
        listed=[o for o in report.outcomes if o.outcome in LISTED] if report else [],
        outcomes=svc.OUTCOMES,
        conflict=svc.CONFLICT,
        pasted=pasted,
        error=error.message if error else "",
        ca_fields=ca_fields or {},
        ca_error=ca_error.message if ca_error else "",
        ca_error_field=getattr(ca_error, "field", None) or "",
    )


@router.get("/targets/trust", response_class=HTMLResponse)
def trust_page(
    request: Request, caller: Annotated[Caller, Depends(requires("target.read"))]
) -> HTMLResponse:
    return _page(request, caller)


@router.post("/targets/trust", response_class=HTMLResponse)
def import_keys(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.pair"))],
) -> HTMLResponse:
    """Pin the pasted keys for the targets without one; the page shows the report. A dry
    run changes nothing; the text stays in the form so it can be applied after it."""
    pasted = text(form, "known_hosts")
    dry_run = checked(form, "dry_run")
    try:
        if not pasted.strip():
            raise svc.empty_import()
        report = svc.import_trust(the_app(request), caller.actor, pasted, dry_run=dry_run)
    except FleetcronError as exc:
        return _page(request, caller, pasted=pasted, error=exc)
    return _page(request, caller, report=report, pasted=pasted if dry_run else "")


@router.post("/targets/trust/cas", response_class=HTMLResponse)
def add_label_ca(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> Response:
    """Attach a host CA to a label selector; a refusal shows the form again, naming the
    field, with nothing saved."""
    fields = {"label": text(form, "label"), "ca": text(form, "ca").replace("\r\n", "\n")}
    try:
        view = trust_rules.add_trust_rule(
            the_app(request), caller.actor, fields["label"], fields["ca"]
        )
    except FleetcronError as exc:
        return _page(request, caller, ca_fields=fields, ca_error=exc)
    return redirect(
        "/targets/trust",
        f"Host CA attached to {view.selector}: {len(view.targets)} target(s) now trusted by it.",
    )


@router.post("/targets/trust/cas/remove", response_class=HTMLResponse)
def remove_label_ca(
    request: Request,
    form: Posted,
    caller: Annotated[Caller, Depends(requires("target.edit"))],
) -> Response:
    try:
        changed = trust_rules.remove_trust_rule(the_app(request), caller.actor, text(form, "label"))
    except FleetcronError as exc:
        return redirect("/targets/trust", exc.message, error=True)
    return redirect(
        "/targets/trust",
        f"Host CA of {text(form, 'label')} removed: {len(changed)} target(s) changed trust.",
    )
