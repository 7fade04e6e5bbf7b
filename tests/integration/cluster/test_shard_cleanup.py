"""Active cleanup with the members placement, on a real PostgreSQL: a node that takes over
a lapsed node's shards plans a cleanup of those shards' older claims on SSH targets (once
per shard and generation), and its clearing of a cleaned target's claim lets that
assignment start before the claim's deadline. The negative control asks for the plan as
the one owner would (not shared): a node owning only some shards gets none, and the old
claim waits for its deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from fixtures.cluster import ClusterNode, MakeNode
from fixtures.sshd import SshServer
from fleetcron.coordination.guard import db_now
from fleetcron.core.planning import TargetCleanup
from fleetcron.services.cluster import status as cluster
from fleetcron.store.schema import ClusterOwnership, ExecutionClaim, Run, Target
from integration.cluster.test_active_cleanup import add_remote
from integration.cluster.test_shard_moves import join, live_claim, owned_by, sharing_nodes, step
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.sshd]


@pytest.fixture
def nodes(make_node: MakeNode) -> dict[str, ClusterNode]:
    return sharing_nodes(make_node)


def plan_for(
    node: ClusterNode, *, shared: bool, done: frozenset[tuple[int, int]] = frozenset()
) -> cluster.CleanupPlan | None:
    me = node.identity
    return cluster.active_cleanup_plan(node.app, me.node_id, me.fingerprint, done, shared=shared)


def taken_over_with_a_claim_on_the_remote(
    nodes: dict[str, ClusterNode], sshd: SshServer
) -> tuple[ClusterNode, int, int]:
    """alpha, beta and gamma share the shards; beta has a command running on ``remote``
    (in one of beta's shards) when its member lease lapses and its ownership lease
    expires; alpha and gamma take its shards over between them. Returns the node that
    took the claim's shard, the shard and the old claim's id."""
    alpha, beta, gamma = nodes["alpha"], nodes["beta"], nodes["gamma"]
    add_remote(alpha, sshd)
    join(beta, lease_s=1.0)
    for node in (alpha, gamma):
        join(node)
    for node in (alpha, beta, gamma):
        step(node)
    shard = min(owned_by(alpha, beta))
    claim = live_claim(beta, shard, generation=1)
    with alpha.app.db.session() as session:
        remote = session.scalars(select(Target).where(Target.name == "remote")).one()
        session.execute(update(Target).where(Target.id == remote.id).values(shard=shard))
        run = session.scalar(select(ExecutionClaim.run_id).where(ExecutionClaim.id == claim))
        session.execute(
            update(Run).where(Run.id == run).values(target_id=remote.id, target_name="remote")
        )

    def beta_gone() -> bool:
        with alpha.app.db.session() as session:
            session.execute(
                update(ClusterOwnership)
                .where(ClusterOwnership.owner_node_id == beta.node_id)
                .values(lease_expires_at=db_now(session) - timedelta(seconds=1))
            )
        for node in (alpha, gamma):  # they keep beating, and step
            join(node)
            step(node)
        return not owned_by(alpha, beta)

    eventually(beta_gone, 15, "alpha and gamma to take beta's shards over")
    taker = alpha if shard in owned_by(alpha, alpha) else gamma
    assert shard in owned_by(alpha, taker)
    return taker, shard, claim


def claim_state(node: ClusterNode, claim: int) -> str | None:
    with node.app.db.read() as session:
        return session.scalar(select(ExecutionClaim.state).where(ExecutionClaim.id == claim))


def test_a_node_that_took_shards_over_cleans_their_targets_once_per_shard_and_generation(
    nodes: dict[str, ClusterNode], sshd: SshServer
) -> None:
    taker, shard, claim = taken_over_with_a_claim_on_the_remote(nodes, sshd)
    assert claim_state(taker, claim) == "revoked"  # waited for, until cleaned or expired

    plan = plan_for(taker, shared=True)

    assert plan is not None and [t.name for t in plan.targets] == ["remote"]
    assert [(c.claim_id, c.shard) for c in plan.claims] == [(claim, shard)]
    assert plan.generation_of(plan.targets[0]) == 2  # the shard's generation after takeover
    me = taker.identity
    cleaned = [TargetCleanup(plan.targets[0].target_id, mark=2, killed=1)]
    cleared, refused = cluster.clear_cleaned_claims(
        taker.app, me.node_id, me.fingerprint, plan, cleaned
    )
    assert (cleared, refused) == (1, None)
    assert claim_state(taker, claim) == "cleared"
    # Once per shard and generation: nothing new is owned, so nothing more to plan.
    assert plan_for(taker, shared=True, done=plan.owned) is None


def test_negative_control_as_the_one_owner_a_node_owning_some_shards_plans_nothing(
    nodes: dict[str, ClusterNode], sshd: SshServer
) -> None:
    taker, _, claim = taken_over_with_a_claim_on_the_remote(nodes, sshd)

    assert plan_for(taker, shared=False) is None  # not every shard: no plan, as before
    assert plan_for(taker, shared=True) is not None
    assert claim_state(taker, claim) == "revoked"
