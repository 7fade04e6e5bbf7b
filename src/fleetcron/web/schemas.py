"""Request and response bodies of the REST API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetcron.core import validation as v
from fleetcron.executors.hostkeys import fingerprint
from fleetcron.services.jobs import JobView
from fleetcron.services.targets import PAUSE_REASON_MAX
from fleetcron.services.users import MAX_TOKEN_DAYS
from fleetcron.store.schema import AuditEvent, Run, Target

Name = Field(min_length=1, max_length=v.NAME_MAX_CHARS)
#: The free-text limits of core.validation, which the services check too (and the forms show).
Notes = Field(default="", max_length=v.NOTES_MAX_CHARS)
#: No schema maximum for a command: its limit is the ``command_max_length`` setting, which
#: the jobs service checks and names in its refusal (the body limit bounds the request).
COMMAND_RULE = (
    "at most command_max_length characters (a server setting: 512 by default, at most "
    f"{v.COMMAND_MAX_CHARS}); a longer command is refused with the limit, never cut"
)
RetryKind = Literal["connect_error", "failed", "timed_out"]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetIn(Body):
    name: str = Name
    kind: Literal["ssh", "local"] = "ssh"
    host: str | None = Field(default=None, max_length=255)
    port: int = Field(default=22, ge=1, le=65535)
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


class TargetPatch(Body):
    """A target edit: omitted fields keep their value; ``labels`` replaces every label."""

    kind: Literal["ssh", "local"] | None = None
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
    created_at: datetime

    @classmethod
    def of(cls, t: Target) -> TargetOut:
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
            created_at=t.created_at,
        )


class PairOut(BaseModel):
    target: TargetOut
    host_key_fingerprint: str | None
    trusted_on_first_use: bool
    extended_jobs: list[str]
    kept_disabled: list[str] = Field(
        default_factory=list, description="jobs still disabled here, as before the unpair"
    )


class TargetEditOut(BaseModel):
    target: TargetOut
    changed: list[str]
    verified: bool
    unpaired: bool


class JobIn(Body):
    name: str = Name
    schedule: str = Field(min_length=1, max_length=v.SCHEDULE_MAX_CHARS)
    command: str = Field(min_length=1, description=COMMAND_RULE)
    target: str | None = Field(default=None, description="individual job on this target")
    bulk: bool = False
    selector: str | None = Field(default=None, max_length=1000)
    disabled_on: list[str] = Field(default_factory=list, max_length=10_000)
    timezone: str | None = Field(default=None, max_length=64)
    notes: str = Notes
    timeout_s: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    overlap: Literal["allow", "forbid"] = "allow"
    catchup: Literal["none", "latest"] = "none"
    jitter_s: int = Field(default=0, ge=0, le=3600)
    retries: int = Field(default=0, ge=0, le=10)
    retry_on: list[RetryKind] = Field(default_factory=lambda: list[RetryKind](["connect_error"]))
    retry_backoff_s: int = Field(default=30, ge=1, le=3600)
    allow_duplicate: bool = Field(
        default=False, description="the same command may run on the same target from another job"
    )


class JobPatch(Body):
    schedule: str | None = Field(default=None, min_length=1, max_length=v.SCHEDULE_MAX_CHARS)
    command: str | None = Field(default=None, min_length=1, description=COMMAND_RULE)
    timezone: str | None = Field(default=None, max_length=64)
    notes: str | None = Field(default=None, max_length=v.NOTES_MAX_CHARS)
    selector: str | None = Field(default=None, max_length=1000)
    timeout_s: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    overlap: Literal["allow", "forbid"] | None = None
    catchup: Literal["none", "latest"] | None = None
    jitter_s: int | None = Field(default=None, ge=0, le=3600)
    retries: int | None = Field(default=None, ge=0, le=10)
    retry_on: list[RetryKind] | None = None

    retry_backoff_s: int | None = Field(default=None, ge=1, le=3600)
    allow_duplicate: bool | None = None
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


class JobOut(BaseModel):
    id: int
    name: str
    origin: str
    schedule: str
    description: str
    timezone: str
    command: str
    notes: str
    selector: str
    target: str | None
    timeout_s: int
    overlap: str
    catchup: str
    jitter_s: int
    retries: int
    retry_on: list[str]
    retry_backoff_s: int
    allow_duplicate: bool
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

    @classmethod
    def of(cls, r: Run) -> RunOut:
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
    total: int
    limit: int
    offset: int
    items: list[RunOut]


class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    success: bool
    job: str | None
    target: str | None
    detail: dict[str, Any]

    @classmethod
    def of(cls, e: AuditEvent) -> AuditOut:
        return cls(
            id=e.id,
            at=e.at,
            actor=e.actor,
            action=e.action,
            success=e.success,
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
    role: Literal["viewer", "operator", "admin"] = "viewer"


class UserPatch(Body):
    password: str | None = Field(default=None, min_length=1, max_length=v.PASSWORD_MAX_CHARS)
    role: Literal["viewer", "operator", "admin"] | None = None
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


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    expires_at: datetime | None = None


class TokenCreated(BaseModel):
    id: int
    token: str = Field(description="shown only once")


class CronPreview(BaseModel):
    normalized: str
    description: str
    timezone: str
    extensions: list[str]
    next: list[datetime]
