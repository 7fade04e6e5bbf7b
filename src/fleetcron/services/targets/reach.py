"""The host probe in the store: which targets are due, what each probe found, and the views.

The scheduler's probe task (:mod:`fleetcron.scheduler.probes`) asks :func:`due_probes` for
the SSH targets whose slot in the probe interval passed (:func:`fleetcron.core.reach.due`),
probes them with fresh connections (:mod:`fleetcron.executors.ssh_probe`) and hands the
results to :func:`record_probes`, which stores each target's state, when it was probed,
since when it is in that state and the error (bounded). Alert evaluation turns a target
that is down into a host incident (:mod:`fleetcron.services.alerts.host_incidents`).

Local targets are not probed (the scheduler's own host), nor SSH targets without a pinned
host key or host CA. Jump hosts are probed like SSH targets. A target reached through jump
hosts is probed through a fresh chain of them (never directly: the chain is read as the run
path reads it, :func:`fleetcron.store.run_dispatch.load_hops`). When a hop of the chain
fails, the target records that state with the error naming the hop (``jump host b1:
connection refused: …``), and the jump host records it too (the chain up to it is its own
probe's path), unless its own probe in the same round said otherwise: so a dead bastion is
one host incident, the bastion's, and the targets behind it open none of their own
(:mod:`fleetcron.services.alerts.host_incidents`). Paused ones are probed (their state stays
current), but open no host incident.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.core.reach import Reach, due, is_down, last_slot, words
from fleetcron.core.targets import TargetKind
from fleetcron.core.topology import Topology
from fleetcron.executors.base import RunTarget
from fleetcron.store.schema import Target
from fleetcron.store.target_connections import connections

if TYPE_CHECKING:  # the prober itself needs the SSH library; reading its results does not
    from fleetcron.executors.ssh_probe import ProbeResult

log = logging.getLogger(__name__)

#: Targets one probe round takes at most (the rest are due in the next round).
ROUND_MAX = 2000


@dataclass(frozen=True)
class ReachView:
    """A target's reachability as the pages, the CLI and the API show it."""

    state: str | None
    """A :class:`~fleetcron.core.reach.Reach` value; None: not probed (yet)."""
    at: datetime | None
    since: datetime | None
    error: str | None
    probed: bool
    """False for a local target (never probed)."""

    @property
    def down(self) -> bool:
        return is_down(Reach(self.state)) if self.state else False

    @property
    def words(self) -> str:
        if not self.probed:
            return "not probed"
        if self.state is None:
            return "not probed yet"
        return words(Reach(self.state))


#: The kinds the probe connects to (directly or through their jump hosts).
PROBED_KINDS = (TargetKind.SSH, TargetKind.JUMP)


def reach_view(
    kind: TargetKind | str,
    *,
    state: str | None,
    at: datetime | None,
    since: datetime | None,
    error: str | None,
) -> ReachView:
    return ReachView(state, at, since, error, probed=kind in PROBED_KINDS)


def reach_of_row(target: Target) -> ReachView:
    return reach_view(
        target.kind,
        state=target.reach,
        at=target.reach_at,
        since=target.reach_since,
        error=target.reach_error,
    )


def probes_here(app: App) -> bool:
    """Whether this node probes: a standalone node always, in a cluster or pair only the
    owner (one node probes each target, not every node)."""
    if not app.settings.cluster and app.settings.topology is not Topology.REPLICATED_PAIR:
        return True
    from fleetcron.coordination.node import Node
    from fleetcron.coordination.shard_rows import sole_owner

    with app.db.read() as session:
        owner = sole_owner(session)
    return owner is not None and owner == Node(app).identity.node_id


def due_probes(
    app: App,
    now: datetime,
    *,
    interval_s: float,
    limit: int = ROUND_MAX,
    since: datetime | None = None,
) -> list[tuple[int, RunTarget]]:
    """The SSH targets due for a probe at ``now``, the longest overdue first, at most
    ``limit``; each with its connection (the key still encrypted). A target never probed
    counts as probed at ``since`` (the prober's start; None: due at once), so that a
    scheduler starting on a new fleet probes it at each target's offset, not all at once
    beside the first ticks' handshakes."""
    if interval_s <= 0:
        return []
    with app.db.read() as session:
        rows = session.execute(
            select(Target.id, Target.reach_at).where(
                Target.kind.in_(PROBED_KINDS),
                or_(Target.host_key.is_not(None), Target.host_ca.is_not(None)),
            )
        ).all()
        picked = sorted(
            (last_slot(tid, interval_s, now), tid)
            for tid, at in rows
            if due(tid, at or since, interval_s, now)
        )[:limit]
        return connections(session, [tid for _, tid in picked])


def record_probes(app: App, results: Sequence[ProbeResult], now: datetime) -> int:
    """Store what each probe found, probed at ``now``; returns how many targets changed
    state (each logged as ``target.reach_changed``). A target removed meanwhile is
    skipped."""
    if not results:
        return 0
    by_id = {r.target_id: r for r in results}
    changed = 0
    with app.db.session() as session:
        ids = sorted(by_id)
        for start in range(0, len(ids), 500):
            for target in session.scalars(
                select(Target).where(Target.id.in_(ids[start : start + 500]))
            ):
                changed += _store(target, by_id[target.id], now)
        changed += _store_hops(session, results, now)
    return changed


def _store_hops(session: Session, results: Sequence[ProbeResult], now: datetime) -> int:
    """The jump hosts a probe through them found failing, recorded as failing (the chain up
    to a hop is that hop's own probe's path), except those probed themselves this round."""
    own = {r.target_id for r in results}
    failed: dict[str, ProbeResult] = {}
    for result in results:
        if result.hop is not None:
            failed.setdefault(result.hop, result)
    if not failed:
        return 0
    changed = 0
    for hop in session.scalars(
        select(Target).where(Target.name.in_(sorted(failed)), Target.kind == TargetKind.JUMP)
    ):
        if hop.id not in own:
            changed += _store(hop, _as_hop(failed[hop.name], hop.name), now)
    return changed


def _as_hop(result: ProbeResult, name: str) -> ProbeResult:
    """A target's probe result that failed on jump host ``name``, as that host's own."""
    prefix = f"jump host {name}: "
    error = result.error
    if error is not None and error.startswith(prefix):
        error = error[len(prefix) :]
    return replace(result, error=error, hop=None)


def _store(target: Target, result: ProbeResult, now: datetime) -> int:
    state = result.reach.value
    moved = target.reach != state
    target.reach = state
    target.reach_at = now
    target.reach_error = result.error
    if moved or target.reach_since is None:
        target.reach_since = now
    if not moved:
        return 0
    log.log(
        logging.WARNING if is_down(result.reach) else logging.INFO,
        "target: %s %s%s",
        target.name,
        words(result.reach),
        f": {result.error}" if result.error else "",
        extra={"action": "target.reach_changed", "target": target.name, "reach": state},
    )
    return 1


__all__ = [
    "ROUND_MAX",
    "ReachView",
    "due_probes",
    "probes_here",
    "reach_of_row",
    "reach_view",
    "record_probes",
]
