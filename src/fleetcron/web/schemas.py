"""Request and response bodies of the REST API."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, create_model

from fleetcron.core import validation as v
from fleetcron.core.job_options import BY_NAME, OPTIONS, JobOption
from fleetcron.core.targets import DEFAULT_SSH_PORT, TargetKind
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services.accounts.users import MAX_TOKEN_DAYS
from fleetcron.services.audit import AuditView
from fleetcron.services.jobs.edit import JobView
from fleetcron.services.runs.views import RunView
from fleetcron.services.targets.edit import PAUSE_REASON_MAX
from fleetcron.services.targets.views import TargetView

Name = Field(min_length=1, max_length=v.NAME_MAX_CHARS)
#: The free-text limits of core.validation, which the services check too (and the forms show).
Notes = Field(default="", max_length=v.NOTES_MAX_CHARS)
#: No schema maximum for a command: its limit is the ``command_max_length`` setting, which
#: the jobs service checks and names in its refusal (the body limit bounds the request).
COMMAND_RULE = (
    "at most command_max_length characters (a server setting: 512 by default, at most "
    f"{v.COMMAND_MAX_CHARS}); a longer command is refused with the limit, never cut"
)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


TARGET_ZONE_HELP = "IANA time zone of the server (kept over the zone detected at pairing)"


class TargetIn(Body):
    name: str = Name
    kind: TargetKind = TargetKind.SSH
    host: str | None = Field(default=None, max_length=255)
    port: int = Field(default=DEFAULT_SSH_PORT, ge=1, le=65535)
    user: str | None = Field(default=None, max_length=64)
    private_key: str | None = Field(default=None, max_length=20_000, description="never returned")
    host_key: str | None = Field(default=None, max_length=10_000)
    trust_on_first_use: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    notes: str = Notes
    verify: bool = True
    allow_same_host: bool = Field(
        default=False, description="accept a second target on the same user@host:port"
    )
    timezone: str | None = Field(default=None, max_length=64, description=TARGET_ZONE_HELP)
    via: str | None = Field(
        default=None,
        max_length=64,
        description="the jump host (a target of kind jump) to reach this target through",
    )
    host_ca: str | None = Field(
        default=None,
        max_length=100_000,
        description="trust the host by a host certificate from these CA key lines (and "
        "@revoked lines) instead of a pinned key",
    )
    client_cert: str | None = Field(
        default=None, max_length=20_000, description="an OpenSSH user certificate for the key"
    )


class TargetPatch(Body):
    """A target edit: omitted fields keep their value; ``labels`` replaces every label."""

    kind: TargetKind | None = None
    host: str | None = Field(default=None, max_length=255)
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = Field(default=None, max_length=64)
    private_key: str | None = Field(default=None, max_length=20_000, description="never returned")
    host_key: str | None = Field(default=None, max_length=10_000)
    trust_on_first_use: bool = False
    labels: dict[str, str] | None = None
    notes: str | None = Field(default=None, max_length=v.NOTES_MAX_CHARS)
    verify: bool = Field(
        default=True,
        description="false: save a changed connection unchecked; a paired target is unpaired",
    )
    allow_same_host: bool = False
    timezone: str | None = Field(
        default=None, max_length=64, description=f'{TARGET_ZONE_HELP}; "" clears it'
    )
    via: str | None = Field(
        default=None,
        max_length=64,
        description='a new jump host to reach the target through; "" reaches it directly',
    )
    host_ca: str | None = Field(
        default=None,
        max_length=100_000,
        description='new host CA lines (trust by certificate); "" pins a key again',
    )
    client_cert: str | None = Field(
        default=None,
        max_length=20_000,
        description='a new user certificate for the key; "" logs in with the bare key',
    )


class RepinIn(Body):
    host_key: str | None = Field(default=None, max_length=10_000)
    trust_on_first_use: bool = False
    dry_run: bool = Field(default=False, description="only show the old and new fingerprints")
    expected_fingerprint: str | None = Field(
        default=None, max_length=200, description="refuse unless the new key has this fingerprint"
    )


class RepinOut(BaseModel):
    target: str
    old_fingerprint: str | None
    new_fingerprint: str
    trusted_on_first_use: bool
    pinned: bool


class PauseIn(Body):
    reason: str | None = Field(default=None, max_length=PAUSE_REASON_MAX)


#: The largest known_hosts text ``POST /api/v1/targets/trust/import`` takes (characters;
#: the request body limit, ``max_body_bytes``, may be lower).
TRUST_TEXT_MAX = 20_000_000


class TrustImportIn(Body):
    text: str = Field(
        min_length=1,
        max_length=TRUST_TEXT_MAX,
        description="a known_hosts file (hashed or not) or ssh-keyscan output",
    )
    dry_run: bool = Field(default=False, description="show what would be pinned; change nothing")


class TrustOutcomeOut(BaseModel):
    name: str
    outcome: str
    fingerprint: str | None
    pinned: str | None


class TrustImportOut(BaseModel):
    dry_run: bool
    #: Key lines read, ``@cert-authority``/``@revoked`` lines skipped, unreadable lines.
    entries: int
    markers: int
    bad_lines: list[int]
    #: How many targets had each outcome (pinned, already pinned, conflict, ...).
    counts: dict[str, int]
    outcomes: list[TrustOutcomeOut]


class TrustStateOut(BaseModel):
    name: str
    kind: str
    address: str
    #: ``pinned``, ``CA-trusted``, ``not yet trusted``, or ``-`` for a local target.
    state: str
    fingerprint: str | None
    via: str | None
    client_cert_expires_at: datetime | None
    #: Where its host CA comes from: ``target`` or ``label SELECTOR``; null: no CA.
    ca_from: str | None = None


class TrustCaIn(Body):
    label: str = Field(max_length=512, description="a label selector, e.g. site=paris")
    ca: str = Field(
        min_length=1,
        max_length=1_000_000,
        description="the CA public key line(s); @cert-authority and @revoked lines accepted",
    )


class TrustCaOut(BaseModel):
    label: str
    ca_fingerprints: list[str]
    revoked: int
    created_by: str
    created_at: datetime
    #: The targets it applies to now (after an add: those whose trust it changed).
    targets: list[str]


class PairIn(Body):
    host_key: str | None = Field(default=None, max_length=10_000)
    trust_on_first_use: bool = False


class LabelsIn(Body):
    labels: dict[str, str] = Field(description='value "" removes the label')


class TargetOut(BaseModel):
    id: int
    name: str
    kind: str
    host: str | None
    port: int | None
    user: str | None
    host_key: str | None
    host_key_fingerprint: str | None
    labels: dict[str, str]
    notes: str
    paired: bool
    paired_at: datetime | None
    unpaired_at: datetime | None
    paused: bool = False
    paused_reason: str | None = None
    paused_at: datetime | None = None
    paused_by: str | None = None
    timezone: str | None = Field(default=None, description="IANA zone; null: unknown")
    timezone_source: str | None = Field(default=None, description="detected or operator")
    created_at: datetime
    reach: str | None = Field(
        default=None,
        description="What the newest host probe (a fresh SSH connection) found: reachable, "
        "refused, timeout, auth_failed, host_key_changed or error; null: not probed (local "
        "targets never are)",
    )
    reach_at: datetime | None = Field(default=None, description="When it was probed")
    reach_since: datetime | None = Field(default=None, description="In this state since")
    reach_error: str | None = Field(default=None, description="The probe's error (bounded)")
    via: str | None = Field(default=None, description="the jump host; null: reached directly")
    host_ca: str | None = Field(
        default=None, description="the host CA lines trusted instead of a pinned key"
    )
    client_cert_expires_at: datetime | None = Field(
        default=None, description="when the user certificate expires; null: none or never"
    )

    @classmethod
    def of(cls, t: TargetView) -> TargetOut:
        return cls(
            id=t.id,
            name=t.name,
            kind=t.kind,
            host=t.host,
            port=t.port,
            user=t.user,
            host_key=t.host_key,
            host_key_fingerprint=fingerprint(t.host_key) if t.host_key else None,
            labels=dict(t.labels),
            notes=t.notes,
            paired=t.paired,
            paired_at=t.paired_at,
            unpaired_at=t.unpaired_at,
            paused=t.paused,
            paused_reason=t.paused_reason,
            paused_at=t.paused_at,
            paused_by=t.paused_by,
            timezone=t.timezone,
            timezone_source=t.timezone_source,
            via=t.via,
            host_ca=t.host_ca,
            client_cert_expires_at=t.client_cert_expires_at,
            created_at=t.created_at,
            reach=t.reach.state,
            reach_at=t.reach.at,
            reach_since=t.reach.since,
            reach_error=t.reach.error,
        )


class PairOut(BaseModel):
    target: TargetOut
    host_key_fingerprint: str | None
    trusted_on_first_use: bool
    extended_jobs: list[str]
    kept_disabled: list[str] = Field(
        default_factory=list, description="jobs still disabled here, as before the unpair"
    )
    timezone: str | None = Field(default=None, description="the target's zone after pairing")
    timezone_note: str = Field(
        default="", description="how the zone was found, or why none was (not a failure)"
    )


class TargetEditOut(BaseModel):
    target: TargetOut
    changed: list[str]
    verified: bool
    unpaired: bool


def _count_text(value: Any) -> Any:
    """A count given as a JSON integer, as its text (``10`` -> ``"10"``)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _option_field(option: JobOption, *, patch: bool) -> tuple[Any, Any]:
    """The pydantic field of a declared job option: its type, bounds and default (a patch:
    every field optional, omitted means unchanged)."""
    constraints: dict[str, Any] = {"description": option.help}
    kind: Any
    if option.kind == "int":
        kind = StrictInt  # a whole number: no true taken as 1, no "10" or 10.0
        constraints.update(ge=option.low, le=option.high)
    elif option.kind == "choice":
        kind = Literal.__getitem__(option.choices)
    elif option.kind == "choices":
        kind = list[Literal.__getitem__(option.choices)]  # type: ignore[misc]
    elif option.kind == "flag":
        kind = bool
    else:
        kind = Annotated[str, BeforeValidator(_count_text)] if option.count_as_text else str
        if option.name == "command":
            constraints["description"] = COMMAND_RULE
        if option.required:
            constraints["min_length"] = 1
        if option.max_chars is not None:
            constraints["max_length"] = option.max_chars
    if patch or (option.default is None and not option.required):
        return kind | None, Field(default=None, **constraints)
    if option.required:
        return kind, Field(**constraints)
    default = option.stored(option.default)
    if isinstance(default, list):
        return kind, Field(default_factory=lambda: list(default), **constraints)
    return kind, Field(default=default, **constraints)


