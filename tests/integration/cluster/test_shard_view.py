"""What an operator sees of the shards and the members, on a real PostgreSQL with 4 shards:
each shard's owner, generation, targets and runs in flight, read in a fixed number of
statements; the members with their heartbeat. The targets' shards are computed here from
``core.shards.shard_of``, not read back with the view's own query.

The fixture clock starts at 2026-03-02 09:00:30 UTC; an every-minute job is due at 09:01.
"""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select, update

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination import members
from fleetcron.core.shards import shard_of
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.metrics import Metrics
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.shards import (
    member_readings,
    member_view,
    shard_readings,
    shard_view,
)
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import ClusterMember, Target
from sql_statements import statements

pytestmark = pytest.mark.postgres

SHARDS = 4
TARGETS = 12


@pytest.fixture
def owner(make_node: MakeNode) -> ClusterNode:
    """One node of a 4-shard cluster owning every shard, with 12 targets."""
    node = make_node("alpha", shards=SHARDS)
    approve(node)
    for i in range(TARGETS):
        targets.add_target(node.app, SYSTEM, TargetSpec(f"box{i}", TargetKind.LOCAL))
    cluster.request_transfer(node.app, SYSTEM, node.node_id)
    return node


def expected_targets(node: ClusterNode) -> Counter[int]:
    with node.app.db.read() as session:
        ids = list(session.scalars(select(Target.id)))
    return Counter(shard_of(i, SHARDS) for i in ids)


def start_one_run(node: ClusterNode, clock: FakeClock) -> tuple[int, int]:
    """A job on box0 only, claimed: one run executing. Its run id and box0's shard."""
    jobs.add_job(node.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), target="box0")
    clock.advance(seconds=31)
    store = RunStore(node.app.db, node=node.node_id, guard=node.node.guard())
    [dispatch] = store.claim_due(clock.now).dispatches
    return dispatch.run_id, dispatch.shard


def test_each_shard_shows_its_owner_generation_targets_and_its_run_in_flight(
    owner: ClusterNode, clock: FakeClock
) -> None:
    run_id, shard = start_one_run(owner, clock)

    view = shard_view(owner.app, SYSTEM, owner.node)

    assert view.count == SHARDS and [s.shard for s in view.shards] == list(range(SHARDS))
    assert {(s.owner, s.generation, s.draining) for s in view.shards} == {(owner.node_id, 1, False)}
    assert Counter({s.shard: s.targets for s in view.shards if s.targets}) == expected_targets(
        owner
    )
    assert len([s for s in view.shards if s.targets]) > 1  # the targets are spread
    assert {s.shard: s.running for s in view.shards if s.running} == {shard: 1}
    assert all(view.owned_here(s) for s in view.shards)

    # Negative control: once the run finished, no shard shows a run in flight.
    now = owner.app.now()
    done = ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)
    assert (
        RunStore(owner.app.db, node=owner.node_id, guard=owner.node.guard()).finish(
            [(run_id, done)]
        )
        == []
    )
    assert all(s.running == 0 for s in shard_view(owner.app, SYSTEM, owner.node).shards)


def test_the_view_is_a_few_statements_whatever_the_count_and_the_gauges_follow_it(
    owner: ClusterNode, make_node: MakeNode, clock: FakeClock
) -> None:
    _, shard = start_one_run(owner, clock)

    with statements(owner.app) as seen:
        readings = shard_readings(owner.app, owner.node)
    assert len([s for s in seen if s.lstrip().upper().startswith("SELECT")]) <= 5
    assert {r.shard: r.running for r in readings if r.running} == {shard: 1}
    assert {r.generation for r in readings} == {1} and all(r.owned for r in readings)

    # Another node reads the same shards, none of them its own.
    other = make_node("beta", shards=SHARDS)
    assert not any(r.owned for r in shard_readings(other.app, other.node))


def test_members_show_their_weight_heartbeat_and_whether_they_are_live(
    owner: ClusterNode,
) -> None:
    with owner.app.db.session() as session:
        members.join(session, owner.node_id, 0, weight=2.0, lease_s=30.0)
        members.join(session, owner.node_id, 1, weight=1.0, lease_s=30.0)
        session.execute(
            update(ClusterMember)
            .where(ClusterMember.worker == 1)
            .values(lease_expires_at=ClusterMember.heartbeat_at)
        )

    seen = {m.worker: m for m in member_view(owner.app, SYSTEM)}

    assert (seen[0].name, seen[0].weight, seen[0].live) == (f"{owner.node_id}/0", 2.0, True)
    assert 0 < seen[0].lease_expires_in_s <= 30 and seen[0].heartbeat_age_s >= 0
    assert (seen[1].live, seen[1].lease_expires_in_s <= 0) == (False, True)


def test_the_member_gauges_follow_the_members_and_their_nodes_shards(
    owner: ClusterNode,
) -> None:
    with owner.app.db.session() as session:
        members.join(session, owner.node_id, 0, weight=2.0, lease_s=30.0)
        members.join(session, owner.node_id, 1, weight=0.0, lease_s=30.0)
    metrics = Metrics()
    metrics.watch_members(lambda: member_readings(owner.app))

    scraped = metrics.exposition().decode()

    zero, one = f'member="{owner.node_id}/0"', f'member="{owner.node_id}/1"'
    assert f"fleetcron_member_live{{{zero}}} 1.0" in scraped
    assert f"fleetcron_member_weight{{{zero}}} 2.0" in scraped
    # Worker 0 stands for its node, which owns every shard; worker 1 has no such series.
    assert f"fleetcron_member_shards{{{zero}}} {float(SHARDS)}" in scraped
    assert f"fleetcron_member_shards{{{one}}}" not in scraped
    with owner.app.db.session() as session:
        session.execute(
            update(ClusterMember)
            .where(ClusterMember.worker == 1)
            .values(lease_expires_at=ClusterMember.heartbeat_at)
        )
    assert f"fleetcron_member_live{{{one}}} 0.0" in metrics.exposition().decode()
