"""Shards: which shard a target belongs to, and which member runs which shard.

The fleet's work is divided into a fixed number of shards, chosen when the cluster is
created. A target belongs to the shard its id hashes to (:func:`shard_of`), so all of a
target's runs, its pooled connection and its per-target rules live with one member.

Members (scheduler processes) take shards by weighted rendezvous hashing with bounded
load, sticky to the current placement (:func:`place`):

1. A member may hold at most its weighted share of the shards rounded up (its
   *capacity*) and should hold at least that share rounded down (its *floor*), so every
   member's load is within one shard of its exact share.
2. A shard an operator pinned to an eligible member goes to it first, and counts against
   its capacity (a pin to a member that is not eligible is ignored: the shard is placed
   as any other). Pinned shards never move in the steps below; a member pinned more
   shards than its capacity holds only those.
3. A shard whose owner is still an eligible member stays with it, up to that member's
   capacity less its pinned shards (a member over it keeps the shards it ranks highest).
4. The other shards go, in shard order, to the member that ranks them highest among those
   with room; once the shards left are no more than what members lack to reach their
   floor, only those members have room.
5. A member still below its floor takes, from members above theirs, the unpinned shards it
   ranks highest.

So a member that leaves (or drains: weight 0) moves only its own shards (with unequal
weights or fewer shards than members squared, step 5 may also move one shard to a member
that rounding left below its floor), a member that joins takes only its share, a pin
moves its shard and at most one other (the pinned member, at its capacity, sheds the
unpinned shard it ranks lowest, or the member that lost the shard takes one to stay at its
floor; with unequal weights step 5 may move one more for rounding), and every node that
computes the placement from the same members, the same current owners and the same pins
gets the same answer. No shard is placed when no member is eligible: the work stops (fail
closed).

Written here rather than taken from a library: it is a few dozen lines, and which shards
move on a join, a leave or a drain is a promise of the product that its tests pin down.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Member", "Move", "capacity", "moves", "place", "rank", "shard_of"]


def _unit(*parts: str) -> float:
    """A stable number in (0, 1) for ``parts`` (the same on every node and release)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 1)


def shard_of(target_id: int, shards: int) -> int:
    """The shard of a target: a stable hash of its id (not its name, which may change)."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    return int(_unit("target", str(target_id)) * shards) % shards


@dataclass(frozen=True, slots=True)
class Member:
    """A scheduler process that may run shards; ``weight`` is its share (e.g. its cores;
    0 while it drains)."""

    name: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Move:
    """One shard changing hands: ``source`` is None for a shard nobody held."""

    shard: int
    source: str | None
    destination: str | None


def rank(shard: int, member: Member) -> float:
    """The member's weighted rendezvous score for the shard (higher: preferred)."""
    return -member.weight / math.log(_unit("shard", str(shard), member.name))


def capacity(shards: int, members: Sequence[Member]) -> dict[str, tuple[int, int]]:
    """Each eligible member's (floor, capacity): its exact share rounded down and up."""
    total = sum(m.weight for m in members if m.weight > 0)
    bounds: dict[str, tuple[int, int]] = {}
    for member in members:
        if member.weight > 0:
            share = shards * member.weight / total
            bounds[member.name] = (math.floor(share + 1e-9), math.ceil(share - 1e-9))
    return bounds


class _Placement:
    """The placement being built: owners and each member's count against its bounds."""

    def __init__(self, shards: int, members: Sequence[Member]) -> None:
        self.members = sorted((m for m in members if m.weight > 0), key=lambda m: m.name)
        self.bounds = capacity(shards, self.members)
        self.owner: dict[int, str] = {}
        self.count = dict.fromkeys(self.bounds, 0)
        self.pinned: set[int] = set()

    def assign(self, shard: int, member: str) -> None:
        previous = self.owner.get(shard)
        if previous is not None:
            self.count[previous] -= 1
        self.owner[shard] = member
        self.count[member] += 1

    def deficit(self) -> int:
        return sum(max(self.bounds[m][0] - n, 0) for m, n in self.count.items())

    def best(self, shard: int, candidates: Iterable[Member]) -> Member:
        return max(candidates, key=lambda m: (rank(shard, m), m.name))


def _pin(p: _Placement, pins: Mapping[int, str], shards: int) -> None:
    """The pinned shards on their members, those pinned to an eligible member only; a
    member pinned past its capacity holds its pins only, and the others share what is
    left by their weights."""
    for shard, member in sorted(pins.items()):
        if member in p.bounds and 0 <= shard < shards:
            p.assign(shard, member)
            p.pinned.add(shard)
    over: set[str] = set()
    while more := {m for m, (_, cap) in p.bounds.items() if p.count[m] > cap} - over:
        over |= more
        rest = [m for m in p.members if m.name not in over]
        left = shards - sum(p.count[m] for m in over)
        p.bounds = {m: (p.count[m], p.count[m]) for m in over}
        if rest and left > 0:
            p.bounds |= capacity(left, rest)
        else:
            p.bounds |= {m.name: (0, 0) for m in rest}


def _keep_current(p: _Placement, current: Mapping[int, str], shards: int) -> None:
    by_member: dict[str, list[int]] = {}
    for shard, owner in current.items():
        if owner in p.bounds and 0 <= shard < shards and shard not in p.pinned:
            by_member.setdefault(owner, []).append(shard)
    for member in p.members:
        held = by_member.get(member.name, [])
        held.sort(key=lambda s: (-rank(s, member), s))
        room = max(p.bounds[member.name][1] - p.count[member.name], 0)
        for shard in held[:room]:
            p.assign(shard, member.name)


def _place_unowned(p: _Placement, shards: int) -> None:
    unowned = [s for s in range(shards) if s not in p.owner]
    for left, shard in zip(range(len(unowned), 0, -1), unowned, strict=True):
        if left <= p.deficit():
            room = [m for m in p.members if p.count[m.name] < p.bounds[m.name][0]]
        else:
            room = [m for m in p.members if p.count[m.name] < p.bounds[m.name][1]]
        p.assign(shard, p.best(shard, room).name)


def _fill_floors(p: _Placement) -> None:
    for member in p.members:
        while p.count[member.name] < p.bounds[member.name][0]:
            donors = {m for m, n in p.count.items() if n > p.bounds[m][0]}
            movable = [s for s, o in p.owner.items() if o in donors and s not in p.pinned]
            if not movable:
                break  # what it lacks is pinned elsewhere
            shard = max(movable, key=lambda s: (rank(s, member), -s))
            p.assign(shard, member.name)


def place(
    shards: int,
    members: Sequence[Member],
    current: Mapping[int, str],
    pins: Mapping[int, str] | None = None,
) -> dict[int, str]:
    """Shard -> member name for every shard, sticky to ``current``, with the shards of
    ``pins`` (shard -> member name) on their members when those are eligible (see the
    module docstring); empty when no member has a positive weight."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    p = _Placement(shards, members)
    if not p.members:
        return {}
    _pin(p, pins or {}, shards)
    _keep_current(p, current, shards)
    _place_unowned(p, shards)
    _fill_floors(p)
    return dict(sorted(p.owner.items()))


def moves(before: Mapping[int, str], after: Mapping[int, str]) -> list[Move]:
    """The shards whose owner differs between two placements, in shard order."""
    changed = sorted(s for s in before.keys() | after.keys() if before.get(s) != after.get(s))
    return [Move(s, before.get(s), after.get(s)) for s in changed]
