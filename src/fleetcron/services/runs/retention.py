"""Retention: prune old runs (by age and outcome, and beyond a count per assignment), when
configured old audit events, and incidents resolved longer ago than
``incident_retention_days`` (with their targets and notices) — in small batches, so no single
delete holds a long lock,
and, when the caller gives a time budget, in rounds that stop at it (the scheduler's
housekeeping gives one, so an hour of a large fleet's runs never holds its database
thread for long: the next tick continues).

This module is the only operation that deletes runs, audit events or incidents; the
deletes themselves are the store's (:mod:`fleetcron.store.run_writes`,
:mod:`fleetcron.store.audit`, ``delete_in_rounds`` for incidents). Runs still queued or
running and open incidents are never pruned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import statuses
from fleetcron.core.statuses import RunStatus
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.audit import prune_events_older_than
from fleetcron.store.db import Pruned, count_selected, delete_in_rounds
from fleetcron.store.run_writes import AgeRule, prune_runs_beyond, prune_runs_by_rule
from fleetcron.store.schema import AuditEvent, Incident, IncidentNotice, IncidentTarget, Job

log = logging.getLogger(__name__)

ACTIVE = statuses.ACTIVE


#: The outcomes retention keeps apart, and the statuses of each ("other": skipped, missed,
#: cancelled, fenced, ..., kept ``retention_days``).
SUCCEEDED: tuple[RunStatus, ...] = (RunStatus.SUCCEEDED,)
FAILED: tuple[RunStatus, ...] = tuple(statuses.FAILED)
OTHER: tuple[RunStatus, ...] = tuple(
    s for s in statuses.TERMINAL if s not in SUCCEEDED and s not in FAILED
)
OUTCOMES = ("succeeded", "failed", "other")


@dataclass(frozen=True)
class PruneResult:
    runs_by_age: int
    runs_by_count: int
    audit_events: int
    dry_run: bool
    #: False when the round stopped at its time budget with rows left to delete: the next
    #: round continues (the scheduler's housekeeping calls it again at its next tick).
    complete: bool = True
    #: ``runs_by_age`` by outcome (``succeeded``, ``failed``, ``other``).
    by_outcome: Mapping[str, int] = field(default_factory=dict)
    #: Resolved incidents pruned (their targets and notices went with them).
    incidents: int = 0

    @property
    def total(self) -> int:
        return self.runs_by_age + self.runs_by_count + self.audit_events + self.incidents


@dataclass(frozen=True)
class Policy:
    """How long runs are kept, as the settings and the jobs' overrides say."""

    success_days: int
    failure_days: int
    other_days: int
    keep_last: int
    max_runs: int
    audit_days: int | None
    #: Jobs keeping their successes or failures their own number of days: days → job ids.
    job_successes: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    job_failures: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def rules(self, now: datetime) -> list[tuple[str, AgeRule]]:
        """The age rules in the order a round applies them, each with its outcome."""
        own_s = tuple(i for ids in self.job_successes.values() for i in ids)
        own_f = tuple(i for ids in self.job_failures.values() for i in ids)
        rules = [
            ("succeeded", AgeRule(SUCCEEDED, _ago(now, self.success_days), except_jobs=own_s)),
            ("failed", AgeRule(FAILED, _ago(now, self.failure_days), except_jobs=own_f)),
            ("other", AgeRule(OTHER, _ago(now, self.other_days))),
        ]
        for days, ids in sorted(self.job_successes.items()):
            rules.append(("succeeded", AgeRule(SUCCEEDED, _ago(now, days), jobs=ids)))
        for days, ids in sorted(self.job_failures.items()):
            rules.append(("failed", AgeRule(FAILED, _ago(now, days), jobs=ids)))
        return rules

    def as_dict(self) -> dict[str, Any]:
        return {
            "success_days": self.success_days,
            "failure_days": self.failure_days,
            "other_days": self.other_days,
            "keep_last": self.keep_last,
            "max_runs": self.max_runs,
            "audit_days": self.audit_days,
            "jobs_keeping_successes": {str(d): len(i) for d, i in self.job_successes.items()},
            "jobs_keeping_failures": {str(d): len(i) for d, i in self.job_failures.items()},
        }


