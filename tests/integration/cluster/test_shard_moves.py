"""Single shards moving between nodes on a real PostgreSQL (the members placement,
``coordination/shard_moves.py``): nodes take their shares of unowned shards; a shard
placed on a newcomer is drained by its owner and handed over only once its claims are
done; a node whose member lease lapsed keeps its shards until their ownership lease has
expired too, and then they are taken over with their claims revoked; two nodes stepping
from the same reading never both take a shard (each change rechecks under the row's lock;
the negative control, a take that trusts its reading, takes one shard twice)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination import members, shard_moves
from fleetcron.coordination.guard import db_now
from fleetcron.coordination.shard_moves import NODE_WORKER, ShardMove, placement_step
from fleetcron.core.members import Decision, decide, member_name
from fleetcron.core.shards import Member
from fleetcron.errors import Conflict, NotFound
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.registry import set_drained
from fleetcron.store.schema import AuditEvent, ClusterOwnership, ExecutionClaim, Run
from waiting import eventually

pytestmark = pytest.mark.postgres

SHARDS = 8
LEASE_S = 30.0


def sharing_nodes(make_node: MakeNode) -> dict[str, ClusterNode]:
    """alpha, beta and gamma, approved, on an installation of :data:`SHARDS` shards."""
    made = {name: make_node(name, shards=SHARDS) for name in ("alpha", "beta", "gamma")}
    for node in made.values():
        approve(node)
    return made


@pytest.fixture
def nodes(make_node: MakeNode) -> dict[str, ClusterNode]:
    return sharing_nodes(make_node)


def join(node: ClusterNode, weight: float = 1.0, lease_s: float = LEASE_S) -> None:
    with node.app.db.session() as session:
        members.join(session, node.node_id, NODE_WORKER, weight=weight, lease_s=lease_s)


def step(node: ClusterNode, lease_s: float = LEASE_S) -> list[ShardMove]:
    with node.app.db.session() as session:
        return placement_step(session, node.node_id, lease_s=lease_s)


def owners(node: ClusterNode) -> dict[int, tuple[str | None, int, bool]]:
    with node.app.db.read() as session:
        rows = session.execute(
            select(
                ClusterOwnership.shard,
                ClusterOwnership.owner_node_id,
                ClusterOwnership.generation,
                ClusterOwnership.draining,
            )
        )
        return {s: (o, g, d) for s, o, g, d in rows}


def owned_by(node: ClusterNode, of: ClusterNode) -> set[int]:
    return {s for s, (o, _, _) in owners(node).items() if o == of.node_id}


def live_claim(node: ClusterNode, shard: int, generation: int, seconds: float = 60) -> int:
    """A live claim of ``node`` on ``shard`` (a run of it still going on)."""
    with node.app.db.session() as session:
        now = db_now(session)
        run = Run(
            assignment_id=1,
            job_id=1,
            target_id=1,
            job_name="j",
            target_name="t",
            origin="bulk",
            command="true",
            scheduled_for=now,
            trigger="schedule",
            status="running",
            node=node.node_id,
            actor="system",
            created_at=now,
            shard=shard,
        )
        session.add(run)
        session.flush()
        claim = ExecutionClaim(
            run_id=run.id,
            node_id=node.node_id,
            shard=shard,
            generation=generation,
            created_at=now,
            deadline_at=now + timedelta(seconds=seconds),
            state="live",
        )
        session.add(claim)
        session.flush()
        return claim.id


def test_nodes_take_their_shares_of_unowned_shards_once(nodes: dict[str, ClusterNode]) -> None:
    alpha, beta = nodes["alpha"], nodes["beta"]
    join(alpha)
    join(beta)

    taken = step(alpha) + step(beta)

    assert Counter(m.kind for m in taken) == {"take": SHARDS}
    assert len(owned_by(alpha, alpha)) == len(owned_by(alpha, beta)) == SHARDS // 2
    assert all(g == 1 and not d for _, g, d in owners(alpha).values())
    assert step(alpha) == [] and step(beta) == []  # placed as it should be: nothing moves


def test_a_newcomers_shards_are_drained_and_handed_over_once_their_claims_are_done(
    nodes: dict[str, ClusterNode],
) -> None:
    alpha, beta = nodes["alpha"], nodes["beta"]
    join(alpha)
    step(alpha)
    assert owned_by(alpha, alpha) == set(range(SHARDS))
    join(beta)
    placed = {s for s, (o, _, _) in _placement(alpha).items() if o == beta.node_id}
    busy = min(placed)
    claim = live_claim(alpha, busy, generation=1)

    assert step(beta) == []  # beta waits: alpha is live and owns them
    drained = step(alpha)
    assert {(m.shard, m.kind) for m in drained} == {(s, "drain") for s in placed}
    assert step(beta) == []  # still alpha's while they drain
    handed = {m.shard for m in step(alpha) if m.kind == "handoff"}
    assert handed == placed - {busy}  # the busy shard waits for its claim
    assert owners(alpha)[busy] == (alpha.node_id, 1, True)
    assert all(owners(alpha)[s] == (beta.node_id, 2, False) for s in handed)

    with alpha.app.db.session() as session:
        session.execute(
            update(ExecutionClaim).where(ExecutionClaim.id == claim).values(state="done")
        )
    assert [(m.shard, m.kind) for m in step(alpha)] == [(busy, "handoff")]
    assert owned_by(alpha, beta) == placed and owners(alpha)[busy][1:] == (2, False)


def test_a_dead_nodes_shards_are_taken_over_only_once_its_lease_expired(
    nodes: dict[str, ClusterNode],
) -> None:
    alpha, beta = nodes["alpha"], nodes["beta"]
    join(alpha)
    join(beta)  # a lease far longer than the steps below take, however loaded the machine
    step(alpha)
    step(beta)
    betas = owned_by(alpha, beta)
    shard = min(betas)
    claim = live_claim(beta, shard, generation=1)
    with beta.app.db.session() as session:  # beta's last beat, with a short lease: it dies
        assert members.heartbeat(session, beta.node_id, NODE_WORKER, 1.0)

    def beta_gone() -> bool:
        join(alpha)  # alpha keeps beating
        with alpha.app.db.read() as session:
            return member_name(beta.node_id, NODE_WORKER) not in {
                m.name for m in shard_moves.eligible_members(session)
            }

    eventually(beta_gone, 10, "beta's member lease to lapse")
    # Its member lease lapsed, but its shards' ownership lease (30 s) still holds.
    assert step(alpha) == []
    with alpha.app.db.session() as session:
        session.execute(
            update(ClusterOwnership)
            .where(ClusterOwnership.owner_node_id == beta.node_id)
            .values(lease_expires_at=db_now(session) - timedelta(seconds=1))
        )

    moves = step(alpha)
    assert {m.shard for m in moves} == betas and {m.kind for m in moves} == {"takeover"}
    assert sum(m.revoked for m in moves) == 1
    assert all(owners(alpha)[s] == (alpha.node_id, 2, False) for s in betas)
    with alpha.app.db.read() as session:
        state = session.scalar(select(ExecutionClaim.state).where(ExecutionClaim.id == claim))
    assert state == "revoked"


def test_two_nodes_stepping_from_the_same_reading_never_both_take_a_shard(
    nodes: dict[str, ClusterNode],
) -> None:
    alpha, beta = nodes["alpha"], nodes["beta"]
    # Each decided from a reading in which it was the only member and nothing was
    # owned: each believes every shard is its own to take.
    stale = _decision(alpha, alpha, [alpha])
    stale_b = _decision(alpha, beta, [beta])
    join(alpha)
    join(beta)

    first = _take(alpha, stale)
    second = _take(beta, stale_b)  # under each row's lock: alpha owns it and is live

    assert {m.shard for m in first} == set(range(SHARDS)) and second == []
    assert Counter(m.shard for m in first + second) == dict.fromkeys(range(SHARDS), 1)
    assert all(g == 1 for _, g, _ in owners(alpha).values())


def test_negative_control_a_take_trusting_its_reading_takes_a_shard_twice(
    nodes: dict[str, ClusterNode],
) -> None:
    """The check above can fail: without the recheck under the row's lock, the second
    node overwrites the first's shards (two takes of one shard, generation 2)."""
    alpha, beta = nodes["alpha"], nodes["beta"]
    stale = _decision(alpha, alpha, [alpha])
    stale_b = _decision(alpha, beta, [beta])
    join(alpha)
    join(beta)

    first = _take(alpha, stale)
    second = _blind_take(beta, stale_b)

    twice = [s for s, n in Counter(m.shard for m in first + second).items() if n > 1]
    assert twice and {owners(alpha)[s][1] for s in twice} == {2}


