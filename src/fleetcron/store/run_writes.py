"""The run writes made outside the scheduler's claim path, beside :mod:`fleetcron.store.runs`.

Together the two modules are the only code that writes the runs table:

- :func:`queue_manual_runs` inserts the runs of a "run now" request, in the caller's
  (audited) transaction: ``queued`` (the owner's scheduler starts them,
  :meth:`~fleetcron.store.runs.RunStore.claim_queued`), or ``pending`` for a run that
  follows the job's rollout (the owner's rollout step starts them wave by wave,
  ``store/run_rollouts.py``);
- :func:`request_stop` stops a run on an operator's request, from any node: a run that has
  not started is ``cancelled`` at once, a running one is marked for its node to kill;
- :func:`fence_runs` ends the ``running`` runs of an owner that lost its claims (revoked by
  a change of owner, or expired), in the caller's transaction under the ownership lock;
- :func:`prune_runs_by_rule` (by age and outcome, an :class:`AgeRule`) and
  :func:`prune_runs_beyond` delete decided runs for retention, in small batches, each its
  own transaction, stopping at the caller's time budget; runs still ``queued``,
  ``pending`` or ``running`` are never deleted, nor (by age) a run whose claim is live or
  one of its assignment's newest ``keep_last``.

Every status written here and in ``store/runs.py`` is checked against the run vocabulary's
allowed moves (:func:`moved`): a refused move is a bug and raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.orm import Session, aliased

from fleetcron.core import statuses
from fleetcron.core.statuses import STOPPABLE, RunStatus, may_become
from fleetcron.errors import Conflict, NotFound
from fleetcron.store.db import Database, Pruned, count_selected, delete_in_rounds
from fleetcron.store.run_newest import delete_runs, refresh, refresh_for_runs
from fleetcron.store.schema import Assignment, ExecutionClaim, Job, Run

__all__ = [
    "AgeRule",
    "Pruned",
    "fence_runs",
    "moved",
    "prune_runs_beyond",
    "prune_runs_by_rule",
    "queue_manual_runs",
    "request_stop",
    "set_status",
]


def moved(old: RunStatus | None, new: RunStatus | str) -> RunStatus:
    """``new`` as a status, after checking a run in ``old`` (None: a new row) may become it.

    Raises ``ValueError`` naming both statuses when the vocabulary does not allow the move:
    the store never writes a transition that ``core.statuses.TRANSITIONS`` leaves out."""
    if not may_become(old, new):
        allowed = statuses.BIRTH if old is None else statuses.TRANSITIONS.get(RunStatus(old), ())
        raise ValueError(
            f"runs.status: a {'new run' if old is None else f'{old} run'} may not become "
            f"{str(new)!r}; allowed: {', '.join(allowed) or 'nothing (terminal)'}"
        )
    return RunStatus(new)


def set_status(run: Run, new: RunStatus) -> None:
    """Set the status of a run object, checking the move (a new object has no status yet)."""
    run.status = moved(run.status, new)


def running() -> ColumnElement[bool]:
    """The condition of a write that ends a run: it is still ``running``."""
    return Run.status == RunStatus.RUNNING


# -- queued manual runs ---------------------------------------------------------------------


def queue_manual_runs(
    session: Session,
    job: Job,
    assignments: Sequence[Assignment],
    *,
    now: datetime,
    node: str,
    actor: str,
    rolled_out: bool = False,
) -> list[int]:
    """Insert one manual run of ``job`` per assignment, scheduled for ``now``: ``queued``,
    or ``pending`` when ``rolled_out`` (the request is then one slot of a rollout, keyed
    like a scheduled slot by the job and ``now``); returns their ids (flushed, in the
    caller's transaction)."""
    status = moved(None, RunStatus.PENDING if rolled_out else RunStatus.QUEUED)
    runs = [
        Run(
            assignment_id=a.id,
            job_id=job.id,
            target_id=a.target_id,
            job_name=job.name,
            target_name=a.target.name,
            shard=a.target.shard,
            origin=job.origin,
            command=job.command,
            scheduled_for=now,
            trigger="manual",
            attempt=1,
            status=status,
            node=node,
            actor=actor,
            created_at=now,
        )
        for a in assignments
    ]
    session.add_all(runs)
    session.flush()
    # No refresh of the assignments' newest run: a waiting manual run is not counted until
    # the owner starts it (store/run_newest.py), and this may be the other node of a pair.
    return [r.id for r in runs]


# -- stops ------------------------------------------------------------------------------------


def request_stop(session: Session, run_id: int, by: str, now: datetime) -> Run:
    """Ask to stop run ``run_id``, in the caller's (audited) transaction, from any node.

    A run that has not started (``queued``) is ``cancelled`` here and now: the owner's
    :meth:`RunStore.claim_queued` only starts queued runs, and the row is locked (PostgreSQL
    ``FOR UPDATE``; SQLite's writer lock), so it cannot start meanwhile. A ``running`` run
    gets ``stop_requested_by``/``at`` (the first request is kept); the node running it
    kills it on its next tick (or at once, when the request is made in its process) and
    records it ``cancelled``. Raises ``NotFound``, or ``Conflict`` for a run that has
    already ended.
    """
    query = select(Run).where(Run.id == run_id)
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update()
    run = session.scalars(query).first()
    if run is None:
        raise NotFound("run", run_id)
    if run.status not in STOPPABLE:
        raise Conflict(
            f"run {run_id} has already ended ({run.status}); only a queued or running run "
            "can be stopped",
            field="run",
        )
    if run.status is not RunStatus.RUNNING:
        set_status(run, RunStatus.CANCELLED)
        run.finished_at = now
        run.reason = f"stopped by {by} before it started"
        refresh(session, [run.assignment_id])
    if run.stop_requested_at is None:
        run.stop_requested_by, run.stop_requested_at = by, now
    session.flush()
    return run


# -- fencing ----------------------------------------------------------------------------------


def release_deferred(session: Session, now: datetime) -> int:
    """Let every run deferred by a blackout window be looked at again now (a window was
    lifted or shortened): its ``not_before`` moves to ``now``, and the next claim of queued
    runs starts it, or defers it again to the end of any window that still covers it.
    Returns how many runs were released."""
    result = session.execute(
        update(Run)
        .where(
            Run.status == RunStatus.QUEUED,
            Run.trigger == "deferred",
            Run.not_before > now,
        )
        .values(not_before=now)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def fence_runs(session: Session, run_ids: Sequence[int], now: datetime, reason: str) -> int:
    """Record the still-``running`` runs among ``run_ids`` as ``fenced``: their owner lost
    its claim on them, so their completion will not be written. Returns how many changed."""
    if not run_ids:
        return 0
    result = session.execute(
        update(Run)
        .where(Run.id.in_(list(run_ids)), running())
        .values(status=moved(RunStatus.RUNNING, RunStatus.FENCED), finished_at=now, reason=reason)
    )
    refresh_for_runs(session, run_ids)
    return int(getattr(result, "rowcount", 0) or 0)


# -- retention --------------------------------------------------------------------------------


def _crowded_assignments(keep: int) -> Any:
    """The assignments with more than ``keep`` runs of any status: a superset of those
    with decided runs beyond their newest ``keep``. One pass over the covering slot index,
    no sort; the window below is computed for these assignments only."""
    return select(Run.assignment_id).group_by(Run.assignment_id).having(func.count() > keep)


def _excess_runs(keep: int) -> Any:
    ranked = (
        select(
            Run.id,
            func.row_number()
            .over(
                partition_by=Run.assignment_id, order_by=(Run.scheduled_for.desc(), Run.id.desc())
            )
            .label("n"),
        )
        .where(
            Run.status.not_in(statuses.ACTIVE),
            Run.assignment_id.in_(_crowded_assignments(keep)),
        )
        .subquery()
    )
    return select(ranked.c.id).where(ranked.c.n > keep)


def prune_runs_beyond(
    db: Database,
    keep: int,
    *,
    batch: int,
    dry_run: bool,
    more: Callable[[], bool] | None = None,
) -> Pruned:
    """Delete (``dry_run``: count) the decided runs of each assignment beyond its newest
    ``keep``; ``more`` as for :func:`prune_runs_by_rule`. A round with nothing to delete
    reads the slot index once (no window over every run); that read waits for a round
    with budget left."""
    if more is not None and not more():
        return Pruned(0, complete=False)
    with db.read() as session:
        if session.scalar(_crowded_assignments(keep).limit(1)) is None:
            return Pruned(0)
    ids = _excess_runs(keep)
    if dry_run:
        return Pruned(count_selected(db, ids))
    return delete_in_rounds(db, Run, ids, batch, more, delete_chunk=delete_runs)


# -- retention by outcome ---------------------------------------------------------------------


@dataclass(frozen=True)
class AgeRule:
    """Runs of ``statuses`` scheduled before ``cutoff`` are pruned: of the jobs ``jobs``
    only, or (``jobs`` None) of every job but ``except_jobs`` (a job with its own rule)."""

    statuses: tuple[RunStatus, ...]
    cutoff: datetime
    jobs: tuple[int, ...] | None = None
    except_jobs: tuple[int, ...] = ()


def _nth_newest_slot(keep: int) -> Any:
    """The slot time of the ``keep``-th newest run of the run's own assignment (NULL when
    it has fewer): a seek of the slot index per candidate."""
    newer = aliased(Run)
    return (
        select(newer.scheduled_for)
        .where(newer.assignment_id == Run.assignment_id)
        .order_by(newer.scheduled_for.desc())
        .offset(keep - 1)
        .limit(1)
        .scalar_subquery()
    )


def _aged_runs(rule: AgeRule, keep_last: int) -> Any:
    """The ids a rule prunes: never an active run, nor one whose claim is still live, nor
    (``keep_last``) one of its assignment's newest ``keep_last`` slots."""
    live_claim = select(ExecutionClaim.id).where(
        ExecutionClaim.run_id == Run.id, ExecutionClaim.state == "live"
    )
    terminal = tuple(s for s in rule.statuses if s not in statuses.ACTIVE)
    query = select(Run.id).where(
        Run.status.in_(terminal), Run.scheduled_for < rule.cutoff, ~live_claim.exists()
    )
    if rule.jobs is not None:
        query = query.where(Run.job_id.in_(rule.jobs))
    if rule.except_jobs:
        query = query.where(Run.job_id.not_in(rule.except_jobs))
    if keep_last:
        query = query.where(Run.scheduled_for < _nth_newest_slot(keep_last))
    return query


def prune_runs_by_rule(
    db: Database,
    rule: AgeRule,
    *,
    keep_last: int,
    batch: int,
    dry_run: bool,
    more: Callable[[], bool] | None = None,
) -> Pruned:
    """Delete (``dry_run``: count) the runs ``rule`` selects, ``batch`` per transaction;
    with ``more``, stop when it answers False before a chunk after the first (see
    :class:`Pruned`). A rule with nothing to delete is one probe of the status-and-slot
    index."""
    ids = _aged_runs(rule, keep_last)
    if dry_run:
        return Pruned(count_selected(db, ids))
    return delete_in_rounds(db, Run, ids, batch, more, delete_chunk=delete_runs)
