"""The database schema: every table of fleetcron, in one module.

Alembic migrations under ``store/migrations`` are written against these models; a test
checks that the migrated database matches them. Timestamps are stored as UTC and always
come back timezone-aware (SQLite has no time zone type).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.orm.base import NEVER_SET, NO_VALUE
from sqlalchemy.types import TypeDecorator

from fleetcron.core import statuses
from fleetcron.core.reach import DOWN as REACH_DOWN
from fleetcron.core.statuses import RunStatus
from fleetcron.core.targets import KIND_CHECK_SQL, TargetKind

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored as naive UTC and returned aware, on every database."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; pass an aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class RunStatusType(TypeDecorator[RunStatus]):
    """``runs.status``: stored as its string in a VARCHAR(16), returned as a
    :class:`RunStatus`; writing a string that is not a status raises."""

    impl = String(16)
    cache_ok = True

    def process_bind_param(self, value: RunStatus | str | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        try:
            return RunStatus(value).value
        except ValueError:
            allowed = ", ".join(RunStatus)
            raise ValueError(f"runs.status: {value!r} is not one of {allowed}") from None

    def process_result_value(self, value: str | None, dialect: Dialect) -> RunStatus | None:
        return None if value is None else RunStatus(value)


class TargetKindType(TypeDecorator[TargetKind]):
    """``targets.kind``: stored as its string in a VARCHAR(8), returned as a
    :class:`TargetKind`."""

    impl = String(8)
    cache_ok = True

    def process_bind_param(self, value: TargetKind | str | None, dialect: Dialect) -> str | None:
        return None if value is None else TargetKind(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> TargetKind | None:
        return None if value is None else TargetKind(value)


#: Table options of the tables whose ids are referenced after a row is deleted (runs and
#: audit events keep ``job_id``, ``target_id`` and ``assignment_id`` as plain columns; claims,
#: fenced writes and notifications name run ids; the audit log names token and rule ids):
#: on SQLite, ``AUTOINCREMENT``, so that a new row never gets the id of a deleted one
#: (without it SQLite gives the largest id plus one, which is a deleted row's id when the
#: newest row was deleted). PostgreSQL's sequences never reuse an id. Migration 0020.
NEVER_REUSED_IDS: dict[str, Any] = {"sqlite_autoincrement": True}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON}


#: A target the newest host probe found down (``core/reach.py``): health's partial index.
TARGET_DOWN_SQL = "reach IN (" + ", ".join(f"'{state}'" for state in REACH_DOWN) + ")"


#: The id of the ``default`` project (``core.permissions.DEFAULT_PROJECT``): the first row
#: of ``projects``, written by migration 0035.
DEFAULT_PROJECT_ID = 1
#: Where a role in a project comes from (``project_roles.source``).
MANUAL, SSO = "manual", "sso"
ROLE_SOURCES = (MANUAL, SSO)


class Project(Base):
    """What one team owns: jobs, targets, notification rules, silences and blackout windows
    belong to exactly one project (migration 0035)."""

    __tablename__ = "projects"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]


def project_column() -> Mapped[int]:
    """The project a row belongs to; the default project unless the caller names one."""
    return mapped_column(ForeignKey("projects.id"), index=True, default=DEFAULT_PROJECT_ID)


class Target(Base):
    """A server jobs run on: over SSH, or the scheduler's own host (kind ``local``)."""

    __tablename__ = "targets"
    __table_args__ = (
        CheckConstraint(KIND_CHECK_SQL, name="kind"),
        # The hosts health lists, found without a scan of every target.
        Index(
            "ix_targets_down",
            "reach_since",
            sqlite_where=text(TARGET_DOWN_SQL),
            postgresql_where=text(TARGET_DOWN_SQL),
        ),
        UniqueConstraint("project_id", "name", name="uq_targets_project_name"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = project_column()
    name: Mapped[str] = mapped_column(String(64))
    kind: Mapped[TargetKind] = mapped_column(TargetKindType())
    #: ``core.shards.shard_of(id, cluster_settings.shards)``, written once the id is known.
    shard: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    host: Mapped[str | None] = mapped_column(String(255))
    port: Mapped[int | None] = mapped_column(Integer)
    user: Mapped[str | None] = mapped_column(String(64))
    private_key_enc: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    host_key: Mapped[str | None] = mapped_column(Text)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    notes: Mapped[str] = mapped_column(Text, default="")
    #: The target's IANA zone (jobs in the ``target`` zone fire at its local time); empty
    #: when unknown. ``timezone_source``: ``detected`` at pairing, or ``operator``.
    timezone: Mapped[str | None] = mapped_column(String(64))
    timezone_source: Mapped[str | None] = mapped_column(String(16))
    paired: Mapped[bool] = mapped_column(Boolean, default=False)
    paired_at: Mapped[datetime | None]
    unpaired_at: Mapped[datetime | None]
    #: Maintenance pause of the whole target: due slots are recorded as skipped, every
    #: assignment keeps its own enabled flag.
    paused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    paused_reason: Mapped[str | None] = mapped_column(Text)
    paused_at: Mapped[datetime | None]
    paused_by: Mapped[str | None] = mapped_column(String(64))
    #: Ids of the jobs whose assignment was disabled when the target was unpaired, so that
    #: pairing it again restores those per-job pauses.
    unpaired_disabled_jobs: Mapped[list[int] | None] = mapped_column(JSON)
    #: What the newest host probe found (``core/reach.py``; None: never probed, as local
    #: targets never are), when it ran, since when the target is in that state, and the
    #: error (bounded); migration 0031.
    reach: Mapped[str | None] = mapped_column(String(16))
    reach_at: Mapped[datetime | None]
    reach_since: Mapped[datetime | None]
    reach_error: Mapped[str | None] = mapped_column(String(300))
    #: The jump host (a target of kind ``jump``) this target is reached through; empty:
    #: reached directly.
    via_id: Mapped[int | None] = mapped_column(ForeignKey("targets.id"), index=True)
    #: Host trust by CA instead of a pinned key: the CA public key lines, then
    #: ``@revoked`` key lines (``executors/hostkeys.normalize_host_ca``); empty: pinned.
    host_ca: Mapped[str | None] = mapped_column(Text)
    #: The label rule (``host_trust_rules``) ``host_ca`` came from; empty: the target's own
    #: CA (which wins over a label's) or none; migration 0033.
    host_ca_rule_id: Mapped[int | None] = mapped_column(Integer)
    #: A user certificate for the private key, encrypted like it; and when it expires.
    client_cert_enc: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    client_cert_expires_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    assignments: Mapped[list[Assignment]] = relationship(
        back_populates="target", cascade="all, delete-orphan", passive_deletes=True
    )
    #: Loaded with the target, so that views of a detached row can name it.
    via: Mapped[Target | None] = relationship(remote_side=[id], lazy="joined", join_depth=1)

    def __repr__(self) -> str:
        return f"Target(id={self.id!r}, name={self.name!r}, kind={self.kind!r})"


class HostTrustRule(Base):
    """A host CA for the SSH targets and jump hosts whose labels match ``selector``
    (``core/host_trust.py``: a target's own CA wins, then the oldest matching rule, then
    its pinned key); migration 0033."""

    __tablename__ = "host_trust_rules"
    __table_args__ = (UniqueConstraint("selector"), NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    #: The selector as ``core.labels.format_selector`` writes it (``site=paris``).
    selector: Mapped[str] = mapped_column(String(512))
    host_ca: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]


class Job(Base):
    """A command on a schedule; ``bulk`` runs on many targets, ``individual`` on one."""

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("origin IN ('bulk', 'individual')", name="origin"),
        CheckConstraint("overlap IN ('allow', 'forbid')", name="overlap"),
        CheckConstraint("catchup IN ('none', 'latest')", name="catchup"),
        CheckConstraint("dst_gap IN ('cronie', 'run_at_gap_end', 'skip')", name="dst_gap"),
        CheckConstraint("dst_fold IN ('cronie', 'first', 'both', 'last')", name="dst_fold"),
        UniqueConstraint("project_id", "name", name="uq_jobs_project_name"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = project_column()
    name: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(16))
    schedule: Mapped[str] = mapped_column(String(255))
    timezone: Mapped[str] = mapped_column(String(64))
    command: Mapped[str] = mapped_column(Text)
    notes: Mapped[str] = mapped_column(Text, default="")
    selector: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Individual jobs remember their target so re-pairing after an unpair restores them.
    target_id: Mapped[int | None] = mapped_column(ForeignKey("targets.id"), index=True)
    timeout_s: Mapped[int] = mapped_column(Integer)
    overlap: Mapped[str] = mapped_column(String(8), default="allow")
    catchup: Mapped[str] = mapped_column(String(8), default="none")
    jitter_s: Mapped[int] = mapped_column(Integer, default=0)
    #: The window over which a slot's starts are spread, each target at its own offset.
    spread_s: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    retries: Mapped[int] = mapped_column(Integer, default=0)
    retry_on: Mapped[list[str]] = mapped_column(JSON, default=list)
    retry_backoff_s: Mapped[int] = mapped_column(Integer, default=30)
    #: The same command may run on the same target from another job too (declared on purpose).
    allow_duplicate: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: The number of the job's newest row in ``job_versions``; runs copy it when they start.
    version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: Rollout of a slot over the job's targets (``core/rollout.py``): ``batch`` and
    #: ``max_failures`` are a count or a percentage (``"10"``, ``"10%"``), ``canary`` target
    #: names or a selector; empty: not set.
    batch: Mapped[str] = mapped_column(String(8), default="", server_default="")
    batch_pause_s: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    max_failures: Mapped[str] = mapped_column(String(8), default="", server_default="")
    canary: Mapped[str] = mapped_column(Text, default="", server_default="")
    #: A slot inside a blackout window: ``skip`` it, or ``defer`` it to the window's end.
    on_blackout: Mapped[str] = mapped_column(String(8), default="skip", server_default="skip")
    #: Calendars filtering the fire times (``core/calendars.py``); empty: not set.
    run_only_on: Mapped[str] = mapped_column(String(80), default="", server_default="")
    never_on: Mapped[str] = mapped_column(String(80), default="", server_default="")
    #: Time policy (migration 0029): what a time skipped or repeated by DST does
    #: (``cron/dst.py``; ``cronie``: Debian cron's rule), and how many days the job's
    #: successful and failed runs are kept (0: the retention settings).
    dst_gap: Mapped[str] = mapped_column(String(16), default="cronie", server_default="cronie")
    dst_fold: Mapped[str] = mapped_column(String(16), default="cronie", server_default="cronie")
    keep_successes_days: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    keep_failures_days: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    created_by: Mapped[str] = mapped_column(String(64))
    updated_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    #: Who wrote the command and selector (and an individual job's target) the job has
    #: now, and the role they held then (``services/fleet/local_gate.py``). Changing any of
    #: those clears both (:func:`_command_changed`) until the writer is stamped again, so
    #: a change that does not say who made it leaves the job cleared for no local target.
    command_by: Mapped[str | None] = mapped_column(String(64))
    command_role: Mapped[str | None] = mapped_column(String(16))

    assignments: Mapped[list[Assignment]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )
    target: Mapped[Target | None] = relationship(foreign_keys=[target_id])

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, origin={self.origin!r})"


def _command_changed(job: Job, value: Any, oldvalue: Any, initiator: Any) -> None:
    """What runs on the job's assignments changed: its author is no longer known.

    Not a change: a first value of a new job (no author yet either), and the flush copying
    the id of the target already set through ``Job.target`` into ``target_id`` (that set
    cleared the author already; clearing again would undo the author stamped after it)."""
    if oldvalue in (NO_VALUE, NEVER_SET) or value == oldvalue:
        return
    if initiator.key == "target_id":
        current = job.__dict__.get("target")
        if current is not None and current.__dict__.get("id") == value:
            return
    job.command_by = None
    job.command_role = None


for _attribute in (Job.command, Job.selector, Job.origin, Job.target_id, Job.target):
    event.listen(_attribute, "set", _command_changed)


class Assignment(Base):
    """One job on one target, with its own enabled flag and its next fire time."""

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("job_id", "target_id", name="uq_assignments_job_target"),
        # The scheduler reads due work through this index: cost grows with due rows only.
        Index("ix_assignments_due", "enabled", "next_fire_at"),
        # Health finds the failing assignments through this index (few, among all).
        Index("ix_assignments_newest_finished_status", "newest_finished_status"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id", ondelete="CASCADE"), index=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    last_fire_at: Mapped[datetime | None]
    next_fire_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # The newest run and the newest finished run, with their statuses: written only by
    # fleetcron.store.run_newest, in the transaction of every run write (migration 0021).
    newest_run_id: Mapped[int | None] = mapped_column(BigInteger)
    newest_status: Mapped[RunStatus | None] = mapped_column(RunStatusType())
    newest_finished_run_id: Mapped[int | None] = mapped_column(BigInteger)
    newest_finished_status: Mapped[RunStatus | None] = mapped_column(RunStatusType())

    job: Mapped[Job] = relationship(back_populates="assignments")
    target: Mapped[Target] = relationship(back_populates="assignments")


#: Tables a migration creates that are not models: SQLite's FTS5 index of the run output
#: (migration 0019) and the shadow tables FTS5 keeps for it.
UNMODELED_TABLE_PREFIX = "runs_fts"


def is_modeled(name: str | None) -> bool:
    """Whether a table of the database is one of these models (for the schema comparison)."""
    return not (name or "").startswith(UNMODELED_TABLE_PREFIX)


#: The output text a runs search looks in, as one expression: the trigram index of
#: migration 0017 is on exactly this, and :func:`fleetcron.services.runs.search` filters by it.
SEARCH_TEXT_SQL = (
    "(stdout_head || ' ' || stdout_tail || ' ' || stderr_head || ' ' || stderr_tail"
    " || ' ' || coalesce(error, ''))"
)


#: The predicates of the partial indexes on the runs (migrations 0023 and 0024 write the
#: same).
REACHED_SQL = "status IN (" + ", ".join(f"'{s.value}'" for s in statuses.REACHED) + ")"
CONNECT_ERROR_SQL = f"status = '{RunStatus.CONNECT_ERROR.value}'"
SUCCEEDED_SQL = f"status = '{RunStatus.SUCCEEDED.value}'"


def partial_index(name: str, columns: list[str], predicate: str) -> Index:
    """An index of the rows ``predicate`` holds for, on both databases. A query uses it
    only when it repeats the predicate (``store.planner.written_in``)."""
    return Index(name, *columns, sqlite_where=text(predicate), postgresql_where=text(predicate))


class Run(Base):
    """One execution, or one slot that did not execute and why.

    Written only through :mod:`fleetcron.store.runs`. ``assignment_id``, ``job_id`` and
    ``target_id`` are plain columns, not foreign keys, so history outlives the job and the
    target; the names are copied for the same reason.
    """

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("assignment_id", "scheduled_for", "attempt", name="uq_runs_slot"),
        Index("ix_runs_target_started", "target_id", "started_at"),
        # A target's newest run that reached it, and its connection errors since, each a
        # seek however long an outage lasts (health; migration 0023). A query uses them
        # only when it repeats the predicate as written here (``REACHED_SQL``).
        partial_index("ix_runs_target_reached", ["target_id", "started_at"], REACHED_SQL),
        partial_index(
            "ix_runs_target_connect_error", ["target_id", "started_at"], CONNECT_ERROR_SQL
        ),
        # An assignment's newest success, where a failure streak starts: a seek however
        # long the streak (migration 0024; the query repeats ``SUCCEEDED_SQL``).
        partial_index(
            "ix_runs_assignment_succeeded",
            ["assignment_id", "scheduled_for", "attempt"],
            SUCCEEDED_SQL,
        ),
        Index("ix_runs_job_started", "job_id", "started_at"),
        Index("ix_runs_status", "status"),
        Index("ix_runs_scheduled", "scheduled_for"),
        Index("ix_runs_finished", "finished_at"),
        # A job's slots: the newest slot times, and each slot's runs counted by status.
        Index("ix_runs_job_slot", "job_id", "scheduled_for", "status"),
        # The runs list's filters, each in the order a page is read (migration 0017).
        Index("ix_runs_job_name_slot", "job_name", "scheduled_for", "id"),
        Index("ix_runs_target_name_slot", "target_name", "scheduled_for", "id"),
        Index("ix_runs_status_slot", "status", "scheduled_for", "id"),
        # PostgreSQL: trigram search in the output (migration 0017; only where pg_trgm is).
        Index(
            "ix_runs_search_trgm",
            text(SEARCH_TEXT_SQL + " gin_trgm_ops"),
            postgresql_using="gin",
        ).ddl_if(dialect="postgresql"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    assignment_id: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[int] = mapped_column(Integer)
    target_id: Mapped[int] = mapped_column(Integer)
    job_name: Mapped[str] = mapped_column(String(64))
    target_name: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str] = mapped_column(String(16))
    command: Mapped[str] = mapped_column(Text)
    scheduled_for: Mapped[datetime]
    trigger: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[RunStatus] = mapped_column(RunStatusType())
    reason: Mapped[str | None] = mapped_column(Text)
    skip_kind: Mapped[str | None] = mapped_column(String(24))
    """Why a ``skipped`` run was skipped (a ``core.statuses.SkipKind``); None otherwise."""
    not_before: Mapped[datetime | None]
    """A ``queued`` run deferred by a blackout window (trigger ``deferred``) starts no
    earlier; None for every other run."""
    exit_code: Mapped[int | None] = mapped_column(Integer)
    stdout_head: Mapped[str] = mapped_column(Text, default="")
    stdout_tail: Mapped[str] = mapped_column(Text, default="")
    stdout_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    stdout_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    stderr_head: Mapped[str] = mapped_column(Text, default="")
    stderr_tail: Mapped[str] = mapped_column(Text, default="")
    stderr_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    stderr_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    deadline_at: Mapped[datetime | None]
    generation: Mapped[int | None] = mapped_column(BigInteger)
    claim_id: Mapped[int | None] = mapped_column(BigInteger)
    stop_requested_by: Mapped[str | None] = mapped_column(String(64))
    """Who asked to stop this run (any node writes it; the owner acts on it). A
    ``cancelled`` run keeps it: who stopped it."""
    stop_requested_at: Mapped[datetime | None]
    live_output: Mapped[str | None] = mapped_column(Text)
    """While running: the tail of the output so far (stdout and stderr interleaved), as the
    owner last wrote it (every few seconds), for readers in other processes."""
    live_bytes: Mapped[int | None] = mapped_column(BigInteger)
    """Bytes of output written so far when ``live_output`` was taken (its end offset)."""
    live_at: Mapped[datetime | None]
    node: Mapped[str] = mapped_column(String(255))
    actor: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    #: The version of the job's definition this run ran (``job_versions.version``).
    job_version: Mapped[int | None] = mapped_column(Integer)
    #: Its target's shard, copied when the run is recorded: ``generation`` is this shard's.
    shard: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class RunCount(Base):
    """How many runs of each status were scheduled in each minute: the day's counts of
    health without reading the day's runs (750,000 index entries at 5,000 targets × 50
    jobs every minute... per call). Written by the triggers of migrations 0022/0041 on
    ``runs`` (each insert, status change and delete moves one count of the run's shard;
    rows at exactly 0 are removed), so every write of a run, by any path, keeps it, and
    by the compaction that folds old minutes into shard ``-1``; read by
    :mod:`fleetcron.store.run_counts`, which sums a minute's shards (a shard's row may be
    negative after a late change of a compacted minute). Queued runs are not counted
    (either node of a replicated pair may queue one; the owner counts it when it starts
    it)."""

    __tablename__ = "run_counts"

    minute: Mapped[datetime] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    #: The runs' shard (``runs.shard``), so that workers owning disjoint shards never
    #: write the same row; ``-1``: a compacted count of every shard.
    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    n: Mapped[int] = mapped_column(BigInteger)


class JobVersion(Base):
    """One version of a job's definition, written in the transaction that changed it.

    ``job_id`` is a plain column and the name is copied, like in ``runs``, so the history
    of a removed job can still be read; a job is (``job_id``, ``job_created_at``)."""

    __tablename__ = "job_versions"
    __table_args__ = (UniqueConstraint("job_id", "job_created_at", "version"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[int] = mapped_column(Integer)
    #: With ``job_id``, which job this is: SQLite may give a new job a removed job's id.
    job_created_at: Mapped[datetime]
    job_name: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)
    definition: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: The fields that differ from the previous version (all of them for the first).
    changed: Mapped[list[str]] = mapped_column(JSON, default=list)
    source: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime]
    summary: Mapped[str] = mapped_column(Text, default="")


class AuditEvent(Base):
    """An operator or system action. Append-only: the code has no update or delete path."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_at", "at"),
        # A project's newest events first (what a project's admin reads).
        Index("ix_audit_events_project_id_at", "project_id", "at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(String(64), index=True)
    action: Mapped[str] = mapped_column(String(64), index=True)
    success: Mapped[bool] = mapped_column(Boolean)
    job_id: Mapped[int | None] = mapped_column(Integer)
    job_name: Mapped[str | None] = mapped_column(String(64))
    target_id: Mapped[int | None] = mapped_column(Integer)
    target_name: Mapped[str | None] = mapped_column(String(64), index=True)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: The project of the object the event is about; NULL: the whole install (migration
    #: 0037). A plain column, as ``job_id``: the audit log outlives its objects.
    project_id: Mapped[int | None] = mapped_column(Integer)


class User(Base):
    """An account of the web UI, the API and the CLI."""

    __tablename__ = "users"
    __table_args__ = (
        # ``none``: no global role, only roles in projects (``project_roles``).
        CheckConstraint("role IN ('none', 'viewer', 'operator', 'admin')", name="role"),
        UniqueConstraint("identity_provider", "subject", name="uq_users_identity"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    #: Where a single sign-on account comes from (an OIDC issuer's URL, ``ldap:<server>``)
    #: and who it is there (the ``sub`` claim, the entry's DN); both NULL for a local
    #: account. Such an account has no password (:data:`NO_PASSWORD`).
    identity_provider: Mapped[str | None] = mapped_column(String(255), default=None)
    subject: Mapped[str | None] = mapped_column(String(255), default=None)

    tokens: Mapped[list[ApiToken]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )

    def __repr__(self) -> str:
        return f"User(id={self.id!r}, name={self.name!r}, role={self.role!r})"


class ClusterNode(Base):
    """A scheduler node of a cluster: a candidate until an admin approves its signed identity."""

    __tablename__ = "cluster_nodes"
    __table_args__ = (
        CheckConstraint("state IN ('candidate', 'approved', 'retired')", name="state"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    node_id: Mapped[str] = mapped_column(String(32), unique=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    hostname: Mapped[str] = mapped_column(String(255))
    version: Mapped[str] = mapped_column(String(64))
    endpoint: Mapped[str] = mapped_column(String(255))
    aliases: Mapped[list[str]] = mapped_column(JSON, default=list)
    state: Mapped[str] = mapped_column(String(16), default="candidate")
    announced_at: Mapped[datetime]
    approved_at: Mapped[datetime | None]
    approved_by: Mapped[str | None] = mapped_column(String(64))
    retired_at: Mapped[datetime | None]
    # Set when a forced takeover fenced this node; cleared by `cluster verify-rejoin`.
    fenced_at: Mapped[datetime | None]
    # Set by `cluster drain`, cleared by `cluster undrain`: with the members placement the
    # node takes no shard and hands its own to the others.
    drained_at: Mapped[datetime | None]


class ClusterSettings(Base):
    """What is fixed when the installation is created: the number of shards (one row)."""

    __tablename__ = "cluster_settings"
    __table_args__ = (
        CheckConstraint("id = 1", name="one_row"),
        CheckConstraint("shards >= 1", name="shards"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    shards: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]


class ClusterOwnership(Base):
    """Who may run a shard's jobs: the owner node and the generation (the fencing token).

    Exactly one row per shard (0 to ``cluster_settings.shards`` - 1) is expected; any other
    set of rows is invalid state and fails closed.
    """

    __tablename__ = "cluster_ownership"

    id: Mapped[int] = mapped_column(primary_key=True)
    shard: Mapped[int] = mapped_column(Integer, unique=True, default=0, server_default="0")
    owner_node_id: Mapped[str | None] = mapped_column(String(32))
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    transfer_id: Mapped[int | None] = mapped_column(Integer)
    lease_expires_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]


class ClusterMember(Base):
    """A member: one scheduler process of a node (``worker``: its index on the node), that
    may own shards. ``weight`` is its share (the cores it stands for; 0 while it drains);
    it is live while ``lease_expires_at``, renewed by its heartbeat on the database clock,
    is ahead of that clock. Its name in placements and ownership rows is
    ``<node_id>/<worker>`` (:func:`fleetcron.core.members.member_name`)."""

    __tablename__ = "cluster_members"
    __table_args__ = (
        UniqueConstraint("node_id", "worker", name="uq_cluster_members_node_worker"),
        CheckConstraint("worker >= 0", name="worker"),
        CheckConstraint("weight >= 0", name="weight"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    node_id: Mapped[str] = mapped_column(String(32))
    worker: Mapped[int] = mapped_column(Integer)
    weight: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    lease_expires_at: Mapped[datetime]


class ShardPin(Base):
    """An operator's pin of a shard to a node (``cluster shard move S --to NODE``, migration
    0042): with the members placement the shard is placed on that node while it is an
    eligible live member, and as any other shard otherwise."""

    __tablename__ = "shard_pins"
    __table_args__ = (CheckConstraint("shard >= 0", name="shard"),)

    shard: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    node_id: Mapped[str] = mapped_column(String(32))
    pinned_by: Mapped[str] = mapped_column(String(64))
    pinned_at: Mapped[datetime]


class ExecutionClaim(Base):
    """Permission for one run to write, bound to a node, a generation and a deadline
    measured by the database clock. An expired or revoked claim can never commit. Until its
    deadline an unfinished (live or revoked) claim also keeps a newer owner from starting
    the same assignment; ``cleared``: its target was verified clean before the deadline."""

    __tablename__ = "execution_claims"
    __table_args__ = (
        CheckConstraint("state IN ('live', 'done', 'expired', 'revoked', 'cleared')", name="state"),
        Index("ix_execution_claims_live", "state", "deadline_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    run_id: Mapped[int] = mapped_column(BigInteger, index=True)
    node_id: Mapped[str] = mapped_column(String(32))
    #: The run's shard: ``generation`` is this shard's generation.
    shard: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    generation: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime]
    deadline_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(16), default="live")
    released_at: Mapped[datetime | None]


class ClusterTransfer(Base):
    """A change of owner: a handoff (drains first), a forced takeover, or the first owner."""

    __tablename__ = "cluster_transfers"

    id: Mapped[int] = mapped_column(primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    from_node_id: Mapped[str | None] = mapped_column(String(32))
    to_node_id: Mapped[str] = mapped_column(String(32))
    requested_by: Mapped[str] = mapped_column(String(64))
    requested_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(16))
    completed_at: Mapped[datetime | None]
    generation_after: Mapped[int | None] = mapped_column(BigInteger)
    note: Mapped[str] = mapped_column(Text, default="")


class FencedWrite(Base):
    """A run write the ownership guard refused: who tried, under which generation, why."""

    __tablename__ = "fenced_writes"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime]
    node_id: Mapped[str] = mapped_column(String(32))
    run_id: Mapped[int | None] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(Text)


class ClusterSecret(Base):
    """Coordination secrets (encrypted with the master key); the newest signs, the previous
    one is still accepted for a grace window after a rotation."""

    __tablename__ = "cluster_secrets"

    id: Mapped[int] = mapped_column(primary_key=True)
    secret_enc: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime]
    created_by: Mapped[str] = mapped_column(String(64))


class SeenNonce(Base):
    """Nonces of signed requests already accepted, to refuse replays."""

    __tablename__ = "cluster_nonces"

    nonce: Mapped[str] = mapped_column(String(64), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(index=True)


class NotificationChannel(Base):
    """Where notifications go: a webhook (JSON POST) or an email address list (SMTP)."""

    __tablename__ = "notification_channels"
    __table_args__ = (CheckConstraint("kind IN ('webhook', 'email')", name="kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    #: webhook: {"url"}; email: {"host", "port", "starttls", "username", "sender", "to": [...]}
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: webhook HMAC signing key or SMTP password, encrypted with the master key.
    secret_enc: Mapped[bytes | None] = mapped_column(LargeBinary)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime]


class NotificationRule(Base):
    """When to notify a channel: for one job, or for every job (``job_id`` null)."""

    __tablename__ = "notification_rules"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = project_column()
    channel_id: Mapped[int] = mapped_column(
        ForeignKey("notification_channels.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    on_failure: Mapped[bool] = mapped_column(Boolean, default=True)
    on_late: Mapped[bool] = mapped_column(Boolean, default=True)
    on_recovery: Mapped[bool] = mapped_column(Boolean, default=True)
    #: Incident timers (core/incidents.py): Alertmanager's defaults, migration 0027.
    group_wait_s: Mapped[float] = mapped_column(Float, default=30.0, server_default="30")
    group_interval_s: Mapped[float] = mapped_column(Float, default=300.0, server_default="300")
    repeat_interval_s: Mapped[float] = mapped_column(Float, default=14400.0, server_default="14400")
    #: Consecutive failed slots before a target is told, consecutive successes before it
    #: leaves an incident (core/incidents.Thresholds), migration 0032.
    failures_before: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    successes_before: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime]


class AlertState(Base):
    """The last notified state of one assignment, so repeats are sent once per change."""

    __tablename__ = "alert_states"

    assignment_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    changed_at: Mapped[datetime]


class NotificationDelivery(Base):
    """One message to one channel and each attempt's outcome; retried with backoff."""

    __tablename__ = "notification_deliveries"
    __table_args__ = (Index("ix_notification_deliveries_due", "status", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    channel_id: Mapped[int] = mapped_column(
        ForeignKey("notification_channels.id", ondelete="CASCADE"), index=True
    )
    event: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime | None]
    sent_at: Mapped[datetime | None]
    #: The incident the message is about (none for a test message); migration 0027.
    incident_id: Mapped[int | None] = mapped_column(Integer, index=True)


class Incident(Base):
    """One cause (``failing``, ``late``, ``stuck``, ``halted``) on one job, over the targets
    sharing it (:class:`IncidentTarget`), or one host that cannot be reached (``unreachable``,
    ``target_id`` set); ``core/incidents.py``. At most one is open per job and cause, and
    one per host. ``job_id`` is a plain column and the name a copy, so the history
    outlives the job."""

    __tablename__ = "incidents"
    __table_args__ = (
        CheckConstraint("status IN ('open', 'resolved')", name="status"),
        Index(
            "uq_incidents_open",
            "job_id",
            "cause",
            unique=True,
            sqlite_where=text("status = 'open' AND target_id IS NULL"),
            postgresql_where=text("status = 'open' AND target_id IS NULL"),
        ),
        Index(
            "uq_incidents_open_host",
            "target_id",
            unique=True,
            sqlite_where=text("status = 'open' AND target_id IS NOT NULL"),
            postgresql_where=text("status = 'open' AND target_id IS NOT NULL"),
        ),
        Index("ix_incidents_opened_at", "opened_at"),
        # Retention's walk of the resolved ones, oldest first (migration 0032).
        Index("ix_incidents_resolved_at", "resolved_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    #: The project of its job (of its target for a host incident): only that project's
    #: rules and silences are asked about it. A plain column, as ``job_id`` (migration 0038).
    project_id: Mapped[int] = mapped_column(
        Integer, index=True, default=DEFAULT_PROJECT_ID, server_default="1"
    )
    job_id: Mapped[int] = mapped_column(Integer)
    job_name: Mapped[str] = mapped_column(String(64))
    cause: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="open")
    opened_at: Mapped[datetime]
    resolved_at: Mapped[datetime | None]
    #: The alert state of the first target before it joined (from ``alert_states``).
    previous_state: Mapped[str] = mapped_column(String(16), default="ok")
    reason: Mapped[str] = mapped_column(Text, default="")
    first_run_id: Mapped[int | None] = mapped_column(BigInteger)
    acked_at: Mapped[datetime | None]
    acked_by: Mapped[str | None] = mapped_column(String(64))
    ack_note: Mapped[str | None] = mapped_column(Text)
    #: When a ``flapping`` message was sent about this incident's job and cause.
    flapping_at: Mapped[datetime | None]
    #: A host incident (cause ``unreachable``): the target that cannot be reached, its
    #: name a copy; ``job_id`` is then 0 and ``job_name`` empty (migration 0031).
    target_id: Mapped[int | None] = mapped_column(Integer)
    target_name: Mapped[str | None] = mapped_column(String(64))


class IncidentTarget(Base):
    """One target of an incident: when it joined, when it recovered (or left for another
    cause); ``last_seen_at`` is the newest slot that put it there."""

    __tablename__ = "incident_targets"

    incident_id: Mapped[int] = mapped_column(
        ForeignKey("incidents.id", ondelete="CASCADE"), primary_key=True
    )
    assignment_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_id: Mapped[int] = mapped_column(Integer)
    target_name: Mapped[str] = mapped_column(String(64))
    joined_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    recovered_at: Mapped[datetime | None]


class IncidentNotice(Base):
    """What one channel was last told of an incident: when, about which assignments,
    and whether it heard the last of it (``closed``)."""

    __tablename__ = "incident_notices"

    incident_id: Mapped[int] = mapped_column(
        ForeignKey("incidents.id", ondelete="CASCADE"), primary_key=True
    )
    channel_id: Mapped[int] = mapped_column(
        ForeignKey("notification_channels.id", ondelete="CASCADE"), primary_key=True
    )
    last_sent_at: Mapped[datetime | None]
    notified: Mapped[list[int]] = mapped_column(JSON, default=list)
    messages: Mapped[int] = mapped_column(Integer, default=0)
    closed: Mapped[bool] = mapped_column(Boolean, default=False)


class Silence(Base):
    """A mute of incident messages: of everything, or narrowed to one job, one target
    and/or a label selector, from ``starts_at`` until ``ends_at`` (expiring one early
    moves ``ends_at``). Runs are still recorded and health still shows the failures."""

    __tablename__ = "silences"
    __table_args__ = (Index("ix_silences_ends_at", "ends_at"), NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = project_column()
    job_id: Mapped[int | None] = mapped_column(Integer)
    job_name: Mapped[str | None] = mapped_column(String(64))
    target_id: Mapped[int | None] = mapped_column(Integer)
    target_name: Mapped[str | None] = mapped_column(String(64))
    selector: Mapped[str | None] = mapped_column(String(512))
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime]
    created_by: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    expired_by: Mapped[str | None] = mapped_column(String(64))


class Blackout(Base):
    """A blackout window (``core/blackouts.py``): one-off (``start_wall``..``end_wall``,
    wall-clock times as ISO text) or recurring (``cron`` for ``duration_s``, until
    ``until``), in ``zone`` (an IANA name, or ``target``: each target's own), over one job,
    one target and/or a label selector. In force while not lifted and before
    ``expires_at`` (None: a recurring window without an end)."""

    __tablename__ = "blackouts"
    __table_args__ = (
        Index("ix_blackouts_expires_at", "expires_at"),
        CheckConstraint("kind IN ('once', 'cron')", name="kind"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = project_column()
    name: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(Text)
    job_name: Mapped[str | None] = mapped_column(String(64))
    target_name: Mapped[str | None] = mapped_column(String(64))
    selector: Mapped[str | None] = mapped_column(String(512))
    zone: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(8))
    start_wall: Mapped[str | None] = mapped_column(String(19))
    end_wall: Mapped[str | None] = mapped_column(String(19))
    cron: Mapped[str | None] = mapped_column(String(255))
    duration_s: Mapped[int | None] = mapped_column(Integer)
    until: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_by: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime]
    lifted_by: Mapped[str | None] = mapped_column(String(64))
    lifted_at: Mapped[datetime | None]


class CalendarRow(Base):
    """A named set of dates (``core/calendars.py``): its own dates (``calendar_dates``),
    plus the days of ``weekdays`` (``mon,tue,...``) that the ``except_name`` calendar does
    not hold. ``source``: ``hand`` or ``ics`` (imported from an iCalendar file)."""

    __tablename__ = "calendars"
    __table_args__ = (NEVER_REUSED_IDS,)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    weekdays: Mapped[str] = mapped_column(String(32), default="")
    except_name: Mapped[str | None] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(8))
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_by: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime]


class CalendarDate(Base):
    """One date of a calendar."""

    __tablename__ = "calendar_dates"

    calendar_id: Mapped[int] = mapped_column(
        ForeignKey("calendars.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)


class WebSession(Base):
    """A browser login; only the SHA-256 of the cookie value is stored, so logout and
    expiry are enforced by the server."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)
    address: Mapped[str] = mapped_column(String(64), default="")

    user: Mapped[User] = relationship()


class SsoLogin(Base):
    """A single sign-on log-in under way: sent to the identity provider, not yet back.

    Keyed by the SHA-256 of its ``state`` (which the browser also holds in a cookie); the
    row is deleted when the provider's answer is taken, so a state and its nonce are used
    once, and refused after ``expires_at``.
    """

    __tablename__ = "sso_logins"

    id: Mapped[int] = mapped_column(primary_key=True)
    state_hash: Mapped[str] = mapped_column(String(64), unique=True)
    nonce: Mapped[str] = mapped_column(String(64))
    code_verifier: Mapped[str] = mapped_column(String(128))
    next_path: Mapped[str] = mapped_column(String(2000), default="/")
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)


class ApiToken(Base):
    """A bearer token for the API; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    #: refused from this time on; None: until revoked
    expires_at: Mapped[datetime | None]
    #: what the token may do within its owner's role: read, run or write
    scope: Mapped[str] = mapped_column(String(8), default="write", server_default="write")
    #: the one project the token acts in (None: every project of its owner) and the role
    #: it acts with there, never above its owner's (None: its owner's); migration 0035
    project_id: Mapped[int | None] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), default=None
    )
    role: Mapped[str | None] = mapped_column(String(16), default=None)

    user: Mapped[User] = relationship(back_populates="tokens")
    #: loaded with the token, so that its views can name the project
    project: Mapped[Project | None] = relationship(lazy="joined")


class ProjectRole(Base):
    """A user's role in one project, besides its global role (``users.role``)."""

    __tablename__ = "project_roles"
    __table_args__ = (
        CheckConstraint("role IN ('viewer', 'operator', 'admin')", name="role"),
        CheckConstraint(f"source IN ({', '.join(map(repr, ROLE_SOURCES))})", name="source"),
    )

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    role: Mapped[str] = mapped_column(String(16))
    #: Who gave it (migration 0037): ``manual`` (``fleetcron project grant``) or ``sso``
    #: (the directory's groups, set again at each single sign-on log-in).
    source: Mapped[str] = mapped_column(String(8), default=MANUAL)


class TargetShare(Base):
    """A target shared into a project other than its own (by an admin): the project's jobs
    may run on it and its people see it."""

    __tablename__ = "target_shares"

    target_id: Mapped[int] = mapped_column(
        ForeignKey("targets.id", ondelete="CASCADE"), primary_key=True
    )
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    shared_by: Mapped[str] = mapped_column(String(64))
    shared_at: Mapped[datetime]