def _ago(now: datetime, days: int) -> datetime:
    return now - timedelta(days=days)


def policy_of(app: App) -> Policy:
    """The retention in force: the settings, and each job's own days where it has them."""
    s = app.settings
    successes: dict[int, list[int]] = {}
    failures: dict[int, list[int]] = {}
    with app.db.read() as session:
        for job_id, keep_s, keep_f in session.execute(
            select(Job.id, Job.keep_successes_days, Job.keep_failures_days).where(
                or_(Job.keep_successes_days > 0, Job.keep_failures_days > 0)
            )
        ):
            if keep_s:
                successes.setdefault(int(keep_s), []).append(int(job_id))
            if keep_f:
                failures.setdefault(int(keep_f), []).append(int(job_id))
    return Policy(
        success_days=s.retention_success_days or s.retention_days,
        failure_days=s.retention_failure_days or s.retention_days,
        other_days=s.retention_days,
        keep_last=s.retention_keep_last,
        max_runs=s.retention_max_runs,
        audit_days=s.audit_retention_days,
        job_successes={d: tuple(ids) for d, ids in successes.items()},
        job_failures={d: tuple(ids) for d, ids in failures.items()},
    )


def _budget(budget_s: float | None, clock: Callable[[], float]) -> Callable[[], bool] | None:
    """``more()`` for the store's rounds: True while ``budget_s`` has not passed."""
    if budget_s is None:
        return None
    deadline = clock() + budget_s

    def within_budget() -> bool:
        return clock() < deadline

    return within_budget


