"""The guard decides per shard, on a real PostgreSQL: a run is checked against its own
shard's ownership row only, so a move of shard 1 refuses the runs of shard 1 and no
other; the fencing token names the shard; the shard count is fixed at creation.

The fixture clock starts at 2026-03-02 09:00:30 UTC; an every-minute job is due at 09:01.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from sqlalchemy import event, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination.ownership_change import locked_ownership, renew_lease
from fleetcron.coordination.shard_rows import shard_count
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.scheduler.run_request import run_environment
from fleetcron.services.cluster import status as cluster
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.run_dispatch import Dispatch
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import ClusterOwnership, ExecutionClaim, FencedWrite, Run, Target

pytestmark = pytest.mark.postgres

SHARDS = 4


@pytest.fixture
def owner(make_node: MakeNode) -> ClusterNode:
    """One node of a 4-shard cluster owning every shard, with targets on shards 0 and 1 and
    an every-minute job on them."""
    node = make_node("alpha", shards=SHARDS)
    approve(node)
    for i in range(40):
        targets.add_target(node.app, SYSTEM, TargetSpec(f"box{i}", TargetKind.LOCAL))
        if {0, 1} <= set(target_shards(node).values()):
            break
    jobs.add_job(node.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(node.app, SYSTEM, node.node_id)
    return node


def target_shards(node: ClusterNode) -> dict[str, int]:
    with node.app.db.read() as session:
        return {name: shard for name, shard in session.execute(select(Target.name, Target.shard))}


def store(node: ClusterNode) -> RunStore:
    return RunStore(node.app.db, node=node.node_id, guard=node.node.guard())


def claim_one_per_shard(node: ClusterNode, clock: FakeClock) -> dict[int, Dispatch]:
    clock.advance(seconds=31)
    dispatches = store(node).claim_due(clock.now).dispatches
    return {d.shard: d for d in dispatches}


def move_shard(node: ClusterNode, shard: int) -> None:
    """Shard ``shard``'s generation moves on (as a change of its owner does); the others' stay."""
    with node.app.db.session() as session:
        session.execute(
            update(ClusterOwnership)
            .where(ClusterOwnership.shard == shard)
            .values(generation=ClusterOwnership.generation + 1)
        )


def live_under(node: ClusterNode, run_ids: list[int], *, per_shard: bool = True) -> set[int]:
    """The runs the guard lets write now. ``per_shard=False`` is the negative control: a
    guard that reads one generation for the whole cluster (shard 0's), as before shards."""
    guard = node.node.guard()
    with node.app.db.session() as session:
        verdict = guard.verdict(session)
        if not per_shard:
            verdict = replace(verdict, generations={}, generation=verdict.generation_of(0))
        return guard.live(session, verdict, run_ids)


def test_every_target_run_and_claim_carries_its_shard_and_that_shards_generation(
    owner: ClusterNode, clock: FakeClock
) -> None:
    by_shard = claim_one_per_shard(owner, clock)

    with owner.app.db.read() as session:
        assert shard_count(session) == SHARDS
        rows = session.execute(
            select(Run.shard, Target.shard, ExecutionClaim.shard, ExecutionClaim.generation)
            .join(Target, Target.id == Run.target_id)
            .join(ExecutionClaim, ExecutionClaim.run_id == Run.id)
        ).all()
    assert rows and all(r[0] == r[1] == r[2] and r[3] == 1 for r in rows)
    assert {0, 1} <= set(by_shard)


def test_a_run_of_shard_1_is_refused_when_shard_1_moved_and_shard_0s_still_writes(
    owner: ClusterNode, clock: FakeClock
) -> None:
    by_shard = claim_one_per_shard(owner, clock)
    zero, one = by_shard[0].run_id, by_shard[1].run_id
    assert live_under(owner, [zero, one]) == {zero, one}

    move_shard(owner, 1)

    assert live_under(owner, [zero, one]) == {zero}
    now = owner.app.now()
    done = ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)
    refused = store(owner).finish([(zero, done), (one, done)])
    assert refused == [one]
    with owner.app.db.read() as session:
        statuses = {rid: status for rid, status in session.execute(select(Run.id, Run.status))}
        fenced = list(session.scalars(select(FencedWrite.run_id)))
    # Shard 1's completion is refused and recorded; its run is fenced when its claim expires.
    assert (statuses[zero], statuses[one]) == ("succeeded", "running")
    assert fenced == [one]


def test_negative_control_a_guard_reading_one_generation_for_all_shards_lets_the_stale_run_write(
    owner: ClusterNode, clock: FakeClock
) -> None:
    by_shard = claim_one_per_shard(owner, clock)
    zero, one = by_shard[0].run_id, by_shard[1].run_id
    move_shard(owner, 1)

    # What the check above would see from a guard blind to shards: shard 1's stale run
    # passes, so the per-shard assertion fails.
    assert live_under(owner, [zero, one], per_shard=False) == {zero, one}


def holding_row_of(node: ClusterNode, shard: int) -> Session:
    """A transaction holding shard ``shard``'s ownership row locked (the caller ends it)."""
    holder = Session(node.app.db.engine)
    holder.execute(
        select(ClusterOwnership.id).where(ClusterOwnership.shard == shard).with_for_update()
    )
    return holder


