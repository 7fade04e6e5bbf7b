"""Ownership rules: may this node run jobs now? A pure function over plain data.

A node runs jobs only when it can prove it is the authorized owner: the one ownership row
names it, at a positive generation, it is approved, not retired, not fenced by a takeover,
its fingerprint matches its approved record, and no handoff is draining it. Anything
uncertain fails closed with a reason that the skipped slots carry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

VerdictKind = Literal["owner", "standby", "invalid", "refused"]


@dataclass(frozen=True)
class NodeRecord:
    node_id: str
    fingerprint: str
    state: str
    fenced: bool


@dataclass(frozen=True)
class Verdict:
    """``owner``: run jobs under ``generation``. ``standby``: another node owns them.
    ``invalid``: nobody may run them (the coordination state is broken; record skips).
    ``refused``: this node may not act at all (not approved, retired, fenced, clone)."""

    kind: VerdictKind
    reason: str
    generation: int = 0
    owner: str | None = None
    draining: bool = False
    #: Shard -> its generation, for each shard this node owns (empty standalone, where
    #: everything is shard 0 at ``generation``). A claim is bound to its shard's generation.
    generations: Mapping[int, int] = field(default_factory=dict)

    @property
    def may_claim(self) -> bool:
        return self.kind == "owner" and not self.draining

    def generation_of(self, shard: int) -> int:
        """The generation a claim of ``shard`` is made and checked under."""
        return self.generations.get(shard, self.generation)


@dataclass(frozen=True)
class ShardRow:
    """One shard's ownership row as the guard read it."""

    shard: int
    owner_node_id: str | None
    generation: object
    draining: bool = False
    lease_expires_at: datetime | None = None


@dataclass(frozen=True)
class AllShards:
    """Every shard's row counted, without a lock, by a guard that locked only the shards
    of the runs it writes: all rows, the rows numbered 0 to shards - 1, and the rows
    naming this node as owner."""

    rows: int
    numbered: int
    mine: int


@dataclass(frozen=True)
class Scope:
    """What a verdict covers. ``only``: the shards whose rows the guard locked and read
    (those of the runs it writes; None: every shard); ``every``: every row counted,
    without a lock, standing in for the others; ``shared``: the nodes share the shards
    (``FLEETCRON_SHARD_PLACEMENT=members``)."""

    only: Collection[int] | None = None
    every: AllShards | None = None
    shared: bool = False


WHOLE = Scope()


def evaluate_shards(
    rows: Sequence[ShardRow],
    nodes: Mapping[str, NodeRecord],
    me: str,
    my_fingerprint: str,
    *,
    shards: int,
    db_now: datetime | None = None,
    scope: Scope = WHOLE,
) -> Verdict:
    """The verdict for node ``me`` over the ownership rows of ``shards`` shards: one row per
    shard, each shard decided by :func:`evaluate` on its own row and lease.

    With ``scope.shared`` the nodes share the shards, so a node owning only some of them
    is their owner: it claims for the shards it owns when every shard the transaction
    locked (``scope.only``) is its own and none drains, and finishes the runs of its own
    shards otherwise (``draining``; a claim never names another node's shard, whose
    generation it does not hold).

    The node owns (``owner``) when it owns every shard, under each shard's generation
    (``generations``; ``generation`` is the highest). A node that owns only some shards
    may finish the runs of those but claims nothing new (``draining``): placing shards on
    several members is not done yet. A missing or extra row, or any shard in an invalid
    state, fails closed for all.

    ``scope.only``: the shards whose rows the guard locked and read (those of the runs
    it writes; None: every shard); ``generations`` then holds those shards only, and
    ``scope.every``, the count of all rows, stands in for the others: a missing or extra
    row, or (unless shared) a shard owned by another node, refuses as above."""
    only, every = scope.only, scope.every
    refused = _refusal(nodes.get(me), me, my_fingerprint)
    if refused is not None:
        return refused
    expected = sorted(set(only)) if only is not None else list(range(shards))
    missing = _missing_rows(rows, expected, shards, every)
    if missing is not None:
        return missing
    each = {r.shard: _evaluate_row(r, nodes, me, my_fingerprint, db_now) for r in rows}
    invalid = [(s, v) for s, v in each.items() if v.kind == "invalid"]
    if invalid:
        shard, verdict = invalid[0]
        return (
            verdict if shards == 1 else replace(verdict, reason=f"shard {shard}: {verdict.reason}")
        )
    owned = {s: v for s, v in each.items() if v.kind == "owner"}
    if not owned:
        return each[expected[0]]
    if scope.shared:
        return _owner_of(owned, len(owned), len(expected))
    mine = len(owned) if len(owned) < len(expected) or every is None else every.mine
    return _owner_of(owned, min(mine, shards), shards)


