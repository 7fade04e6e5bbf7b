"""Members on a real PostgreSQL: scheduler processes register in ``cluster_members``, keep
a heartbeat lease on the database clock, and each reads the same placement: their
decisions split the shards by weight; a member whose heartbeat stops drops out and its
shards go to the others; a member that leaves must join again."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from sqlalchemy import select, update

from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination import members
from fleetcron.core.members import Decision, member_name
from fleetcron.services.cluster import status as cluster
from fleetcron.store.schema import ClusterMember, ClusterOwnership
from waiting import eventually

pytestmark = pytest.mark.postgres

SHARDS = 8


@pytest.fixture
def node(make_node: MakeNode) -> ClusterNode:
    """A node of an 8-shard cluster that owns every shard (under its node id)."""
    node = make_node("alpha", shards=SHARDS)
    approve(node)
    cluster.request_transfer(node.app, SYSTEM, node.node_id)
    return node


def join(node: ClusterNode, worker: int, weight: float = 1.0, lease_s: float = 30.0) -> None:
    with node.app.db.session() as session:
        members.join(session, node.node_id, worker, weight=weight, lease_s=lease_s)


def decisions(node: ClusterNode, workers: range) -> dict[int, Decision]:
    with node.app.db.read() as session:
        return {w: members.decision(session, node.node_id, w) for w in workers}


def live(node: ClusterNode) -> list[str]:
    with node.app.db.read() as session:
        return [m.name for m in members.live_members(session)]


def lease_of(node: ClusterNode, worker: int) -> datetime:
    with node.app.db.read() as session:
        return session.scalars(
            select(ClusterMember.lease_expires_at).where(ClusterMember.worker == worker)
        ).one()


def test_members_split_the_shards_by_weight_and_agree_on_the_placement(node: ClusterNode) -> None:
    join(node, 0, weight=1.0)
    join(node, 1, weight=3.0)

    seen = decisions(node, range(2))

    assert seen[0].placed == seen[1].placed  # each computed on its own, the same answer
    wanted = Counter(s for d in seen.values() for s in d.wanted)
    assert sorted(wanted) == list(range(SHARDS)) and set(wanted.values()) == {1}
    assert (len(seen[0].wanted), len(seen[1].wanted)) == (2, 6)
    # Today the node owns every shard under its node id, not a member's name: every
    # shard is to be taken from it.
    assert {mv.source for d in seen.values() for mv in d.take} == {node.node_id}


def test_a_member_that_stops_its_heartbeat_drops_out_and_its_shards_go_to_the_others(
    node: ClusterNode,
) -> None:
    join(node, 0)
    join(node, 1)  # a lease far longer than the steps below take, however loaded the machine
    # The members now own what the placement gives them (as acquiring will record it).
    placed = decisions(node, range(2))[0].placed
    with node.app.db.session() as session:
        for shard, member in placed.items():
            session.execute(
                update(ClusterOwnership)
                .where(ClusterOwnership.shard == shard)
                .values(owner_node_id=member)
            )
    one = member_name(node.node_id, 1)
    mine = {s for s, m in placed.items() if m == one}
    assert mine and decisions(node, range(2))[0].take == ()

    # Member 1's last beat, with a short lease; member 0 keeps beating; member 1 stops: its
    # lease runs out by the database clock.
    with node.app.db.session() as session:
        assert members.heartbeat(session, node.node_id, 1, 1.0)

    def one_gone() -> bool:
        with node.app.db.session() as session:
            assert members.heartbeat(session, node.node_id, 0, 30.0)
        return one not in live(node)

    eventually(one_gone, 10, "member 1's lease to run out")

    after = decisions(node, range(1))[0]
    assert after.wanted == frozenset(range(SHARDS))
    assert {(mv.shard, mv.source) for mv in after.take} == {(s, one) for s in mine}
    assert live(node) == [member_name(node.node_id, 0)]  # the control: 0's beats kept it


def test_a_heartbeat_moves_the_lease_on_by_the_database_clock(node: ClusterNode) -> None:
    join(node, 0, lease_s=5.0)
    before = lease_of(node, 0)

    with node.app.db.session() as session:
        assert members.heartbeat(session, node.node_id, 0, 60.0)

    assert (lease_of(node, 0) - before).total_seconds() > 50


def test_a_member_that_left_or_drains_gets_no_shard_and_must_join_again(
    node: ClusterNode,
) -> None:
    join(node, 0)
    join(node, 1)
    with node.app.db.session() as session:
        assert members.set_weight(session, node.node_id, 1, 0.0)
    assert decisions(node, range(2))[1].wanted == frozenset()
    assert decisions(node, range(2))[0].wanted == frozenset(range(SHARDS))

    with node.app.db.session() as session:
        members.leave(session, node.node_id, 1)
        assert not members.heartbeat(session, node.node_id, 1, 30.0)
        assert not members.set_weight(session, node.node_id, 1, 1.0)
    assert live(node) == [member_name(node.node_id, 0)]

    join(node, 1)  # joins again, afresh
    assert len(decisions(node, range(2))[1].wanted) == SHARDS // 2


def test_a_negative_weight_is_refused(node: ClusterNode) -> None:
    with node.app.db.session() as session, pytest.raises(ValueError, match="weight must be 0"):
        members.join(session, node.node_id, 0, weight=-1.0, lease_s=30.0)