def _placement(node: ClusterNode) -> dict[int, tuple[str | None, int, bool]]:
    """Where the placement puts each shard now (as the owners table would read)."""
    with node.app.db.read() as session:
        live = shard_moves.eligible_members(session)
        current = {
            s: member_name(o, NODE_WORKER) if o else None
            for s, o in session.execute(
                select(ClusterOwnership.shard, ClusterOwnership.owner_node_id)
            )
        }
    decision = decide(member_name(node.node_id, NODE_WORKER), SHARDS, live, current)
    return {s: (m.split("/")[0], 0, False) for s, m in decision.placed.items()}


def _decision(reader: ClusterNode, me: ClusterNode, live: list[ClusterNode]) -> Decision:
    """``me``'s decision from a reading in which only ``live`` are members."""
    with reader.app.db.read() as session:
        rows = session.execute(select(ClusterOwnership.shard, ClusterOwnership.owner_node_id))
        current = {shard: owner for shard, owner in rows}
    return decide(
        member_name(me.node_id, NODE_WORKER),
        SHARDS,
        [Member(member_name(n.node_id, NODE_WORKER)) for n in live],
        {s: member_name(o, NODE_WORKER) if o else None for s, o in current.items()},
    )


def _take(node: ClusterNode, decision: Decision) -> list[ShardMove]:
    with node.app.db.session() as session:
        live = {m.name for m in shard_moves.eligible_members(session)}
        return shard_moves._take(
            session, node.node_id, decision, live=live, now=db_now(session), lease_s=LEASE_S
        )


