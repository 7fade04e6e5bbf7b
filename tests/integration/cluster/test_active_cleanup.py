"""Active cleanup's bookkeeping on a real PostgreSQL: what a new owner cleans after a
takeover, which old claims it clears, and that a node which lost ownership meanwhile
clears nothing. (The cleanup itself, on a real sshd and real processes, is in
tests/integration/executors/test_generation_mark.py and tests/fault/test_fencing.py.)
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
from sqlalchemy import event, select, update

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, approve
from fixtures.sshd import SshServer
from fleetcron.app import SYSTEM
from fleetcron.core.planning import TargetCleanup
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler import cleanup
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.cluster import status as cluster
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.fields import TargetChanges
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import AuditEvent, ClusterOwnership, ExecutionClaim, Run, Target

pytestmark = [pytest.mark.postgres, pytest.mark.sshd]

MakeNode = Callable[[str], ClusterNode]


@pytest.fixture
def nodes(
    migrated: str, make_node: MakeNode, sshd: SshServer, clock: FakeClock
) -> tuple[ClusterNode, ClusterNode, ClusterNode]:
    """alpha owned the jobs and started the 09:01 runs on ``remote`` (SSH) and ``here``
    (local), then beta took over: both old claims are unfinished and their deadlines far."""
    a, b, c = make_node("alpha"), make_node("beta"), make_node("gamma")
    for node in (a, b, c):
        approve(node)
    add_remote(a, sshd)
    targets.add_target(a.app, SYSTEM, TargetSpec("here", TargetKind.LOCAL))
    jobs.add_job(a.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)
    assert len(store(a).claim_due(clock.now).dispatches) == 2
    take_over(b, "alpha")
    return a, b, c


def add_remote(node: ClusterNode, sshd: SshServer) -> None:
    targets.add_target(
        node.app,
        SYSTEM,
        TargetSpec(
            "remote",
            host=sshd.host,
            port=sshd.port,
            user=sshd.user,
            private_key=sshd.client_private_key.encode(),
            host_key=sshd.host_key_line,
        ),
        allow_same_host=True,
    )


def store(node: ClusterNode) -> RunStore:
    return RunStore(node.app.db, node=node.node_id, guard=node.node.guard())


def take_over(node: ClusterNode, old: str) -> None:
    cluster.takeover(node.app, SYSTEM, node.node, f"http://{old}.example:8080", confirm_fenced=True)


def plan_for(
    node: ClusterNode, done: frozenset[tuple[int, int]] = frozenset()
) -> cluster.CleanupPlan | None:
    me = node.identity
    return cluster.active_cleanup_plan(node.app, me.node_id, me.fingerprint, done)


def claim_states(node: ClusterNode) -> dict[str, str]:
    with node.app.db.read() as session:
        return {
            name: state
            for name, state in session.execute(
                select(Run.target_name, ExecutionClaim.state)
                .join(Run, Run.id == ExecutionClaim.run_id)
                .where(ExecutionClaim.generation == 1)
            )
        }


def test_the_new_owner_cleans_the_ssh_target_and_only_its_claim_stops_waiting(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    _, b, _ = nodes
    plan = plan_for(b)
    assert plan is not None and plan.generation == 2
    assert [t.name for t in plan.targets] == ["remote"]  # the local one is out of reach
    assert {c.target_kind for c in plan.claims} == {"ssh", "local"}
    remote = plan.targets[0].target_id

    cleared, refused = cluster.clear_cleaned_claims(
        b.app, b.node_id, b.identity.fingerprint, plan, [TargetCleanup(remote, mark=2, killed=1)]
    )
    result = cluster.finish_active_cleanup(
        b.app, plan, [TargetCleanup(remote, mark=2, killed=1)], cleared=cleared
    )

    assert (cleared, refused) == (1, None)
    assert claim_states(b) == {"remote": "cleared", "here": "revoked"}
    assert (result.cleared_claims, result.waiting_claims) == (1, 1)
    clock.advance(seconds=60)  # 09:02: the remote assignment fires, the local one waits
    assert [d.target_name for d in store(b).claim_due(clock.now).dispatches] == ["remote"]
    with b.app.db.read() as session:
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.active_cleanup")
        ).one()
    assert event.success is True
    assert event.detail["targets_cleaned"] == ["remote"]
    assert event.detail["targets_failed"] == {}
    assert (event.detail["cleared_claims"], event.detail["waiting_claims"]) == (1, 1)
    assert event.detail["killed_groups"] == 1
    # Once per shard and generation: no second plan for generation 2.
    assert {g for _, g in plan.owned} == {2}
    assert plan_for(b, done=plan.owned) is None


def test_an_unreachable_target_keeps_its_claim_and_is_audited_as_failed(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    _, b, _ = nodes
    plan = plan_for(b)
    assert plan is not None
    failed = [TargetCleanup(plan.targets[0].target_id, None, error="remote: connection refused")]

    me = b.identity
    cleared, _ = cluster.clear_cleaned_claims(b.app, me.node_id, me.fingerprint, plan, failed)
    cluster.finish_active_cleanup(b.app, plan, failed, cleared=cleared)

    assert cleared == 0
    assert claim_states(b) == {"remote": "revoked", "here": "revoked"}
    clock.advance(seconds=60)
    assert store(b).claim_due(clock.now).dispatches == []
    with b.app.db.read() as session:
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.active_cleanup")
        ).one()
    assert event.detail["targets_failed"] == {"remote": "remote: connection refused"}
    assert event.detail["waiting_claims"] == 2


def test_a_node_that_lost_ownership_during_its_cleanup_clears_nothing(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode],
) -> None:
    _, b, c = nodes
    plan = plan_for(b)
    assert plan is not None
    take_over(c, "beta")  # generation 3 while beta was still cleaning

    cleared, refused = cluster.clear_cleaned_claims(
        b.app,
        b.node_id,
        b.identity.fingerprint,
        plan,
        [TargetCleanup(plan.targets[0].target_id, mark=2)],
    )

    assert cleared == 0
    assert refused is not None and "no longer the owner at generation 2" in refused
    assert claim_states(b) == {"remote": "revoked", "here": "revoked"}
    assert plan_for(b) is None  # not the owner: nothing to clean
    later = plan_for(c)
    assert later is not None and later.generation == 3


def test_a_standby_and_an_owner_without_old_claims_plan_nothing_to_clean(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode],
) -> None:
    a, b, c = nodes
    assert plan_for(c) is None  # standby
    assert plan_for(a) is None  # fenced old owner
    plan = plan_for(b)
    assert plan is not None
    cluster.clear_cleaned_claims(
        b.app,
        b.node_id,
        b.identity.fingerprint,
        plan,
        [TargetCleanup(plan.targets[0].target_id, mark=2)],
    )
    # Only the local claim is left: it is waited for, but there is nothing to clean.
    again = plan_for(b)
    assert again is not None and again.targets == ()


def statements_of(node: ClusterNode, call: Callable[[], object]) -> tuple[object, int]:
    """What ``call`` returns, and how many statements it sent to the database."""
    sent: list[str] = []

    def count(*args: object) -> None:
        sent.append(str(args[2]))

    event.listen(node.app.db.engine, "before_cursor_execute", count)
    try:
        return call(), len(sent)
    finally:
        event.remove(node.app.db.engine, "before_cursor_execute", count)


def test_the_tick_s_check_with_nothing_fresh_reads_one_statement(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode],
) -> None:
    """Every tick asks for the plan; once the shards and generations owned are done, the
    answer comes from one read of the ownership rows naming the node, not the verdict."""
    a, b, _ = nodes
    plan = plan_for(b)
    assert plan is not None

    again, sent = statements_of(b, lambda: plan_for(b, done=plan.owned))
    assert (again, sent) == (None, 1)
    # The controls: with nothing done the verdict and the claims are read; a node that
    # owns nothing (alpha, fenced) has nothing fresh either.
    first, sent = statements_of(b, lambda: plan_for(b))
    assert first is not None and sent > 3
    assert statements_of(a, lambda: plan_for(a, done=plan.owned)) == (None, 1)
    # A new generation of its shard is fresh again (as if beta had taken it anew).
    with b.app.db.session() as session:
        session.execute(update(ClusterOwnership).values(generation=ClusterOwnership.generation + 1))
    later = plan_for(b, done=plan.owned)
    assert later is not None and {g for _, g in later.owned} == {3}


@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_the_new_owners_scheduler_cleans_once_per_generation_when_the_setting_is_on(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode], enabled: bool
) -> None:
    """The scheduler of the node that took over starts the cleanup by itself. The SSH
    target is made unreachable here (a closed port): the attempt fails at once, is
    audited, and the claim keeps waiting. (A real cleanup scans every process of the
    target user, so it runs only against a namespaced sshd: tests/fault/test_fencing.py.)"""
    _, b, _ = nodes
    with b.app.db.session() as session:
        remote = session.scalars(select(Target).where(Target.name == "remote")).one()
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            remote.port = unused.getsockname()[1]  # bound, never listened, released
    b.app.settings = b.app.settings.model_copy(update={"active_cleanup": enabled})

    async def scenario() -> Scheduler:
        scheduler = Scheduler(b.app, guard=b.node.guard(), clock=b.app.clock)
        await scheduler.start()
        assert scheduler.mark_scope == cluster.mark_scope(b.app)
        await scheduler._start_active_cleanup()
        if scheduler.cleanup.task is not None:
            await asyncio.wait_for(scheduler.cleanup.task, 30)
        await scheduler._start_active_cleanup()  # the same generation: not again
        assert scheduler.cleanup.task is None or scheduler.cleanup.task.done()
        await scheduler.shutdown()
        return scheduler

    scheduler = asyncio.run(scenario())

    with b.app.db.read() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.active_cleanup")
        ).all()
    assert claim_states(b) == {"remote": "revoked", "here": "revoked"}
    if not enabled:
        assert events == [] and scheduler.cleanup.results == []
        return
    assert len(events) == 1 and len(scheduler.cleanup.results) == 1
    assert list(events[0].detail["targets_failed"]) == ["remote"]
    assert "connection refused" in events[0].detail["targets_failed"]["remote"]
    assert events[0].detail["cleared_claims"] == 0


@pytest.mark.parametrize("hold", [True, False], ids=["held", "control-not-held"])
def test_while_a_targets_cleanup_is_under_way_its_slot_stays_undecided(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode],
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    hold: bool,
) -> None:
    """Deciding the slot during the cleanup would record it skipped (its old claim lives
    past the misfire grace) a moment before the cleanup may clear that claim. Here the
    target accepts connections and never answers, so the cleanup stays under way for as
    long as the test looks (its time limit is far longer than any tick, however loaded the
    machine). The target then resets the connection: the cleanup fails, and only then is
    the slot decided, by the usual rule (skipped, waiting)."""
    _, b, _ = nodes
    monkeypatch.setattr(cleanup, "CLEANUP_TIMEOUT_S", 120.0)
    if not hold:  # the negative control: the rule switched off, the slot is decided at once
        monkeypatch.setattr(cleanup, "shards_held_for_cleanup", lambda *_: frozenset())
    with socket.create_server(("127.0.0.1", 0)) as silent:
        with b.app.db.session() as session:
            remote = session.scalars(select(Target).where(Target.name == "remote")).one()
            remote.port = silent.getsockname()[1]

        def slot_0902(target: str) -> list[str]:
            with b.app.db.read() as session:
                return [
                    f"{r.status}: {r.reason}"
                    for r in session.scalars(
                        select(Run).where(Run.target_name == target, Run.generation.is_(None))
                    )
                ]

        async def scenario() -> None:
            scheduler = Scheduler(b.app, guard=b.node.guard(), clock=clock)
            await scheduler.start()
            clock.advance(seconds=60)  # 09:02 is due on both targets
            await scheduler.tick()
            assert scheduler.cleanup.task is not None and not scheduler.cleanup.task.done()
            if not hold:
                assert [s.split(":")[0] for s in slot_0902("remote")] == ["skipped"]
                await scheduler.shutdown()
                return
            assert slot_0902("remote") == []  # left due while its target is being cleaned
            assert [s.split(":")[0] for s in slot_0902("here")] == ["skipped"]
            silent.close()  # the connection waiting in its backlog is reset
            await asyncio.wait_for(scheduler.cleanup.task, 30)
            await scheduler.tick()
            assert [s.split(":")[0] for s in slot_0902("remote")] == ["skipped"]
            assert "waiting for the previous owner" in slot_0902("remote")[0]
            await scheduler.shutdown()

        asyncio.run(scenario())


def test_the_plan_reaches_a_target_behind_a_jump_host_through_its_chain(
    nodes: tuple[ClusterNode, ClusterNode, ClusterNode], bastion: SshServer
) -> None:
    """The plan hands the cleanup the target's chain of jump hosts, as the run path does
    (the cleanup through it, on real sshds: test_generation_mark.py)."""
    _, b, _ = nodes
    targets.add_target(
        b.app,
        SYSTEM,
        bastion.spec("b1", kind=TargetKind.JUMP, host_key=bastion.host_key_line),
        verify=False,
    )
    targets.edit_target(b.app, SYSTEM, "remote", TargetChanges(via="b1"), verify=False)
    plan = plan_for(b)
    assert plan is not None
    [remote] = plan.targets
    assert remote.name == "remote" and remote.connection.host_key is not None
    assert [(hop.name, hop.kind, hop.port) for hop in remote.connection.via] == [
        ("b1", "jump", bastion.port)
    ]
    assert remote.connection.via[0].host_key == bastion.host_key_line


def test_with_shards_each_target_is_cleaned_at_its_own_shards_generation(
    migrated: str, make_node: Callable[..., ClusterNode], sshd: SshServer, clock: FakeClock
) -> None:
    """Four shards; after alpha claimed, another shard than the target's moved on once,
    then beta took over: the target's shard is at 2, the other at 3. The target is cleaned
    at 2 under its shard's mark, and a mark of 2 clears its claim (measured against the
    highest generation, 3, it would not; and a mark of 3 would refuse its shard's runs)."""
    a, b = make_node("alpha", shards=4), make_node("beta", shards=4)
    for node in (a, b):
        approve(node)
    add_remote(a, sshd)
    jobs.add_job(a.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)
    (run,) = store(a).claim_due(clock.now).dispatches
    other = (run.shard + 1) % 4
    with a.app.db.session() as session:
        session.execute(
            update(ClusterOwnership)
            .where(ClusterOwnership.shard == other)
            .values(generation=ClusterOwnership.generation + 1)
        )
    take_over(b, "alpha")

    plan = plan_for(b)
    assert plan is not None and (plan.generation, plan.shards) == (3, 4)
    (target,) = plan.targets
    assert (target.shard, plan.generation_of(target)) == (run.shard, 2)
    cleared, refused = cluster.clear_cleaned_claims(
        b.app, b.node_id, b.identity.fingerprint, plan, [TargetCleanup(target.target_id, mark=2)]
    )
    assert (cleared, refused) == (1, None)