def _missing_rows(
    rows: Sequence[ShardRow], expected: Sequence[int], shards: int, every: AllShards | None
) -> Verdict | None:
    """Why the rows read are not one per expected shard (or, counted, one per shard of
    the installation); None when they are."""
    numbers = sorted(r.shard for r in rows)
    whole = every is None or every.rows == every.numbered == shards
    if numbers == list(expected) and whole:
        return None
    count = len(rows) if every is None else every.rows
    return Verdict(
        "invalid",
        f"coordination state has {count} ownership rows (shards {numbers}), "
        f"expected one for each of the {shards} shard(s)",
    )


def _evaluate_row(
    row: ShardRow,
    nodes: Mapping[str, NodeRecord],
    me: str,
    my_fingerprint: str,
    db_now: datetime | None,
) -> Verdict:
    fields = {
        "owner_node_id": row.owner_node_id,
        "generation": row.generation,
        "draining": row.draining,
    }
    return evaluate(
        [fields],
        nodes,
        me,
        my_fingerprint,
        lease_expires_at=row.lease_expires_at,
        db_now=db_now,
    )


def _owner_of(owned: Mapping[int, Verdict], mine: int, shards: int) -> Verdict:
    """The verdict of a node owning the shards ``owned`` (read), ``mine`` of ``shards``."""
    generations = {s: v.generation for s, v in sorted(owned.items())}
    first = next(iter(owned.values()))
    draining = any(v.draining for v in owned.values())
    reason = next((v.reason for v in owned.values() if v.draining), first.reason)
    if mine < shards:
        draining = True
        reason = (
            f"this node owns {mine} of the {shards} shards read: it finishes their runs "
            "and claims nothing new"
        )
    return Verdict("owner", reason, max(generations.values()), first.owner, draining, generations)


def evaluate(
    ownership_rows: Sequence[Mapping[str, Any]],
    nodes: Mapping[str, NodeRecord],
    me: str,
    my_fingerprint: str,
    *,
    lease_expires_at: datetime | None = None,
    db_now: datetime | None = None,
) -> Verdict:
    """The verdict for node ``me`` given the raw ownership rows and the node registry."""
    refused = _refusal(nodes.get(me), me, my_fingerprint)
    if refused is not None:
        return refused
    invalid = _invalid_state(ownership_rows, nodes)
    if invalid is not None:
        return invalid
    row = ownership_rows[0]
    owner, generation = row.get("owner_node_id"), int(row["generation"])
    draining = bool(row.get("draining"))
    if owner != me:
        return Verdict(
            "standby",
            f"{owner} owns the jobs (generation {generation})",
            generation,
            str(owner),
            draining,
        )
    if lease_expires_at is not None and db_now is not None and lease_expires_at <= db_now:
        # A standby takes over after the lease; the slots in between are recorded as missed.
        return Verdict(
            "refused",
            f"this node's ownership lease expired at {lease_expires_at.isoformat()}",
            generation,
            me,
        )

    reason = "draining for a handoff: no new claims" if draining else "this node owns the jobs"
    return Verdict("owner", reason, generation, me, draining)


def _refusal(mine: NodeRecord | None, me: str, my_fingerprint: str) -> Verdict | None:
    """Why node ``me`` may not act at all, from its own record; ``None`` when it may."""
    if mine is None:
        return Verdict(
            "refused", f"node {me} is not registered; it must announce itself and be approved"
        )
    if mine.state == "retired":
        return Verdict("refused", f"node {me} is retired and may never run jobs again")
    if mine.state != "approved":
        return Verdict("refused", f"node {me} is a candidate; an admin must approve it first")
    if mine.fingerprint != my_fingerprint:
        return Verdict(
            "refused",
            f"node {me} does not match its approved fingerprint (a cloned disk or another "
            "database?); it may not claim or commit work",
        )
    if mine.fenced:
        return Verdict(
            "refused",
            f"node {me} was fenced by a forced takeover; run `fleetcron cluster verify-rejoin`",
        )
    return None


