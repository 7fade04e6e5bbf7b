"""The ownership guard of a cluster node: the lock and the checks behind every run write.

In each run-writing transaction the guard locks the shards' ownership rows
(one ``SELECT ... FOR UPDATE`` in shard order), reads the node registry, and asks
:func:`fleetcron.core.ownership.evaluate_shards` whether this node is the approved owner of
each shard under that shard's current generation. Every run-writing transaction names the shards
of the runs it writes (``of_shards``: the claims' due slots and queued runs, the runs a
completion, cancel or interruption writes, a retry's run, a rollout round's pending rows)
and locks and decides only those shards' rows, in the same order, counting the others'
rows in the same statement without locking them: a missing row of a shard it writes
fails closed, and a missing or extra row, or another owner, anywhere refuses new claims
as before. Without shards named (or naming every shard) every row is locked.
A claim is bound to its run's shard and that shard's generation, and a completion is
checked against the same shard's row only: a move of shard 1 refuses the runs of shard 1
and no other. New runs get an execution claim whose deadline is measured by the database
clock (``clock_timestamp()``), so a node with a wrong or paused clock cannot extend it; a
completion is written only while its claim is live, for this node and its shard's
generation.
Handoff and takeover take the same lock, so they can never interleave with a run write.
A node that stops inside such a transaction (paused, frozen, its host suspended, its link
cut) would hold the lock for as long as it is stopped, and a takeover would wait for it
without end: every PostgreSQL session of a node is therefore ended by the server once it
has been idle in a transaction for half the lease (``idle_in_transaction_session_timeout``,
set for all sessions by :func:`fleetcron.store.db.session_bounds`). Its write is rolled
back, which is the safe outcome: the stopped node wrote nothing.

A new owner also waits for its predecessors, per shard: :meth:`CoordinatedGuard.old_claims`
lists, for each assignment, the claims of older generations in that assignment's shard whose
deadline has not come (revoked or not: revocation refuses the old owner's writes, it does not
stop its command; the deadline, which the watchdog on the executing machine enforces, does).
A whole shard waits, not only the assignments with an old claim: an old owner paused between
two claim batches may still be executing some of the shard's targets while others have no
claim yet, and in every shard at most one generation executes commands at any moment.
Only a claim ``cleared`` by an operator's ``--targets-verified`` or by active cleanup of its
target stops counting early.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import cast

from sqlalchemy import ColumnElement, Row, Table, case, func, literal, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from fleetcron.coordination.shard_rows import fixed_count, locked_shards, shard_count, shard_rows
from fleetcron.core.ownership import (
    AllShards,
    NodeRecord,
    Scope,
    ShardRow,
    Verdict,
    evaluate_shards,
)
from fleetcron.core.planning import OldClaim
from fleetcron.store.bulk import among, insert_returning
from fleetcron.store.run_guard import NewClaim
from fleetcron.store.schema import Assignment, ClusterNode, ExecutionClaim, Target

#: Claim states whose command may still be running until the claim's deadline.
UNFINISHED_CLAIM_STATES = ("live", "revoked")

CLAIMS = cast(Table, ExecutionClaim.__table__)

UNGUARDED = Verdict("owner", "UNSAFE: the ownership guard is switched off (test-only setting)")


def db_now(session: Session) -> datetime:
    """The database's clock: the one clock every node agrees on."""
    value = session.scalar(select(func.clock_timestamp()))
    if not isinstance(value, datetime):
        raise TypeError("the database returned no clock_timestamp()")
    return value


def current_verdict(
    session: Session,
    node_id: str,
    fingerprint: str,
    *,
    lock: bool,
    shards: int | None = None,
    shared: bool = False,
) -> Verdict:
    """Evaluate ownership for ``node_id`` from the database, shard by shard, optionally
    under the lock of the shards' rows; ``shards``: the fixed count when the caller knows
    it (read otherwise); ``shared``: the nodes share the shards (members placement)."""
    rows = [
        ShardRow(r.shard, r.owner_node_id, r.generation, r.draining, r.lease_expires_at)
        for r in shard_rows(session, lock=lock)
    ]
    count = shards or shard_count(session)
    return _evaluated(session, rows, node_id, fingerprint, shards=count, shared=shared)


def verdict_of_shards(
    session: Session,
    node_id: str,
    fingerprint: str,
    *,
    only: Collection[int],
    shards: int,
    shared: bool = False,
) -> Verdict:
    """Evaluate ownership for ``node_id`` over the shards ``only`` (those of the runs the
    transaction writes), under the lock of their rows only; the other shards' rows are
    counted, not locked (:func:`~fleetcron.coordination.shard_rows.locked_shards`)."""
    rows, every = locked_shards(session, only, node_id, shards)
    return _evaluated(
        session, rows, node_id, fingerprint, shards=shards, only=only, every=every, shared=shared
    )


