"""Ownership rules: may this node run jobs now? A pure function over plain data.

A node runs jobs only when it can prove it is the authorized owner: the one ownership row
names it, at a positive generation, it is approved, not retired, not fenced by a takeover,
its fingerprint matches its approved record, and no handoff is draining it. Anything
uncertain fails closed with a reason that the skipped slots carry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
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

    @property
    def may_claim(self) -> bool:
        return self.kind == "owner" and not self.draining


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
    mine = nodes.get(me)
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