def _invalid_state(
    ownership_rows: Sequence[Mapping[str, Any]], nodes: Mapping[str, NodeRecord]
) -> Verdict | None:
    """Why the coordination state names no valid owner (one row, a positive whole
    generation, an approved owner); ``None`` when it does."""
    if len(ownership_rows) != 1:
        return Verdict(
            "invalid", f"coordination state has {len(ownership_rows)} ownership rows, expected 1"
        )
    row = ownership_rows[0]
    owner, generation = row.get("owner_node_id"), row.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        return Verdict("invalid", f"the ownership generation {generation!r} is not a whole number")
    if not owner:
        return Verdict(
            "invalid", "no owner has been chosen (`fleetcron cluster transfer --to NODE`)"
        )
    if generation == 0:
        return Verdict("invalid", f"owner {owner} is set at generation 0, which no transfer writes")
    owner_record = nodes.get(str(owner))
    if owner_record is None:
        return Verdict("invalid", f"the owner {owner} is not a known node")
    if owner_record.state != "approved":
        return Verdict("invalid", f"the owner {owner} is {owner_record.state}, not approved")
    return None


# -- claim deadlines, watchdog budgets and self-fencing --------------------------------------

#: The clock-rate assumption: every clock involved in a run (the database's, the scheduler's
#: monotonic clock, the executing machine's monotonic clock) runs within 1 % of true time.
#: Quartz clocks drift by tens of parts per million and NTP slews at most 500 ppm (0.05 %),
#: so 1 % is twenty times what a healthy machine does.
CLOCK_RATE_TOLERANCE = 0.01
#: Seconds a command may take, after the executor is called, to actually start under its
#: watchdog (queueing inside the executor, the SSH exec request reaching the target).
START_LATENCY_S = 1.0
#: Seconds between SIGTERM and SIGKILL when a run times out (the executors' default); a
#: claim's margin must be longer (``claim_margin_s``), so the kill fits before the deadline.
DEFAULT_KILL_GRACE_S = 5.0
#: An owner that has not renewed its lease fences itself this fraction of the lease before
#: the lease can expire (at least :data:`MIN_FENCE_MARGIN_S`).
FENCE_FRACTION = 0.2
MIN_FENCE_MARGIN_S = 0.5


def claim_deadline(claimed_at: datetime, timeout_s: float, margin: timedelta) -> datetime:
    """The one rule for a run's claim deadline: claim time + timeout + margin.

    ``claimed_at`` is read from the clock claims are measured by: the database clock in a
    cluster (so a node with a wrong clock cannot extend its claims), the scheduler's clock
    standalone. After the deadline the run's completion can no longer be written, and the
    watchdog on the executing machine has ended the command."""
    return claimed_at + timedelta(seconds=timeout_s) + margin


def watchdog_budget(deadline_at: datetime, claimed_at: datetime, elapsed_s: float) -> float:
    """Seconds, from now, that a command may live so that it is gone by its claim deadline.

    ``claimed_at`` and ``deadline_at`` come from the same clock (read in the claim
    transaction); ``elapsed_s`` is this machine's monotonic time since that reading (jitter,
    waiting for a concurrency slot included). Both the scheduler's clock measuring
    ``elapsed_s`` and the executing machine's clock measuring the budget may run
    :data:`CLOCK_RATE_TOLERANCE` slow, and starting takes up to :data:`START_LATENCY_S`:
    the budget leaves room for all three. Zero or less: the run must not start."""
    remaining = (deadline_at - claimed_at).total_seconds()
    return remaining * (1 - 2 * CLOCK_RATE_TOLERANCE) - elapsed_s - START_LATENCY_S


def self_fence_after(lease_s: float) -> float:
    """Seconds after the start of its last successful renewal at which an owner that could
    not renew again kills its in-flight runs and stops starting new ones: before the lease
    can expire by the database clock, allowing for clock rates and the time to kill."""
    margin = max(FENCE_FRACTION * lease_s, MIN_FENCE_MARGIN_S)
    return max(lease_s - margin, lease_s / 2)
