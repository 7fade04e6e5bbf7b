"""What the CLI and the web show of a target: plain values read from its row, never the
row itself (and never its private key)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetcron.core.statuses import RunStatus
from fleetcron.core.targets import TargetKind
from fleetcron.services.fleet.assignments import zone_of
from fleetcron.services.targets.reach import ReachView, reach_of_row
from fleetcron.store.schema import Assignment, Run, Target


@dataclass(frozen=True)
class TargetView:
    """One target as shown: its connection (no key), labels, zone, pairing and pause."""

    id: int
    name: str
    kind: TargetKind
    host: str | None
    port: int | None
    user: str | None
    host_key: str | None
    labels: dict[str, str]
    notes: str
    #: The target's IANA zone; None when unknown. ``timezone_source``: detected or operator.
    timezone: str | None
    timezone_source: str | None
    paired: bool
    paired_at: datetime | None
    unpaired_at: datetime | None
    paused: bool
    paused_reason: str | None
    paused_at: datetime | None
    paused_by: str | None
    created_at: datetime
    updated_at: datetime
    #: What the newest host probe found (a fresh connection; local targets: not probed).
    reach: ReachView
    #: The jump host the target is reached through (None: directly).
    via: str | None = None
    #: The host CA lines the host is trusted by instead of a pinned key (None: pinned).
    host_ca: str | None = None
    #: When the target's user certificate expires (None: no certificate, or never).
    client_cert_expires_at: datetime | None = None
    #: The label rule ``host_ca`` came from (None: the target's own, or no CA).
    host_ca_rule_id: int | None = None

    @property
    def path(self) -> str:
        """How the target is reached, as the lists show it."""
        return f"via {self.via}" if self.via else "direct"

    @classmethod
    def of(cls, row: Target) -> TargetView:
        return cls(
            id=row.id,
            name=row.name,
            kind=TargetKind(row.kind),
            host=row.host,
            port=row.port,
            user=row.user,
            host_key=row.host_key,
            labels=dict(row.labels or {}),
            notes=row.notes,
            timezone=row.timezone,
            timezone_source=row.timezone_source,
            paired=row.paired,
            paired_at=row.paired_at,
            unpaired_at=row.unpaired_at,
            paused=row.paused,
            paused_reason=row.paused_reason,
            paused_at=row.paused_at,
            paused_by=row.paused_by,
            created_at=row.created_at,
            updated_at=row.updated_at,
            reach=reach_of_row(row),
            via=row.via.name if row.via_id is not None and row.via is not None else None,
            host_ca=row.host_ca,
            client_cert_expires_at=row.client_cert_expires_at,
            host_ca_rule_id=row.host_ca_rule_id,
        )


@dataclass(frozen=True)
class LastRun:
    """A target's newest run that started, as the targets list shows it."""

    id: int
    job_name: str
    status: RunStatus
    scheduled_for: datetime
    started_at: datetime | None

    @classmethod
    def of(cls, row: Run) -> LastRun:
        return cls(row.id, row.job_name, row.status, row.scheduled_for, row.started_at)


@dataclass(frozen=True)
class AssignedJob:
    """The job of an assignment, as a target's page names it."""

    name: str
    origin: str


@dataclass(frozen=True)
class AssignmentView:
    """One job on the target: whether it is enabled there, the zone its schedule runs in
    there and its next and last fire."""

    job: AssignedJob
    enabled: bool
    zone: str
    next_fire_at: datetime | None
    last_fire_at: datetime | None

    @classmethod
    def of(cls, row: Assignment, target: Target, default_zone: str) -> AssignmentView:
        return cls(
            AssignedJob(row.job.name, row.job.origin),
            row.enabled,
            zone_of(row.job, target, default_zone),
            row.next_fire_at,
            row.last_fire_at,
        )