def _blind_take(node: ClusterNode, decision: Decision) -> list[ShardMove]:
    """A take that trusts its reading: it sets the owner of every shard it was given."""
    moves = []
    with node.app.db.session() as session:
        for mv in decision.take:
            row = session.scalars(
                select(ClusterOwnership).where(ClusterOwnership.shard == mv.shard).with_for_update()
            ).one()
            row.owner_node_id, row.generation = node.node_id, row.generation + 1
            moves.append(ShardMove(mv.shard, "take", None, node.node_id, row.generation))
    return moves


def test_a_drained_node_hands_its_shards_over_and_takes_its_share_again_once_undrained(
    make_node: MakeNode,
) -> None:
    members_mode = {"shard_placement": "members", "lease_s": LEASE_S, "lease_renew_s": 5.0}
    alpha, beta = (make_node(n, shards=SHARDS, **members_mode) for n in ("alpha", "beta"))
    for node in (alpha, beta):
        approve(node)
        join(node)
    step(alpha)
    step(beta)
    betas = owned_by(alpha, beta)
    assert len(betas) == SHARDS // 2

    assert set_drained(alpha.app, SYSTEM, beta.node_id, drained=True)
    assert not set_drained(alpha.app, SYSTEM, beta.node_id, drained=True)  # already
    assert {m.kind for m in step(beta)} == {"drain"}
    assert {(m.shard, m.kind) for m in step(beta)} == {(s, "handoff") for s in betas}
    assert owned_by(alpha, alpha) == set(range(SHARDS))
    assert step(beta) == []  # drained: it takes nothing

    assert set_drained(alpha.app, SYSTEM, beta.node_id, drained=False)
    step(alpha)  # alpha drains beta's share...
    step(alpha)  # ...and hands it over
    assert len(owned_by(alpha, beta)) == SHARDS // 2
    with alpha.app.db.read() as session:
        actions = list(
            session.scalars(
                select(AuditEvent.action)
                .where(AuditEvent.action.in_(["cluster.drain", "cluster.undrain"]))
                .order_by(AuditEvent.id)
            )
        )
    assert actions == ["cluster.drain", "cluster.drain", "cluster.undrain"]


def test_drain_needs_the_members_placement_and_transfer_is_refused_with_it(
    make_node: MakeNode, nodes: dict[str, ClusterNode]
) -> None:
    alpha = nodes["alpha"]
    with pytest.raises(Conflict, match="drain: only with FLEETCRON_SHARD_PLACEMENT=members"):
        set_drained(alpha.app, SYSTEM, alpha.node_id, drained=True)
    members_mode = {"shard_placement": "members", "lease_s": LEASE_S, "lease_renew_s": 5.0}
    delta = make_node("delta", shards=SHARDS, **members_mode)
    approve(delta)
    with pytest.raises(NotFound):
        set_drained(delta.app, SYSTEM, "no-such-node", drained=True)
    with pytest.raises(Conflict, match="transfer: with FLEETCRON_SHARD_PLACEMENT=members"):
        cluster.request_transfer(delta.app, SYSTEM, delta.node_id)
