"""Members: the scheduler processes that share the shards, and what each should own now.

A member is one scheduler process: its node and its worker index on that node
(:func:`member_name`), with a weight (its share: the cores it stands for; 0 while it
drains) and a heartbeat lease in ``cluster_members``. Every member decides for itself,
from the same readings (the live members, each shard's current owner and the operator's
pins), which shards it should hold (:func:`decide`): the sticky placement of
:func:`fleetcron.core.shards.place`, in which a shard whose owner is no longer a live
member is placed afresh. All members computing from the same readings get one placement,
so their decisions never claim a shard twice.

An operator may **pin** a shard to a node (``fleetcron cluster shard move S --to NODE``):
the placement puts it on that node's member first and counts it against the node's
capacity (:func:`fleetcron.core.shards.place`), as long as the node is an eligible live
member; otherwise the pin is ignored, the shard is placed as any other, and
:func:`pin_ignored` says why. Between nodes a node is one member, ``<node id>/0`` (worker
0's row stands for its node, weighted by its worker count), so a pin names that member;
which of the node's worker processes executes the shard is then :func:`worker_shards`'
split, as for every shard the node owns.

The decision only says what should change; taking a shard waits for its previous
owner's claims (the per-shard rule of :func:`fleetcron.core.planning.wait_for_old_claims`)
and its lease, and giving one up drains it first: both are done between nodes by
:mod:`fleetcron.coordination.shard_moves` (``FLEETCRON_SHARD_PLACEMENT=members``), which
runs this decision on every node after each lease renewal. Within a node, the split of
its work between its worker processes (:func:`worker_shards`, ``fleetcron scheduler
--workers N``) uses the same placement: each worker executes the shards it gives it,
fixed for the life of the group of processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetcron.core.shards import Member, Move, place

__all__ = [
    "Decision",
    "NodeStanding",
    "Worker",
    "decide",
    "member_name",
    "parse_member",
    "pin_ignored",
    "worker_shards",
]

#: Between a member's node id and its worker index (node ids are hex: no clash).
SEPARATOR = "/"


def member_name(node_id: str, worker: int) -> str:
    """The member's name, as placements and ownership rows name it."""
    if worker < 0:
        raise ValueError(f"worker must be 0 or more, got {worker}")
    return f"{node_id}{SEPARATOR}{worker}"


def parse_member(name: str) -> tuple[str, int]:
    """``(node id, worker)`` of a member's name."""
    node_id, sep, worker = name.rpartition(SEPARATOR)
    if not sep or not node_id or not worker.isdigit():
        raise ValueError(f"not a member name: {name!r} (expected <node id>/<worker>)")
    return node_id, int(worker)


@dataclass(frozen=True, slots=True)
class Decision:
    """What member ``member`` should do now. ``placed``: every shard's member in the
    placement; ``keep``: shards it holds and keeps; ``take``: shards placed on it that it
    does not hold (``source``: their holder now, None for a shard nobody holds);
    ``give``: shards it holds that are placed elsewhere (``destination`` None: no live
    member may take it)."""

    member: str
    placed: Mapping[int, str]
    keep: tuple[int, ...]
    take: tuple[Move, ...]
    give: tuple[Move, ...]

    @property
    def wanted(self) -> frozenset[int]:
        """The shards this member should hold once its moves are done."""
        return frozenset(self.keep) | {mv.shard for mv in self.take}


def placement(
    shards: int,
    live: Sequence[Member],
    owners: Mapping[int, str | None],
    pins: Mapping[int, str] | None = None,
) -> dict[int, str]:
    """Where the placement puts each shard (shard -> member name; a shard no live member
    may take is absent), from the same inputs as :func:`decide`: every member that reads
    the same rows computes the same placement."""
    eligible = {m.name for m in live if m.weight > 0}
    held_by_live = {s: o for s, o in owners.items() if o is not None and o in eligible}
    return dict(place(shards, live, held_by_live, pins))


def decide(
    me: str,
    shards: int,
    live: Sequence[Member],
    owners: Mapping[int, str | None],
    pins: Mapping[int, str] | None = None,
) -> Decision:
    """The decision of member ``me`` from the ``live`` members (those whose heartbeat
    lease holds), each shard's current owner (``owners``: shard -> member name, or
    None) and the operator's ``pins`` (shard -> member name; a pin to a member not live
    is ignored). ``me`` not among the live members (its lease lapsed, or it drains with
    weight 0) gets no shard and gives up every shard it holds."""
    placed = placement(shards, live, owners, pins)
    held = sorted(s for s, o in owners.items() if o == me)
    return Decision(
        member=me,
        placed=placed,
        keep=tuple(s for s in held if placed.get(s) == me),
        take=tuple(
            Move(s, owners.get(s), me)
            for s in sorted(placed)
            if placed[s] == me and owners.get(s) != me
        ),
        give=tuple(Move(s, me, placed.get(s)) for s in held if placed.get(s) != me),
    )


@dataclass(frozen=True, slots=True)
class NodeStanding:
    """What the placement knows of a node a shard is pinned to: its registry ``state``
    (``candidate``, ``approved``, ``retired``), whether it is fenced or drained by an
    operator, and whether its member (worker 0's row) is live with a positive weight."""

    state: str
    fenced: bool = False
    drained: bool = False
    live: bool = True


def pin_ignored(standing: NodeStanding | None) -> str | None:
    """Why a pin to a node in ``standing`` (None: a node the registry no longer knows) is
    ignored by the placement, in an operator's words; None when the pin holds (the node is
    an eligible live member)."""
    if standing is None:
        return "the node is not registered"
    if standing.state != "approved":
        return f"the node is {standing.state}, not approved"
    if standing.fenced:
        return "the node is fenced"
    if standing.drained:
        return "the node is drained"
    if not standing.live:
        return "the node is not a live member (its scheduler is not running)"
    return None


@dataclass(frozen=True, slots=True)
class Worker:
    """Worker ``index`` of the ``count`` worker processes of one node (``fleetcron
    scheduler --workers count``). Worker 0 also does the node's periodic work besides its
    shards (cluster maintenance, retention, notifications, probes)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"worker {self.index} of {self.count}: need 0 <= index < count")

    @property
    def first(self) -> bool:
        return self.index == 0

    def name(self, node_name: str) -> str:
        """The node name this worker's runs record (``<node name>/<index>``)."""
        return f"{node_name}{SEPARATOR}{self.index}"


def worker_shards(node_id: str, workers: int, shards: int) -> tuple[frozenset[int], ...]:
    """The shards each of a node's ``workers`` worker processes executes (index: the
    worker): the placement of :func:`fleetcron.core.shards.place` over members
    ``<node id>/0`` to ``<node id>/<workers - 1>`` of equal weight, so every shard goes
    to exactly one worker and each worker holds its share within one shard; the same on
    every start of the same count."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers > shards:
        raise ValueError(f"{workers} workers need at least as many shards, got {shards}")
    names = [member_name(node_id, w) for w in range(workers)]
    placed = place(shards, [Member(name) for name in names], {})
    return tuple(frozenset(s for s, m in placed.items() if m == name) for name in names)