def verdict_waits(node: ClusterNode, of_shards: set[int] | None) -> bool:
    """Whether the guard's verdict (over ``of_shards``, None: every shard) waits for a
    lock another transaction holds (given up after 200 ms)."""
    with node.app.db.engine.connect() as conn, Session(bind=conn) as session:
        session.execute(text("SET LOCAL lock_timeout = '200ms'"))
        try:
            node.node.guard().verdict(session, of_shards=of_shards)
        except OperationalError as exc:
            assert "lock timeout" in str(exc)
            return True
        finally:
            session.rollback()
        return False


def test_the_verdict_locks_the_rows_of_the_shards_written_only(owner: ClusterNode) -> None:
    holder = holding_row_of(owner, 3)
    try:
        assert not verdict_waits(owner, {0, 1})
        assert verdict_waits(owner, {1, 3})
    finally:
        holder.rollback()
        holder.close()


def test_negative_control_the_verdict_over_every_shard_waits_for_any_shards_row(
    owner: ClusterNode,
) -> None:
    holder = holding_row_of(owner, 3)
    try:
        assert verdict_waits(owner, None)
    finally:
        holder.rollback()
        holder.close()


def test_a_claim_is_decided_under_the_rows_of_its_runs_shards(
    make_node: MakeNode, clock: FakeClock
) -> None:
    node = make_node("solo", shards=SHARDS)
    approve(node)
    targets.add_target(node.app, SYSTEM, TargetSpec("only", TargetKind.LOCAL))
    jobs.add_job(node.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(node.app, SYSTEM, node.node_id)
    (shard,) = target_shards(node).values()
    holder = holding_row_of(node, (shard + 1) % SHARDS)
    try:
        # Waits for no row but its run's shard's (for the session's lock_timeout otherwise).
        by_shard = claim_one_per_shard(node, clock)
    finally:
        holder.rollback()
        holder.close()

    assert list(by_shard) == [shard] and by_shard[shard].generation == 1
    with node.app.db.read() as session:
        claims = session.execute(select(ExecutionClaim.shard, ExecutionClaim.generation)).all()
    assert [tuple(c) for c in claims] == [(shard, 1)]


def test_the_fencing_token_names_the_shard_and_its_generation(
    owner: ClusterNode, clock: FakeClock
) -> None:
    by_shard = claim_one_per_shard(owner, clock)

    for shard, dispatch in by_shard.items():
        token = run_environment(dispatch, "alpha")["FLEETCRON_FENCING_TOKEN"]
        assert token == f"{shard}:{dispatch.generation}:{dispatch.claim_id}"


def test_a_handoff_moves_every_shard_each_generation_up_by_one(
    owner: ClusterNode, make_node: MakeNode
) -> None:
    beta = make_node("beta", shards=SHARDS)
    approve(beta)
    move_shard(owner, 2)  # shard 2 ahead of the others: each shard counts on its own

    requested = cluster.request_transfer(owner.app, SYSTEM, beta.node_id)
    done = cluster.maintain(owner.app)  # the drained handoff completes

    assert requested.state == "pending" and done.completed_transfers == [requested.id]
    with owner.app.db.read() as session:
        rows = session.execute(
            select(
                ClusterOwnership.shard, ClusterOwnership.owner_node_id, ClusterOwnership.generation
            ).order_by(ClusterOwnership.shard)
        ).all()
    assert [(s, o) for s, o, _ in rows] == [(s, beta.node_id) for s in range(SHARDS)]
    assert [g for _, _, g in rows] == [3 if s == 2 else 2 for s in range(SHARDS)]
    status = cluster.status(owner.app, SYSTEM, owner.node)
    assert [(s.shard, s.generation) for s in status.shards] == [(s, g) for s, _, g in rows]
    assert f"{SHARDS} shards" in status.one_line()


def test_a_start_with_another_shard_count_is_refused(
    owner: ClusterNode, make_node: MakeNode
) -> None:
    with pytest.raises(Conflict, match="created with 4 shard"):
        make_node("gamma", shards=8)


def statements_of(node: ClusterNode, action: Callable[[], object]) -> list[str]:
    """The SQL statements ``action`` sends to the database."""
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(node.app.db.engine, "before_cursor_execute", seen)
    try:
        action()
    finally:
        event.remove(node.app.db.engine, "before_cursor_execute", seen)
    return statements


def test_the_owner_renews_every_shards_lease_with_one_statement(owner: ClusterNode) -> None:
    lease = OneSecondLease(owner.app, owner.node, terminate_expired_owner=False)

    statements = statements_of(owner, lease.step)

    assert len(statements) == 1 and statements[0].startswith("UPDATE cluster_ownership SET")
    with owner.app.db.read() as session:
        leases = list(session.scalars(select(ClusterOwnership.lease_expires_at)))
    assert len(leases) == SHARDS and None not in leases


class OneSecondLease(cluster.Lease):
    """A lease on a node whose settings have none."""

    @property
    def duration(self) -> float:
        return 1.0


def test_negative_control_renewing_through_the_locked_rows_takes_more_statements(
    owner: ClusterNode,
) -> None:
    def renew_locked() -> None:
        with owner.app.db.session() as session:
            ownership = locked_ownership(session)
            assert ownership is not None
            renew_lease(session, ownership, 1.0)

    assert len(statements_of(owner, renew_locked)) > 1
