"""What the run write path hands the scheduler for each started run, and how it reads it.

:class:`Dispatch` is everything the scheduler needs to run one claimed run (plain data, no
session), read with the run's assignment, job and target in one statement
(:func:`dispatch_query`) and made from a flushed run (:func:`dispatch_from`) with the claim
clock's reading (:func:`take_stamp`). Shared by the claims of :mod:`fleetcron.store.runs`
and the rollout steps of :mod:`fleetcron.store.run_rollouts`, which :class:`RunWriter`
describes what they need of the run store.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Row, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from fleetcron.core.local_clearance import GATE_PREFIX, local_refusal
from fleetcron.core.ownership import Verdict, claim_deadline
from fleetcron.core.planning import SlotPolicy, target_hold
from fleetcron.core.start_window import NO_WAIT, StartWindow, start_window
from fleetcron.core.statuses import Skip, SkipKind
from fleetcron.store.db import Database
from fleetcron.store.run_guard import NewClaim, RunGuard
from fleetcron.store.schema import Assignment, Job, Run, Target

#: The longest chain of jump hosts followed (a loop is refused when saved; this bounds it).
MAX_JUMPS = 8


@dataclass(frozen=True)
class Hop:
    """A jump host on a run's way, with what connecting needs (the key still encrypted)."""

    name: str
    host: str | None
    port: int | None
    user: str | None
    private_key_enc: bytes | None = field(repr=False)
    host_key: str | None
    via_id: int | None
    host_ca: str | None = None
    client_cert_enc: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Dispatch:
    """Everything the scheduler needs to run one claimed run; plain data, no session."""

    run_id: int
    assignment_id: int
    job_id: int
    job_name: str
    target_id: int
    target_name: str
    target_kind: str
    host: str | None
    port: int | None
    user: str | None
    private_key_enc: bytes | None = None
    host_key: str | None = None
    #: The jump host the target is reached through, and the chain of them, the first one
    #: reached directly (filled in by :func:`with_jumps`).
    via_id: int | None = None
    via: tuple[Hop, ...] = ()
    host_ca: str | None = None
    client_cert_enc: bytes | None = None
    command: str = ""
    timeout_s: int = 300
    scheduled_for: datetime | None = None
    trigger: str = "schedule"
    attempt: int = 1
    #: When the command starts after its slot (empty unless a scheduled start).
    window: StartWindow = NO_WAIT
    retries: int = 0
    retry_on: tuple[str, ...] = ()
    retry_backoff_s: int = 30
    started_at: datetime | None = None
    generation: int | None = None
    claim_id: int | None = None
    #: The run's shard (its target's): ``generation`` is this shard's.
    shard: int = 0
    origin: str = "bulk"
    #: The claim deadline, the claim clock's reading it was computed from, and this
    #: machine's ``time.monotonic()`` at that reading: the watchdog budget's inputs.
    deadline_at: datetime | None = None
    claimed_at: datetime | None = None
    claimed_monotonic: float = 0.0

    def __repr__(self) -> str:
        return (
            f"Dispatch(run_id={self.run_id}, job={self.job_name!r}, target={self.target_name!r}, "
            f"scheduled_for={self.scheduled_for}, attempt={self.attempt})"
        )


DISPATCH_COLUMNS = (
    Assignment.id.label("assignment_id"),
    Assignment.next_fire_at,
    Job.id.label("job_id"),
    Job.name.label("job_name"),
    Job.project_id.label("job_project"),
    Job.origin,
    Job.schedule,
    Job.timezone,
    Job.command,
    Job.timeout_s,
    Job.overlap,
    Job.catchup,
    Job.jitter_s,
    Job.spread_s,
    Job.retries,
    Job.retry_on,
    Job.retry_backoff_s,
    Job.batch,
    Job.max_failures,
    Job.canary,
    Job.dst_gap,
    Job.dst_fold,
    Job.version.label("job_version"),
    Job.command_by,
    Job.command_role,
    Job.on_blackout,
    Job.run_only_on,
    Job.never_on,
    Target.id.label("target_id"),
    Target.name.label("target_name"),
    Target.kind.label("target_kind"),
    Target.host,
    Target.port,
    Target.user,
    Target.private_key_enc,
    Target.host_key,
    Target.via_id,
    Target.host_ca,
    Target.client_cert_enc,
    Target.paused.label("target_paused"),
    Target.paused_reason.label("target_paused_reason"),
    Target.timezone.label("target_timezone"),
    Target.labels.label("target_labels"),
    Target.shard,
)