def _prune_by_age(
    app: App, policy: Policy, *, dry_run: bool, more: Callable[[], bool] | None
) -> tuple[dict[str, int], bool]:
    """Every age rule in turn, until one stops at the budget: the runs deleted per outcome
    and whether all rules got to their end."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for outcome, rule in policy.rules(app.now()):
        done = prune_runs_by_rule(
            app.db,
            rule,
            keep_last=policy.keep_last,
            batch=app.settings.prune_batch,
            dry_run=dry_run,
            more=more,
        )
        counts[outcome] += done.count
        if not done.complete:
            return counts, False
    return counts, True


def prune(
    app: App,
    actor: Actor,
    *,
    dry_run: bool = False,
    budget_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> PruneResult:
    """Apply the retention settings once; with ``dry_run`` only count.

    Runs are pruned by age and outcome (successes, failures and the rest each after their
    own days; a job's own days where it has them; never an active run, one whose claim is
    live, nor one of each assignment's newest ``retention_keep_last``), then beyond the
    count per assignment, then (when configured) audit events, then incidents resolved
    before ``incident_retention_days``. Rows are deleted
    ``prune_batch`` per transaction. With ``budget_s``, no chunk starts once ``budget_s``
    seconds (by ``clock``) have passed since the call began: the round stops, ``complete``
    is False, and the next call continues where it left off (the oldest rows first;
    nothing newer than the limits is touched either way)."""
    actor.authorize("settings.manage")
    result = _passes(app, policy_of(app), dry_run=dry_run, more=_budget(budget_s, clock))
    if not dry_run and result.total:
        _record(app, actor, result)
    return result


def _passes(
    app: App, policy: Policy, *, dry_run: bool, more: Callable[[], bool] | None
) -> PruneResult:
    """Runs by age and outcome, then beyond the per-assignment cap, then audit events (when
    configured), then resolved incidents: each pass only once the ones before it are done,
    all under the same budget."""
    batch = app.settings.prune_batch
    by_outcome, complete = _prune_by_age(app, policy, dry_run=dry_run, more=more)
    by_count = Pruned(0, complete=False)
    if complete:
        by_count = prune_runs_beyond(
            app.db, policy.max_runs, batch=batch, dry_run=dry_run, more=more
        )
    audit = Pruned(0)
    complete = complete and by_count.complete
    if complete and policy.audit_days is not None:
        cutoff = app.now() - timedelta(days=policy.audit_days)
        audit = prune_events_older_than(app.db, cutoff, batch=batch, dry_run=dry_run, more=more)
        complete = audit.complete
    incidents = Pruned(0)
    if complete:
        cutoff = app.now() - timedelta(days=app.settings.incident_retention_days)
        incidents = prune_incidents(app, cutoff, batch=batch, dry_run=dry_run, more=more)
        complete = incidents.complete
    return PruneResult(
        sum(by_outcome.values()),
        by_count.count,
        audit.count,
        dry_run,
        complete,
        by_outcome=by_outcome,
        incidents=incidents.count,
    )


def _record(app: App, actor: Actor, result: PruneResult) -> None:
    """The cleaner's work, visible: an audit event ``retention.prune`` with what it deleted
    (read back by :func:`status`) and a log line with the same stable action."""
    detail = {
        "runs_by_age": result.runs_by_age,
        "runs_by_outcome": dict(result.by_outcome),
        "runs_by_count": result.runs_by_count,
        "audit_events": result.audit_events,
        "incidents": result.incidents,
        "complete": result.complete,
    }
    with audited(app, actor, AuditNote("retention.prune", detail=detail)):
        pass
    log.info(
        "retention: pruned %d row(s): %d succeeded, %d failed, %d other by age; %d beyond the "
        "count per assignment; %d audit event(s); %d resolved incident(s)",
        result.total,
        result.by_outcome.get("succeeded", 0),
        result.by_outcome.get("failed", 0),
        result.by_outcome.get("other", 0),
        result.runs_by_count,
        result.audit_events,
        result.incidents,
        extra={"action": "retention.prune"},
    )


@dataclass(frozen=True)
class PruneRecord:
    """One round that deleted something: when, by whom, and what."""

    at: datetime
    actor: str
    detail: Mapping[str, Any]


@dataclass(frozen=True)
class RetentionStatus:
    policy: Policy
    recent: list[PruneRecord]

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.as_dict(),
            "recent": [
                {"at": r.at.isoformat(), "actor": r.actor, **dict(r.detail)} for r in self.recent
            ],
        }


def status(app: App, actor: Actor, *, limit: int = 20) -> RetentionStatus:
    """The retention in force and the newest ``limit`` rounds that deleted something."""
    actor.authorize("settings.manage")
    with app.db.read() as session:
        events = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.action == "retention.prune")
            .order_by(AuditEvent.id.desc())
            .limit(limit)
        ).all()
        recent = [PruneRecord(e.at, e.actor, dict(e.detail or {})) for e in events]
    return RetentionStatus(policy_of(app), recent)


def prune_incidents(
    app: App,
    cutoff: datetime,
    *,
    batch: int,
    dry_run: bool,
    more: Callable[[], bool] | None = None,
) -> Pruned:
    """Delete (``dry_run``: count) the incidents resolved before ``cutoff``, oldest first
    through ``ix_incidents_resolved_at``, ``batch`` per transaction, each with its
    targets and notices in the same transaction; with ``more``, stop when it answers False
    before a chunk. Open incidents are never touched; the delivery log keeps its rows
    (their ``incident_id`` then names an incident no longer kept)."""
    ids = (
        select(Incident.id)
        .where(Incident.status == "resolved", Incident.resolved_at < cutoff)
        .order_by(Incident.resolved_at)
    )
    if dry_run:
        return Pruned(count_selected(app.db, ids))

    def delete_chunk(session: Session, chunk: list[int]) -> None:
        session.execute(delete(IncidentTarget).where(IncidentTarget.incident_id.in_(chunk)))
        session.execute(delete(IncidentNotice).where(IncidentNotice.incident_id.in_(chunk)))
        session.execute(delete(Incident).where(Incident.id.in_(chunk)))

    return delete_in_rounds(app.db, Incident, ids, batch, more, delete_chunk=delete_chunk)
