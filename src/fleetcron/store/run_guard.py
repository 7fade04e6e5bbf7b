"""The ownership guard's seam in the run store: what every run-writing transaction asks.

:class:`RunGuard` is implemented by :class:`Standalone` (a single node: nothing to prove)
and, in a cluster, by :class:`fleetcron.coordination.guard.CoordinatedGuard`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core.ownership import Verdict
from fleetcron.core.planning import OldClaim
from fleetcron.store.bulk import among
from fleetcron.store.schema import Run

__all__ = ["STANDALONE_VERDICT", "NewClaim", "RunGuard", "Standalone", "shards_of_runs"]


@dataclass(frozen=True)
class NewClaim:
    """The claim to create for a run just recorded ``running`` in the same transaction: the
    run's id and its claim deadline (already computed, on the claim clock)."""

    run_id: int
    deadline_at: datetime
    #: The run's shard (its target's): the claim is bound to this shard's generation.
    shard: int = 0


def shards_of_runs(guard: RunGuard, session: Session, run_ids: Collection[int]) -> set[int] | None:
    """The shards of the runs ``run_ids`` (a run's shard is its target's, written when the
    run is and never changed): what a transaction writing them passes as ``of_shards``;
    None, without a read, when there is one shard (every write decides it)."""
    if not run_ids or guard.shards(session) <= 1:
        return None
    return set(
        session.scalars(
            select(Run.shard).where(among(session, Run.id, sorted(set(run_ids)))).distinct()
        )
    )


class RunGuard(Protocol):
    """Decides, inside each run-writing transaction, what this node may write.

    Every method runs in the caller's transaction, so its decision and the write commit
    together or not at all.
    """

    def verdict(self, session: Session, *, of_shards: Collection[int] | None = None) -> Verdict:
        """Whether this node owns the jobs now (and under which generation); takes the
        ownership lock for the rest of the transaction. ``of_shards``: the shards of every
        run the transaction writes, when the caller knows them: only their rows are locked
        and decided (the verdict's generations name those shards only); None: every
        shard."""

    def shards(self, session: Session) -> int:
        """The installation's shard count (1 standalone): with one shard, naming the shards
        written is not worth a read."""

    def claim_clock(self, session: Session) -> datetime | None:
        """The time claims are measured from (the database clock in a cluster); ``None``:
        the scheduler's clock."""

    def claim(
        self, session: Session, verdict: Verdict, claims: Sequence[NewClaim], at: datetime
    ) -> dict[int, int]:
        """Create an execution claim for each run of ``claims`` (already written, with its
        deadline), created ``at`` under ``verdict``'s generation; returns run id -> claim id
        (empty when this guard keeps no claims). The caller writes the claim id and the
        generation on each run row in the same transaction."""

    def old_claims(
        self,
        session: Session,
        verdict: Verdict,
        assignment_ids: Sequence[int],
        *,
        claimed_at: datetime | None = None,
    ) -> dict[int, list[OldClaim]]:
        """Per assignment, the claims of older generations in its shard whose deadline has
        not come: their commands may still run, so nothing of that shard starts yet.

        ``claimed_at``: the time the new claims of this transaction carry, read before
        this call. A claim whose deadline is after it still blocks, so no claim is ever
        recorded as made before the deadline of an older one it waited for."""

    def live(self, session: Session, verdict: Verdict, run_ids: Sequence[int]) -> set[int]:
        """The runs among ``run_ids`` whose claims are still live for this node and
        generation: only those may be written."""

    def release(self, session: Session, run_ids: Sequence[int]) -> None:
        """Mark the claims of finished runs done."""


STANDALONE_VERDICT = Verdict("owner", "standalone: this is the only node")


class Standalone:
    """The guard of a single node: nothing to prove, no claims to keep."""

    def verdict(self, session: Session, *, of_shards: Collection[int] | None = None) -> Verdict:
        return STANDALONE_VERDICT

    def shards(self, session: Session) -> int:
        return 1

    def claim_clock(self, session: Session) -> datetime | None:
        return None

    def claim(
        self, session: Session, verdict: Verdict, claims: Sequence[NewClaim], at: datetime
    ) -> dict[int, int]:
        return {}

    def old_claims(
        self,
        session: Session,
        verdict: Verdict,
        assignment_ids: Sequence[int],
        *,
        claimed_at: datetime | None = None,
    ) -> dict[int, list[OldClaim]]:
        return {}

    def live(self, session: Session, verdict: Verdict, run_ids: Sequence[int]) -> set[int]:
        return set(run_ids)

    def release(self, session: Session, run_ids: Sequence[int]) -> None:
        return None