def dispatch_query() -> Any:
    return (
        select(*DISPATCH_COLUMNS)
        .join(Job, Job.id == Assignment.job_id)
        .join(Target, Target.id == Assignment.target_id)
    )


@dataclass(frozen=True)
class Stamp:
    """The claim clock's reading for a transaction's deadlines, and this machine's monotonic
    time taken just before it."""

    at: datetime
    monotonic: float


def take_stamp(guard: RunGuard, session: Session, now: datetime) -> Stamp:
    """The claim clock's reading for this transaction's deadlines, and this machine's
    monotonic time taken just before it (so time elapsed since is never undercounted)."""
    monotonic = time.monotonic()
    return Stamp(guard.claim_clock(session) or now, monotonic)


class RunWriter(Protocol):
    """What a rollout step needs of the run store (:class:`~fleetcron.store.runs.RunStore`)."""

    db: Database
    node: str
    guard: RunGuard
    policy: SlotPolicy
    margin: timedelta
    #: Its worker's shards (None: every shard).
    shards: frozenset[int] | None

    def mine(
        self, shard: ColumnElement[int] | InstrumentedAttribute[int]
    ) -> list[ColumnElement[bool]]:
        """The conditions on ``shard`` that keep the work this scheduler starts."""
        ...


def window_of(row: Row[Any], trigger: str) -> StartWindow:
    """The start window of a started run (:func:`~fleetcron.core.start_window.start_window`):
    a scheduled start's spread offset and jitter, nothing for any other trigger."""
    return start_window(
        row.job_id, row.target_id, spread_s=row.spread_s, jitter_s=row.jitter_s, trigger=trigger
    )


def start_wait(row: Row[Any], trigger: str) -> float:
    """Seconds a started run waits before its executor is called (its window's delay). Its
    claim deadline adds the wait to the timeout, so the wait never eats into the run's own
    time and the claim lives as long as the command may."""
    return window_of(row, trigger).delay_s


def deadline_of(row: Row[Any], trigger: str, claimed_at: datetime, margin: timedelta) -> datetime:
    """A started run's claim deadline: the one rule
    (:func:`~fleetcron.core.ownership.claim_deadline`) on the claim clock's reading, over
    its timeout and its start window's wait."""
    return claim_deadline(claimed_at, row.timeout_s + start_wait(row, trigger), margin)


@dataclass(frozen=True)
class Started:
    """A run just written ``running`` with a Core statement, as its dispatch reads it (the
    same attributes as a :class:`~fleetcron.store.schema.Run` object)."""

    id: int
    scheduled_for: datetime
    trigger: str
    attempt: int
    started_at: datetime | None
    deadline_at: datetime | None
    generation: int | None = None
    claim_id: int | None = None


def claim_runs(
    guard: RunGuard, session: Session, verdict: Verdict, runs: Sequence[Run], at: datetime
) -> None:
    """The guard's claims for started run objects (flushed first, so their ids are known);
    each run gets its claim id and generation."""
    if not runs:
        return
    session.flush()
    wanted = []
    for run in runs:
        if run.deadline_at is None:
            raise ValueError(f"run {run.id} has no claim deadline")
        wanted.append(NewClaim(run.id, run.deadline_at, run.shard))
    claims = guard.claim(session, verdict, wanted, at)
    for run in runs:
        if run.id in claims:
            run.claim_id, run.generation = claims[run.id], verdict.generation_of(run.shard)