def _option_fields(*, patch: bool) -> dict[str, Any]:
    return {option.name: _option_field(option, patch=patch) for option in OPTIONS}


# The option fields come from the declaration; mypy sees only the explicit ones (the routes
# read the options through ``model_dump``).
if TYPE_CHECKING:
    _JobInOptions = Body
    _JobPatchOptions = Body
else:
    _JobInOptions = create_model("_JobInOptions", __base__=Body, **_option_fields(patch=False))
    _JobPatchOptions = create_model("_JobPatchOptions", __base__=Body, **_option_fields(patch=True))


class JobIn(_JobInOptions):
    """A new job: where it runs, and every declared option (``core/job_options.py``)."""

    name: str = Name
    target: str | None = Field(default=None, description="individual job on this target")
    bulk: bool = False
    selector: str | None = Field(default=None, max_length=1000)
    disabled_on: list[str] = Field(default_factory=list, max_length=10_000)

    def options(self) -> dict[str, Any]:
        """The declared options, by name."""
        return {name: getattr(self, name) for name in BY_NAME}


class JobPatch(_JobPatchOptions):
    """A job edit: the options given (omitted ones keep their value)."""

    selector: str | None = Field(default=None, max_length=1000)
    enabled_on: dict[str, bool] | None = Field(
        default=None, description="bulk jobs: target name -> enabled"
    )