def _evaluated(
    session: Session,
    rows: Sequence[ShardRow],
    node_id: str,
    fingerprint: str,
    *,
    shards: int,
    only: Collection[int] | None = None,
    every: AllShards | None = None,
    shared: bool = False,
) -> Verdict:
    """:func:`~fleetcron.core.ownership.evaluate_shards` over ``rows``, with the node
    registry and (when a lease is set) the database clock read."""
    nodes = {
        n.node_id: NodeRecord(n.node_id, n.fingerprint, n.state, n.fenced_at is not None)
        for n in session.scalars(select(ClusterNode))
    }
    leased = any(r.lease_expires_at is not None for r in rows)
    return evaluate_shards(
        rows,
        nodes,
        node_id,
        fingerprint,
        shards=shards,
        db_now=db_now(session) if leased else None,
        scope=Scope(only, every, shared),
    )


def of_its_shard(
    verdict: Verdict, column: ColumnElement[int] | InstrumentedAttribute[int]
) -> ColumnElement[int]:
    """The generation of the shard named by ``column``, as the verdict read it (-1 for a
    shard this node does not own: no claim has that generation)."""
    if not verdict.generations:
        return literal(verdict.generation)
    return case(verdict.generations, value=column, else_=-1)


@dataclass
class CoordinatedGuard:
    """The :class:`~fleetcron.store.runs.RunGuard` of a node in a cluster."""

    node_id: str
    fingerprint: str
    unguarded: bool = False
    #: With automatic failover: whether this node renewed its lease in time.
    lease_holds: Callable[[], bool] | None = None
    #: Off only in the fault tests' negative controls (:class:`~fleetcron.coordination.node.
    #: GuardPolicy`): start without waiting for the previous owners' claims.
    wait_for_old_claims: bool = True
    #: Replicated pair: each node writes its own database. Only the owner records slots,
    #: so a broken coordination state ("invalid") records nothing here instead of the
    #: fail-closed skips, which both nodes would record for the same slot (a unique key
    #: inserted on both sides stops replication); the slots stay due for the next owner.
    replicated_pair: bool = False
    #: The generation under which no unfinished older claim was left (a cache).
    _no_old_claims_since: tuple[tuple[int, int], ...] | None = field(default=None, repr=False)
    #: The nodes share the shards (``FLEETCRON_SHARD_PLACEMENT=members``): owning some of
    #: them is owning those (:func:`~fleetcron.core.ownership.evaluate_shards`).
    shared: bool = False
    #: The shard count, once fixed (it never changes).
    _shards: int | None = field(default=None, repr=False)

    def verdict(self, session: Session, *, of_shards: Collection[int] | None = None) -> Verdict:
        if self.unguarded:
            return UNGUARDED
        count = self.shards(session)
        if of_shards and len(set(of_shards)) < count:
            verdict = verdict_of_shards(
                session,
                self.node_id,
                self.fingerprint,
                only=of_shards,
                shards=count,
                shared=self.shared,
            )
        else:
            verdict = current_verdict(
                session, self.node_id, self.fingerprint, lock=True, shards=count, shared=self.shared
            )
        if verdict.kind == "invalid" and self.replicated_pair:
            return replace(
                verdict,
                kind="refused",
                reason=f"{verdict.reason}; in a replicated pair only the owner records slots",
            )
        if verdict.kind == "owner" and self.lease_holds is not None and not self.lease_holds():
            # Running runs may still finish; nothing new starts until the lease is renewed.
            return replace(
                verdict, draining=True, reason="lease not renewed in time: no new claims"
            )
        return verdict

    def shards(self, session: Session) -> int:
        """The installation's shard count, read once (it never changes once fixed)."""
        if self._shards is None:
            self._shards = fixed_count(session)
        return self._shards or 1

    def claim_clock(self, session: Session) -> datetime | None:
        """Claims are measured by the database clock."""
        return db_now(session)

    def claim(
        self, session: Session, verdict: Verdict, claims: Sequence[NewClaim], at: datetime
    ) -> dict[int, int]:
        """One ``live`` claim per run, of this node, the run's shard and that shard's
        generation, inserted in one statement (run ids come back with the claim ids)."""
        if not claims:
            return {}
        rows = insert_returning(
            session.connection(),
            CLAIMS,
            [
                {
                    "run_id": claim.run_id,
                    "node_id": self.node_id,
                    "shard": claim.shard,
                    "generation": verdict.generation_of(claim.shard),
                    "created_at": at,
                    "deadline_at": claim.deadline_at,
                    "state": "live",
                }
                for claim in claims
            ],
            ("run_id", "id"),
        )
        return {run_id: claim_id for run_id, claim_id in rows}

    def old_claims(
        self,
        session: Session,
        verdict: Verdict,
        assignment_ids: Sequence[int],
        *,
        claimed_at: datetime | None = None,
    ) -> dict[int, list[OldClaim]]:
        if self.unguarded or not self.wait_for_old_claims or not assignment_ids:
            return {}
        if self._no_old_claims_since == _generations_key(verdict):
            return {}
        # Measured from the new claims' own time when it is earlier than this reading:
        # an old claim whose deadline falls between the two still blocks.
        now = db_now(session)
        if claimed_at is not None:
            now = min(now, claimed_at)
        rows = _unfinished_older_claims(session, verdict, now)
        if not rows:
            # No older generation can claim anything once the generation has moved on (claims
            # are created under the ownership lock), so none will ever block again.
            self._no_old_claims_since = _generations_key(verdict)
            return {}
        return _by_assignment(rows, _shards_of(session, assignment_ids), now)

    def live(self, session: Session, verdict: Verdict, run_ids: Sequence[int]) -> set[int]:
        if self.unguarded:
            return set(run_ids)
        if verdict.kind != "owner" or not run_ids:
            return set()
        return set(
            session.scalars(
                select(ExecutionClaim.run_id).where(
                    among(session, ExecutionClaim.run_id, run_ids),
                    ExecutionClaim.state == "live",
                    ExecutionClaim.node_id == self.node_id,
                    ExecutionClaim.generation == of_its_shard(verdict, ExecutionClaim.shard),
                    ExecutionClaim.deadline_at > func.clock_timestamp(),
                )
            )
        )

    def release(self, session: Session, run_ids: Sequence[int]) -> None:
        if not run_ids:
            return
        session.execute(
            update(ExecutionClaim)
            .where(among(session, ExecutionClaim.run_id, run_ids), ExecutionClaim.state == "live")
            .values(state="done", released_at=func.clock_timestamp())
        )


