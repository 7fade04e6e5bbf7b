"""The add and edit target form: its fields as typed, how it is drawn, and every target
error in the page's own words (what to click or type), never as command-line advice: see
:func:`ui_message`."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import HTMLResponse
from starlette.datastructures import FormData

from fleetcron.core import validation as v
from fleetcron.core.permissions import allowed
from fleetcron.core.targets import DEFAULT_SSH_PORT, TargetKind
from fleetcron.errors import Conflict, FleetcronError, HostKeyMismatch, InvalidInput
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services.targets import edit as svc
from fleetcron.services.targets.views import TargetView
from fleetcron.web.deps import Caller, the_app
from fleetcron.web.pages.forms import (
    NO_ERRORS,
    FieldErrors,
    checked,
    field_errors,
    page,
    text,
    whole_number,
)
from fleetcron.web.pages.jobs import zone_names

#: Service field names -> the target form's field names.
FIELD_NAMES = {"key": "private_key", "label": "labels", "with_jobs": "with_jobs"}


def ui_message(exc: FleetcronError, name: str, where: str = "page") -> str:
    """The error as the web page says it: the service's diagnosis, then what to click or
    tick here. ``where`` is ``page`` (the target's page), ``add`` or ``edit`` (the form)."""
    message = exc.message.rstrip(".")
    if isinstance(exc, HostKeyMismatch) or svc.REPIN_ADVICE in exc.message:
        if where == "edit":
            return (
                f"{message}. Paste the server's new host key below, or tick “trust the key the "
                "server offers now”, and save again."
            )
        return (
            f"{message}. Use “Re-pin host key” on the page of {name} to compare the new "
            "fingerprint with the server's own and pin it."
        )
    if isinstance(exc, Conflict) and exc.field == "host":
        return f"{message}. Tick “Same server as another target, on purpose” to save it anyway."
    if isinstance(exc, Conflict) and exc.field == "with_jobs":
        return f"{message}. Tick “Also remove its individual jobs” to remove them with it."
    if isinstance(exc, InvalidInput) and exc.field == "host_key":
        return (
            f"{message}. Paste the server's host key (for example from ssh-keyscan), or tick "
            "“trust the key the server offers now”."
        )
    if isinstance(exc, InvalidInput) and exc.field == "kind" and exc.value == TargetKind.LOCAL:
        return f"{message}."
    if "was added but not paired" in exc.message:
        return f"{message}. Correct the connection with “Edit”, then press “Pair”."
    if "was not changed" in exc.message:
        return (
            f"{message}. Correct the values, or tick “Save without checking” (the target is "
            "then unpaired until you pair it)."
        )
    return exc.message


@dataclass(frozen=True)
class TargetFields:
    """The add and edit target form as typed. The private key is never sent back."""

    name: str = ""
    kind: str = TargetKind.SSH.value
    host: str = ""
    port: str = str(DEFAULT_SSH_PORT)
    user: str = "root"
    host_key: str = ""
    trust_on_first_use: bool = False
    labels: str = ""
    notes: str = ""
    allow_same_host: bool = False
    no_verify: bool = False
    timezone: str = ""
    via: str = ""
    host_ca: str = ""

    @classmethod
    def posted(cls, form: FormData) -> TargetFields:
        return cls(
            name=text(form, "name").strip(),
            kind=text(form, "kind", TargetKind.SSH.value),
            host=text(form, "host").strip(),
            port=text(form, "port"),
            user=text(form, "user").strip(),
            host_key=text(form, "host_key").strip(),
            trust_on_first_use=checked(form, "trust_on_first_use"),
            labels=text(form, "labels"),
            notes=text(form, "notes").replace("\r\n", "\n"),
            allow_same_host=checked(form, "allow_same_host"),
            no_verify=checked(form, "no_verify"),
            timezone=text(form, "timezone").strip(),
            via=text(form, "via").strip(),
            host_ca=text(form, "host_ca").replace("\r\n", "\n").strip(),
        )

    @classmethod
    def of(cls, target: TargetView) -> TargetFields:
        """The edit form of an existing target (the host key field stays empty: keep)."""
        return cls(
            name=target.name,
            kind=target.kind,
            host=target.host or "",
            port=str(target.port or DEFAULT_SSH_PORT),
            user=target.user or "root",
            labels=", ".join(f"{k}={val}" for k, val in sorted(target.labels.items())),
            notes=target.notes,
            timezone=target.timezone or "",
            via=target.via or "",
            # Only the target's own CA: one a label gives it is not this form's to change.
            host_ca=(target.host_ca or "") if target.host_ca_rule_id is None else "",
        )


def typed_port(typed: str) -> int:
    """The port as typed; only an empty field means the SSH default (a typed ``0`` goes to
    the service, which refuses it with the allowed range)."""
    port = whole_number(typed, field="port", default=DEFAULT_SSH_PORT)
    return DEFAULT_SSH_PORT if port is None else port


def _local_offered(request: Request, caller: Caller) -> bool:
    """Whether the form offers the local kind: enabled on this host, and the caller an admin."""
    return the_app(request).settings.allow_local_targets and allowed(
        caller.actor.role, "target.local"
    )


def target_form(
    request: Request,
    caller: Caller,
    fields: TargetFields,
    errors: FieldErrors = NO_ERRORS,
    *,
    target: TargetView | None = None,
) -> HTMLResponse:
    return page(
        request,
        "target_form.html",
        status_code=422 if errors else 200,
        fields=fields,
        errors=errors,
        target=target,
        local_offered=_local_offered(request, caller)
        or (target is not None and target.kind is TargetKind.LOCAL),
        local_enabled=the_app(request).settings.allow_local_targets,
        host_key_fingerprint=fingerprint(target.host_key) if target and target.host_key else None,
        notes_max=v.NOTES_MAX_CHARS,
        name_max=v.NAME_MAX_CHARS,
        default_port=DEFAULT_SSH_PORT,
        zones=zone_names(),
        default_zone=the_app(request).settings.timezone,
    )


def form_errors(exc: FleetcronError, name: str, where: str) -> FieldErrors:
    placed = field_errors(exc, FIELD_NAMES)
    worded = ui_message(exc, name, where)
    if placed.by_field:
        field = next(iter(placed.by_field))
        return FieldErrors({field: worded}, placed.summary)
    return FieldErrors({}, worded)