class TargetRef(Body):
    target: str | None = None


class AssignmentOut(BaseModel):
    target: str
    enabled: bool
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    spread_offset_s: float = Field(
        default=0.0, description="seconds after each slot this target starts (the job's spread)"
    )
    start_delay_s: float = Field(
        default=0.0,
        description="seconds after each scheduled slot this target starts: its place in the "
        "job's start window, spread offset plus jitter",
    )


def _shown_field(option: JobOption) -> tuple[Any, Any]:
    """The response field of a declared job option: as stored (a zone and a timeout that a
    setting defaults are set by then)."""
    kind: Any = {"int": int, "flag": bool, "choices": list[str]}.get(option.kind, str)
    return kind, Field(description=option.help)


if TYPE_CHECKING:
    _JobOutOptions = BaseModel
else:
    _JobOutOptions = create_model("_JobOutOptions", **{o.name: _shown_field(o) for o in OPTIONS})


class JobOut(_JobOutOptions):
    """A job with every declared option (``core/job_options.py``)."""

    id: int
    name: str
    origin: str
    description: str
    selector: str
    target: str | None
    enabled: int
    total: int
    created_by: str
    updated_by: str
    created_at: datetime
    updated_at: datetime
    assignments: list[AssignmentOut]

    @classmethod
    def of(cls, v: JobView, description: str) -> JobOut:
        data: dict[str, Any] = v.as_dict()
        data["assignments"] = [AssignmentOut(**a) for a in data["assignments"]]
        return cls(description=description, **data)