def _generations_key(verdict: Verdict) -> tuple[tuple[int, int], ...]:
    """Every shard's generation as the verdict read it (standalone-like: shard 0 only)."""
    return tuple(sorted(verdict.generations.items())) or ((0, verdict.generation),)


_OldClaimRow = Row[int, int, int, str, int, datetime]


def _unfinished_older_claims(
    session: Session, verdict: Verdict, now: datetime
) -> Sequence[_OldClaimRow]:
    """Every claim of a generation before its shard's (as ``verdict`` read it) not yet
    finished whose deadline is after ``now``, with its shard; only in the shards the
    verdict gives this node (another node's claims in its own shards never hold back
    this node's, and reading them would defeat the cache of :meth:`CoordinatedGuard.
    old_claims` for as long as that node runs anything)."""
    query = select(
        ExecutionClaim.shard,
        ExecutionClaim.id,
        ExecutionClaim.run_id,
        ExecutionClaim.node_id,
        ExecutionClaim.generation,
        ExecutionClaim.deadline_at,
    ).where(
        ExecutionClaim.state.in_(UNFINISHED_CLAIM_STATES),
        ExecutionClaim.deadline_at > now,
        ExecutionClaim.generation < older_than(verdict, ExecutionClaim.shard),
    )
    if verdict.generations:
        query = query.where(ExecutionClaim.shard.in_(list(verdict.generations)))
    return session.execute(query).all()


def older_than(
    verdict: Verdict, column: ColumnElement[int] | InstrumentedAttribute[int]
) -> ColumnElement[int]:
    """The generation below which a claim of the shard named by ``column`` is older (a
    shard this node does not own: its highest generation, the cautious side)."""
    if not verdict.generations:
        return literal(verdict.generation)
    return case(verdict.generations, value=column, else_=verdict.generation)


def _shards_of(session: Session, assignment_ids: Sequence[int]) -> dict[int, int]:
    """Each assignment's shard (its target's)."""
    rows = session.execute(
        select(Assignment.id, Target.shard)
        .join(Target, Target.id == Assignment.target_id)
        .where(Assignment.id.in_(list(assignment_ids)))
    )
    return {assignment_id: shard for assignment_id, shard in rows}


def _by_assignment(
    rows: Sequence[_OldClaimRow], shards: Mapping[int, int], now: datetime
) -> dict[int, list[OldClaim]]:
    """For each assignment of ``shards`` (assignment id to its shard), the claims of
    ``rows`` in its shard, each with the seconds left until its deadline."""
    by_shard: dict[int, list[OldClaim]] = {}
    for r in rows:
        by_shard.setdefault(r.shard, []).append(
            OldClaim(
                r.id,
                r.run_id,
                r.node_id,
                r.generation,
                r.deadline_at,
                (r.deadline_at - now).total_seconds(),
            )
        )
    return {aid: by_shard[shard] for aid, shard in shards.items() if shard in by_shard}
