"""A rollout across a forced change of owner, on a real PostgreSQL with the real ownership
guard: the new owner continues the plan from the rows, the old owner can no longer start
anything, and no row runs twice.

The fixture clock starts at 2026-03-02 09:00:30 UTC; the job fires once, at 09:01. The
stores are driven by hand (claim, advance, finish) so the failover happens at a chosen
point: in the middle of the first wave, one run finished and one still going.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime

import pytest
from sqlalchemy import select, update

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, approve
from fleetcron.app import SYSTEM
from fleetcron.core.statuses import RunStatus
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.services.cluster import status as cluster
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.run_dispatch import Dispatch
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Run

pytestmark = pytest.mark.postgres

MakeNode = Callable[[str], ClusterNode]
NAMES = [f"box{i}" for i in range(6)]


@pytest.fixture
def pair(migrated: str, make_node: MakeNode) -> tuple[ClusterNode, ClusterNode]:
    """alpha owns the jobs; a bulk job rolled out two targets at a time on six."""
    a, b = make_node("alpha"), make_node("beta")
    approve(a)
    approve(b)
    for name in NAMES:
        targets.add_target(a.app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec("1 9 2 3 *", "reload", batch="2")
    jobs.add_job(a.app, SYSTEM, "reload", spec, bulk=True)
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    return a, b


def store(node: ClusterNode) -> RunStore:
    return RunStore(node.app.db, node=node.node_id, guard=node.node.guard())


def succeeded(at: datetime) -> ExecResult:
    return ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, at, at, 5)


def rows(node: ClusterNode) -> dict[str, Run]:
    with node.app.db.read() as session:
        return {r.target_name: r for r in session.scalars(select(Run).order_by(Run.id))}


def executions(*started: list[Dispatch]) -> Counter[tuple[str, datetime | None]]:
    """How many times each (target, slot) was handed to an executor, over every node."""
    return Counter((d.target_name, d.scheduled_for) for batch in started for d in batch)


def test_the_new_owner_continues_the_rollout_and_no_row_runs_twice(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    clock.advance(seconds=31)  # 09:01:01
    assert store(a).claim_due(clock.now).dispatches == []  # every row pending
    by_alpha = store(a).advance_rollouts(clock.now).dispatches
    assert [d.target_name for d in by_alpha] == ["box0", "box1"]
    box0 = next(d for d in by_alpha if d.target_name == "box0")
    assert store(a).finish([(box0.run_id, succeeded(clock.now))]) == []
    # alpha dies with box1 still running; beta takes over.
    cluster.takeover(
        b.app, SYSTEM, b.node, "http://alpha.example:8080", confirm_fenced=True
    )
    state = rows(b)
    assert state["box1"].status == RunStatus.FENCED
    assert all(state[n].status == RunStatus.PENDING for n in NAMES[2:])

    # The old owner, still up, cannot advance anything any more.
    clock.advance(seconds=1)
    assert store(a).advance_rollouts(clock.now).dispatches == []
    assert all(rows(b)[n].status == RunStatus.PENDING for n in NAMES[2:])

    started = [by_alpha]
    for _ in range(3):
        clock.advance(seconds=1)
        wave = store(b).advance_rollouts(clock.now).dispatches
        started.append(wave)
        store(b).finish([(d.run_id, succeeded(clock.now)) for d in wave])
    assert [sorted(d.target_name for d in wave) for wave in started[1:]] == [
        ["box2", "box3"],
        ["box4", "box5"],
        [],
    ]
    assert {d.generation for wave in started[1:] for d in wave} == {2}
    counts = executions(*started)
    assert sorted(name for name, _ in counts) == NAMES
    assert max(counts.values()) == 1
    final = rows(b)
    assert [final[n].status for n in NAMES] == [
        "succeeded", "fenced", "succeeded", "succeeded", "succeeded", "succeeded"
    ]  # fmt: skip

    # Negative control: a row that forgets it ran (set back to pending behind the store)
    # is started again, and the same checker counts it twice.
    with b.app.db.session() as session:
        session.execute(
            update(Run)
            .where(Run.target_name == "box4")
            .values(status=RunStatus.PENDING, started_at=None, finished_at=None)
        )
    clock.advance(seconds=1)
    again = store(b).advance_rollouts(clock.now).dispatches
    assert max(executions(*started, again).values()) == 2