class RunRequestOut(BaseModel):
    run_ids: list[int]
    message: str


class Excerpt(BaseModel):
    head: str
    tail: str
    bytes: int
    truncated: bool


class RunOut(BaseModel):
    id: int
    job: str
    target: str
    origin: str
    command: str
    scheduled_for: datetime
    trigger: str
    attempt: int
    status: str
    reason: str | None
    exit_code: int | None
    error: str | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    node: str
    actor: str
    stdout: Excerpt
    stderr: Excerpt
    #: The version of the job's definition the run ran (GET /jobs/NAME/versions/V).
    job_version: int | None = None

    @classmethod
    def of(cls, r: RunView) -> RunOut:
        return cls(
            id=r.id,
            job=r.job_name,
            target=r.target_name,
            origin=r.origin,
            command=r.command,
            scheduled_for=r.scheduled_for,
            trigger=r.trigger,
            attempt=r.attempt,
            status=r.status,
            reason=r.reason,
            exit_code=r.exit_code,
            error=r.error,
            started_at=r.started_at,
            finished_at=r.finished_at,
            duration_ms=r.duration_ms,
            node=r.node,
            actor=r.actor,
            job_version=r.job_version,
            stdout=Excerpt(
                head=r.stdout_head,
                tail=r.stdout_tail,
                bytes=r.stdout_bytes,
                truncated=r.stdout_truncated,
            ),
            stderr=Excerpt(
                head=r.stderr_head,
                tail=r.stderr_tail,
                bytes=r.stderr_bytes,
                truncated=r.stderr_truncated,
            ),
        )


class RunPage(BaseModel):
    total: int = Field(description="runs matching, counted up to 10,000")
    total_capped: bool = Field(default=False, description="more than 10,000 runs match")
    limit: int
    offset: int
    next_cursor: str | None = Field(
        default=None, description="pass as cursor for the next (older) page; null on the last"
    )
    items: list[RunOut]


