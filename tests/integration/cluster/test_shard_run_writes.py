"""Completions, retries, interruptions and rollouts lock only their runs' shards' rows, on
a real PostgreSQL: a transaction holding another shard's ownership row does not hold them
up, one holding the run's own shard's row does (the write waits, then goes through).

The negative control is the guard of before: a verdict over every shard, which waits for
any shard's row.

The fixture clock starts at 2026-03-02 09:00:30 UTC; an every-minute job is due at 09:01.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination.guard import CoordinatedGuard
from fleetcron.core.ownership import Verdict
from fleetcron.core.statuses import RunStatus
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.services.cluster import status as cluster
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.run_dispatch import Dispatch
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import ClusterOwnership, Run, Target
from waiting import eventually

pytestmark = pytest.mark.postgres

SHARDS = 8
T = TypeVar("T")


def node_with_one_target(make_node: MakeNode, spec: JobSpec) -> tuple[ClusterNode, int]:
    """An 8-shard node owning every shard, one local target and ``spec`` on it; the
    target's shard."""
    node = make_node("solo", shards=SHARDS)
    approve(node)
    targets.add_target(node.app, SYSTEM, TargetSpec("only", TargetKind.LOCAL))
    jobs.add_job(node.app, SYSTEM, "tick", spec, bulk=True)
    cluster.request_transfer(node.app, SYSTEM, node.node_id)
    with node.app.db.read() as session:
        shard = session.scalars(select(Target.shard)).one()
    return node, shard


class AllShardsGuard(CoordinatedGuard):
    """The negative control: a guard deciding over every shard whatever the write names
    (the guard before completions were scoped to their runs' shards)."""

    def verdict(self, session: Session, *, of_shards: Collection[int] | None = None) -> Verdict:
        return super().verdict(session)


def store(node: ClusterNode, *, every_shard: bool = False) -> RunStore:
    guard = node.node.guard()
    if every_shard:
        guard = AllShardsGuard(guard.node_id, guard.fingerprint)
    return RunStore(node.app.db, node=node.node_id, guard=guard)


def while_held(node: ClusterNode, shard: int, write: Callable[[], T]) -> tuple[bool, T]:
    """Run ``write`` while another transaction holds shard ``shard``'s ownership row: whether
    it waited (PostgreSQL saw it blocked by the holder before it was done), and its result
    once the row is let go. However slow a loaded machine makes the write, it is either
    done while the row is held or seen blocked: no time limit decides."""
    holder = Session(node.app.db.engine)
    holder_pid = holder.execute(text("SELECT pg_backend_pid()")).scalar_one()
    holder.execute(
        select(ClusterOwnership.id).where(ClusterOwnership.shard == shard).with_for_update()
    )

    def blocked() -> bool:
        with node.app.db.engine.connect() as watcher:
            return bool(watcher.execute(BLOCKED_BY, {"holder": holder_pid}).scalar_one())

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(write)
        try:
            seen = eventually(
                lambda: "done" if future.done() else "blocked" if blocked() else None,
                60,
                "the write to be done or blocked",
            )
            waited = seen == "blocked"
        finally:
            holder.rollback()
            holder.close()
        return waited, future.result()


#: Whether a session waits for a lock the ``holder`` backend holds.
BLOCKED_BY = text(
    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE :holder = ANY(pg_blocking_pids(pid)))"
)


def other(shard: int) -> int:
    return (shard + 5) % SHARDS


def claimed(node: ClusterNode, clock: FakeClock) -> Dispatch:
    clock.advance(seconds=31)
    (dispatch,) = store(node).claim_due(clock.now).dispatches
    return dispatch


def done(node: ClusterNode) -> ExecResult:
    now = node.app.now()
    return ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)


def status_of(node: ClusterNode, run_id: int) -> str:
    with node.app.db.read() as session:
        return str(session.get_one(Run, run_id).status)


def test_a_completion_locks_its_runs_shard_only(make_node: MakeNode, clock: FakeClock) -> None:
    node, shard = node_with_one_target(make_node, JobSpec("* * * * *", "true"))
    run = claimed(node, clock)
    assert run.shard == shard

    waited, refused = while_held(
        node, other(shard), lambda: store(node).finish([(run.run_id, done(node))])
    )

    assert (waited, refused, status_of(node, run.run_id)) == (False, [], RunStatus.SUCCEEDED)


def test_a_completion_waits_for_its_runs_shards_row(make_node: MakeNode, clock: FakeClock) -> None:
    node, shard = node_with_one_target(make_node, JobSpec("* * * * *", "true"))
    run = claimed(node, clock)

    waited, refused = while_held(
        node, shard, lambda: store(node).finish([(run.run_id, done(node))])
    )

    # Held up by its own shard's row, then written once the row is let go.
    assert (waited, refused, status_of(node, run.run_id)) == (True, [], RunStatus.SUCCEEDED)


def test_negative_control_a_completion_over_every_shard_waits_for_another_shards_row(
    make_node: MakeNode, clock: FakeClock
) -> None:
    node, shard = node_with_one_target(make_node, JobSpec("* * * * *", "true"))
    run = claimed(node, clock)
    finish = store(node, every_shard=True).finish

    waited, _ = while_held(node, other(shard), lambda: finish([(run.run_id, done(node))]))

    assert waited


def test_an_interruption_and_a_retry_lock_their_runs_shard_only(
    make_node: MakeNode, clock: FakeClock
) -> None:
    node, shard = node_with_one_target(make_node, JobSpec("* * * * *", "false", retries=1))
    run = claimed(node, clock)
    now = node.app.now()

    waited_retry, retry = while_held(node, other(shard), lambda: store(node).start_retry(run, now))
    assert retry is not None
    waited_stop, _ = while_held(
        node, other(shard), lambda: store(node).interrupt([retry.run_id], now, "stopping")
    )

    assert (waited_retry, waited_stop) == (False, False)
    assert (retry.shard, retry.attempt) == (shard, 2)
    assert status_of(node, retry.run_id) == RunStatus.INTERRUPTED


def test_a_rollout_locks_the_shards_of_its_pending_rows_only(
    make_node: MakeNode, clock: FakeClock
) -> None:
    node, shard = node_with_one_target(make_node, JobSpec("* * * * *", "true", batch="1"))
    clock.advance(seconds=31)
    assert store(node).claim_due(clock.now).dispatches == []  # the row is pending

    waited_other, step = while_held(
        node, other(shard), lambda: store(node).advance_rollouts(clock.now)
    )
    assert not waited_other and [d.shard for d in step.dispatches] == [shard]


def test_negative_control_a_rollout_over_every_shard_waits_for_another_shards_row(
    make_node: MakeNode, clock: FakeClock
) -> None:
    node, shard = node_with_one_target(make_node, JobSpec("* * * * *", "true", batch="1"))
    clock.advance(seconds=31)
    assert store(node).claim_due(clock.now).dispatches == []

    waited, step = while_held(
        node, other(shard), lambda: store(node, every_shard=True).advance_rollouts(clock.now)
    )

    assert waited and [d.shard for d in step.dispatches] == [shard]