def dispatch_from(row: Row[Any], run: Run | Started, stamp: Stamp) -> Dispatch:
    """The dispatch of a written run (its id is known)."""
    return Dispatch(
        run_id=run.id,
        assignment_id=row.assignment_id,
        job_id=row.job_id,
        job_name=row.job_name,
        command=row.command,
        timeout_s=row.timeout_s,
        window=window_of(row, run.trigger),
        retries=row.retries,
        retry_on=tuple(row.retry_on or ()),
        retry_backoff_s=row.retry_backoff_s,
        target_id=row.target_id,
        target_name=row.target_name,
        target_kind=row.target_kind,
        host=row.host,
        port=row.port,
        user=row.user,
        private_key_enc=row.private_key_enc,
        host_key=row.host_key,
        via_id=row.via_id,
        host_ca=row.host_ca,
        client_cert_enc=row.client_cert_enc,
        scheduled_for=run.scheduled_for,
        trigger=run.trigger,
        attempt=run.attempt,
        started_at=run.started_at,
        generation=run.generation,
        shard=row.shard,
        claim_id=run.claim_id,
        origin=row.origin,
        deadline_at=run.deadline_at,
        claimed_at=stamp.at,
        claimed_monotonic=stamp.monotonic,
    )


def target_hold_of(row: Row[Any], policy: SlotPolicy) -> Skip | None:
    """Why the row's run must not start now: its target paused, local targets off, or the
    local gate (an author who may not run a command with the scheduler's privileges:
    ``local_run_as`` may have been unset since the assignment was admitted)."""
    hold = target_hold(
        row.target_kind, row.target_paused, row.target_paused_reason, policy.allow_local_targets
    )
    if hold is not None:
        return hold
    refused = local_refusal(
        target_kind=row.target_kind,
        privileged=policy.local_privileged,
        least_role=policy.local_job_role,
        command_by=row.command_by,
        command_role=row.command_role,
        job_name=row.job_name,
        target_name=row.target_name,
    )
    return None if refused is None else Skip(SkipKind.LOCAL_GATE, GATE_PREFIX + refused)


def with_jumps(session: Session, dispatches: list[Dispatch]) -> list[Dispatch]:
    """``dispatches`` with the jump host chain of each target behind one (a query per
    level of the chains, only when there is one)."""
    hops = load_hops(session, {d.via_id for d in dispatches if d.via_id is not None})
    return [d if d.via_id is None else replace(d, via=chain(d.via_id, hops)) for d in dispatches]


def load_hops(session: Session, first: set[int]) -> dict[int, Hop]:
    """The jump hosts of ids ``first`` and every one they are reached through, by id (a
    query per level of the chains); the run path and the host probe read chains so."""
    hops: dict[int, Hop] = {}
    wanted = set(first)
    for _ in range(MAX_JUMPS):
        wanted -= hops.keys()
        if not wanted:
            break
        rows = session.execute(
            select(
                Target.id,
                Target.name,
                Target.host,
                Target.port,
                Target.user,
                Target.private_key_enc,
                Target.host_key,
                Target.via_id,
                Target.host_ca,
                Target.client_cert_enc,
            ).where(Target.id.in_(wanted))
        )
        for row in rows:
            hops[row.id] = Hop(
                name=row.name,
                host=row.host,
                port=row.port,
                user=row.user,
                private_key_enc=row.private_key_enc,
                host_key=row.host_key,
                via_id=row.via_id,
                host_ca=row.host_ca,
                client_cert_enc=row.client_cert_enc,
            )
        wanted = {hop.via_id for hop in hops.values() if hop.via_id is not None}
    return hops


def chain(first: int, hops: dict[int, Hop]) -> tuple[Hop, ...]:
    """The hops from the one reached directly to ``first`` (the target's own jump host)."""
    path: list[Hop] = []
    at: int | None = first
    while at is not None and at in hops and len(path) < MAX_JUMPS:
        path.append(hops[at])
        at = hops[at].via_id
    return tuple(reversed(path))