class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    success: bool
    #: the project the event is about; null: the whole install
    project: str | None
    job: str | None
    target: str | None
    detail: dict[str, Any]

    @classmethod
    def of(cls, e: AuditView) -> AuditOut:
        return cls(
            id=e.id,
            at=e.at,
            actor=e.actor,
            action=e.action,
            success=e.success,
            project=e.project,
            job=e.job_name,
            target=e.target_name,
            detail=dict(e.detail),
        )


class AuditPage(BaseModel):
    total: int
    limit: int
    offset: int
    items: list[AuditOut]


class UserIn(Body):
    name: str = Name
    password: str = Field(min_length=1, max_length=v.PASSWORD_MAX_CHARS)
    #: the global role; ``none``: roles in projects only (``/projects/{name}/members``)
    role: Literal["none", "viewer", "operator", "admin"] = "viewer"


class UserPatch(Body):
    password: str | None = Field(default=None, min_length=1, max_length=v.PASSWORD_MAX_CHARS)
    role: Literal["none", "viewer", "operator", "admin"] | None = None
    revoke_tokens: bool = Field(
        default=False, description="with a new password: also revoke the user's API tokens"
    )


class PasswordChange(Body):
    """A user's change of their own password; their other sessions end."""

    current_password: str = Field(min_length=1, max_length=v.PASSWORD_MAX_CHARS)
    new_password: str = Field(min_length=1, max_length=v.PASSWORD_MAX_CHARS)
    revoke_tokens: bool = Field(default=False, description="also revoke your API tokens")


class PasswordChanged(BaseModel):
    sessions_ended: int
    tokens_revoked: int


class UserOut(BaseModel):
    name: str
    role: str
    created_at: datetime


class TokenIn(Body):
    name: str = Name
    user: str | None = Field(default=None, description="admins may create tokens for others")
    expires_in_days: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKEN_DAYS,
        description="refused after this many days; none: never",
    )
    scope: Literal["read", "run", "write"] = Field(
        default="write",
        description="read: read only; run: read, run and stop jobs; write: all the owner's "
        "role allows",
    )
    project: str | None = Field(
        default=None, description="the one project the token acts in; none: every project"
    )
    role: Literal["viewer", "operator", "admin"] | None = Field(
        default=None, description="a role below the owner's (in that project); none: the owner's"
    )


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    expires_at: datetime | None = None
    scope: str = "write"
    project: str | None = None
    role: str | None = None


class TokenCreated(BaseModel):
    id: int
    token: str = Field(description="shown only once")


class ZoneFires(BaseModel):
    """A job in the ``target`` zone, in one zone in use: its targets and next fires."""

    timezone: str
    targets: int = Field(description="paired targets in this zone (no zone: the default)")
    next: list[datetime]


class CronPreview(BaseModel):
    normalized: str
    description: str
    timezone: str
    extensions: list[str]
    next: list[datetime]
    zones: list[ZoneFires] = Field(
        default_factory=list, description="tz=target: the spread over the zones in use"
    )
    dst: list[str] = Field(
        default_factory=list,
        description="what the schedule does, under dst_gap and dst_fold, at the zone's DST "
        "transitions in the next year",
    )


class ProjectIn(Body):
    name: str = Name
    description: str = Field(default="", max_length=500)


class ProjectOut(BaseModel):
    name: str
    description: str
    created_by: str
    created_at: datetime
    jobs: int
    targets: int
    your_role: str = Field(description="the role you act with there: global or the project's")


class MemberIn(Body):
    role: Literal["viewer", "operator", "admin"]


class MemberOut(BaseModel):
    user: str
    role: str
    #: ``manual`` (granted by hand) or ``sso`` (from the directory's groups)
    source: str


class ShareIn(Body):
    into: str = Field(min_length=1, max_length=v.NAME_MAX_CHARS, description="the project")


class SharesOut(BaseModel):
    target: str
    projects: list[str] = Field(description="the projects the target is shared into")
    extended: list[str] = Field(default_factory=list, description="jobs extended to it now")
