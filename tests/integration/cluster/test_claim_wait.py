"""A new owner waits for the old owner's claims, per shard, on a real PostgreSQL; the
watchdog budget every run gets from its claim.

The fixture clock starts at 2026-03-02 09:00:30 UTC; an every-minute job is due at 09:01.
Claims live 300 s (the default timeout) + 60 s (margin) by the database clock, so an old
claim made in a test is still live when the new owner plans the next slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypedDict, Unpack

import pytest
from sqlalchemy import event, func, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination import shard_rows
from fleetcron.core.ownership import CLOCK_RATE_TOLERANCE, START_LATENCY_S
from fleetcron.core.planning import OldClaim
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import StoreError
from fleetcron.executors.base import EMPTY_OUTPUT, NOT_STARTED_DEADLINE, ExecRequest, ExecResult
from fleetcron.scheduler.service import SELF_FENCED, Scheduler
from fleetcron.services.cluster import lease as lease_module
from fleetcron.services.cluster import status as cluster
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.run_dispatch import Dispatch
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import AuditEvent, ClusterOwnership, ExecutionClaim, Run, Target
from waiting import eventually_async

pytestmark = pytest.mark.postgres

MakeNode = Callable[[str], ClusterNode]
_MS = timedelta(milliseconds=1)


@pytest.fixture
def pair(migrated: str, make_node: MakeNode) -> tuple[ClusterNode, ClusterNode]:
    """alpha owns the jobs; a bulk job on ``busy`` and ``idle``; alpha started both runs of
    the 09:01 slot and finished the one on ``idle`` (its claim is done)."""
    a, b = make_node("alpha"), make_node("beta")
    approve(a)
    approve(b)
    targets.add_target(a.app, SYSTEM, TargetSpec("busy", TargetKind.LOCAL))
    targets.add_target(a.app, SYSTEM, TargetSpec("idle", TargetKind.LOCAL))
    jobs.add_job(a.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    return a, b


class GuardSwitches(TypedDict, total=False):
    """The switches of a node's guard a test may turn (see ``CoordinatedGuard``)."""

    unguarded: bool
    wait_for_old_claims: bool


def store(node: ClusterNode, **guard: Unpack[GuardSwitches]) -> RunStore:
    return RunStore(node.app.db, node=node.node_id, guard=replace(node.node.guard(), **guard))


def done(node: ClusterNode) -> ExecResult:
    now = node.app.now()
    return ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)


def alpha_runs_then_dies(a: ClusterNode, clock: FakeClock) -> None:
    clock.advance(seconds=31)
    dispatches = store(a).claim_due(clock.now).dispatches
    idle = [d for d in dispatches if d.target_name == "idle"]
    assert len(dispatches) == 2 and len(idle) == 1
    assert store(a).finish([(idle[0].run_id, done(a))]) == []


def take_over(b: ClusterNode, *, targets_verified: bool = False) -> None:
    cluster.takeover(
        b.app,
        SYSTEM,
        b.node,
        "http://alpha.example:8080",
        confirm_fenced=True,
        targets_verified=targets_verified,
    )


def slot_runs(node: ClusterNode, target: str) -> list[Run]:
    with node.app.db.read() as session:
        return list(session.scalars(select(Run).where(Run.target_name == target).order_by(Run.id)))


def test_after_a_takeover_the_busy_assignment_waits_and_the_idle_one_starts_at_once(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b)
    clock.advance(seconds=60)  # 09:02

    claimed = store(b).claim_due(clock.now)

    assert [d.target_name for d in claimed.dispatches] == ["idle"]
    old, skipped = slot_runs(b, "busy")
    assert old.status == "fenced" and old.generation == 1
    assert skipped.status == "skipped"
    assert old.deadline_at is not None
    assert skipped.reason == (
        f"waiting for the previous owner: claim {old.claim_id} of run {old.id} (node "
        f"{a.node_id}, generation 1) is live until {old.deadline_at.isoformat()}, past this "
        "slot's misfire grace"
    )


def same_shard(node: ClusterNode, *names: str) -> int:
    """Put the named targets in the first one's shard (as the hash could have)."""
    with node.app.db.session() as session:
        found = session.scalars(select(Target).where(Target.name.in_(names))).all()
        shard = next(t.shard for t in found if t.name == names[0])
        for target in found:
            target.shard = shard
    return shard


def test_in_one_shard_the_idle_assignment_waits_too_while_an_old_claim_lives(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    """At most one generation executes in a shard at any moment: the old owner may still be
    executing ``busy``, so nothing of that shard starts, ``idle`` included (its slot is
    recorded skipped, naming busy's claim). The test above, with the two targets in
    different shards, is the control: there ``idle`` starts at once."""
    a, b = pair
    same_shard(a, "busy", "idle")
    alpha_runs_then_dies(a, clock)
    take_over(b)
    clock.advance(seconds=60)  # 09:02

    claimed = store(b).claim_due(clock.now)

    assert claimed.dispatches == []
    [old, _] = slot_runs(b, "busy")
    [_, skipped] = slot_runs(b, "idle")
    assert skipped.status == "skipped" and skipped.reason is not None
    assert skipped.reason.startswith(
        f"waiting for the previous owner: claim {old.claim_id} of run {old.id} "
    )


def test_an_old_claim_blocks_until_its_deadline_by_the_new_claims_own_time(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    """A transaction reads its claim time, then looks for old claims: an old deadline that
    falls between the two readings still blocks, or the new claim would be recorded as made
    before the deadline it waited for."""
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b)
    with b.app.db.session() as session:
        deadline = session.scalar(select(func.clock_timestamp() - text("interval '1 second'")))
        assert isinstance(deadline, datetime)
        session.execute(
            update(ExecutionClaim)
            .where(ExecutionClaim.generation == 1, ExecutionClaim.state != "done")
            .values(deadline_at=deadline)
        )
    [busy] = [r.assignment_id for r in slot_runs(b, "busy")]

    def old_claims(claimed_at: datetime | None) -> dict[int, list[OldClaim]]:
        guard = b.node.guard()  # a fresh one: a guard remembers finding no old claim
        with b.app.db.session() as session:
            return guard.old_claims(session, guard.verdict(session), [busy], claimed_at=claimed_at)

    earlier = old_claims(deadline - _MS)
    at_deadline = old_claims(deadline)
    without = old_claims(None)
    assert busy in earlier, "an old deadline after the new claims' time did not block"
    [blocking] = earlier[busy]
    assert blocking.deadline_at == deadline and blocking.remaining_s > 0
    # Controls: a claim time at the deadline, or none (the database clock now, a second
    # past it), finds nothing to wait for.
    assert at_deadline == {} and without == {}


def test_a_slot_waits_for_an_old_claim_ending_within_its_grace_then_fires_late(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b)
    with b.app.db.session() as session:
        session.execute(
            text(
                "UPDATE execution_claims SET deadline_at = clock_timestamp() + interval '1 second'"
                " WHERE state = 'revoked'"
            )
        )
    clock.advance(seconds=60)  # 09:02, the old claim ends well within the 60 s grace

    waiting = store(b).claim_due(clock.now)
    assert [d.target_name for d in waiting.dispatches] == ["idle"]
    assert len(waiting.held) == 1
    assert [r.status for r in slot_runs(b, "busy")] == ["fenced"]  # nothing recorded yet

    time.sleep(1.2)
    clock.advance(seconds=2)
    late = store(b).claim_due(clock.now)

    [dispatch] = late.dispatches
    assert (dispatch.target_name, dispatch.scheduled_for) == ("busy", waiting_slot(clock))
    assert [r.status for r in slot_runs(b, "busy")] == ["fenced", "running"]


def waiting_slot(clock: FakeClock) -> datetime:
    return clock.now.replace(second=0, microsecond=0)


def test_negative_control_with_the_wait_switched_off_the_busy_assignment_starts(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b)
    clock.advance(seconds=60)

    claimed = store(b, wait_for_old_claims=False).claim_due(clock.now)

    assert sorted(d.target_name for d in claimed.dispatches) == ["busy", "idle"]


def test_a_takeover_with_targets_verified_clears_the_old_claims_and_is_audited(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b, targets_verified=True)
    clock.advance(seconds=60)

    claimed = store(b).claim_due(clock.now)

    assert sorted(d.target_name for d in claimed.dispatches) == ["busy", "idle"]
    with b.app.db.read() as session:
        states = sorted(
            session.scalars(select(ExecutionClaim.state).where(ExecutionClaim.generation == 1))
        )
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.takeover")
        ).one()
    assert states == ["cleared", "done"]
    assert event.detail["targets_verified"] is True
    assert event.detail["cleared_claims"] == 1
    assert event.detail["waiting_claims"] == 0


def test_a_takeover_audits_what_the_new_owner_waits_for(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b)
    with b.app.db.read() as session:
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.takeover")
        ).one()
        deadline = session.scalar(
            select(ExecutionClaim.deadline_at).where(ExecutionClaim.state == "revoked")
        )
    assert deadline is not None
    assert event.detail["targets_verified"] is False
    assert event.detail["waiting_claims"] == 1
    assert event.detail["waiting_until"] == deadline.isoformat()


def test_status_says_what_the_new_owner_waits_for(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    alpha_runs_then_dies(a, clock)
    assert cluster.status(b.app, SYSTEM, b.node).waiting_claims == 0
    take_over(b)

    status = cluster.status(b.app, SYSTEM, b.node)

    [old] = [r for r in slot_runs(b, "busy") if r.generation == 1]
    assert old.deadline_at is not None
    assert (status.waiting_claims, status.waiting_until) == (1, old.deadline_at)
    assert status.one_line().endswith(
        "; waiting for 1 claim(s) of the previous owner until "
        f"{old.deadline_at.isoformat(timespec='seconds')}"
    )


def queued_after_takeover(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> tuple[ClusterNode, list[int]]:
    """alpha dies with its run on ``busy`` claimed, beta takes over, and a "run now" of
    the job is queued on beta: beta and the queued runs."""
    a, b = pair
    alpha_runs_then_dies(a, clock)
    take_over(b)
    return b, runs.request_run(b.app, SYSTEM, "tick")


def test_a_queued_manual_run_waits_for_the_old_claim_on_its_assignment(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    b, queued = queued_after_takeover(pair, clock)

    started = store(b).claim_queued(clock.now)

    assert [d.target_name for d in started] == ["idle"]
    with b.app.db.read() as session:
        statuses = {
            r.target_name: r.status for r in session.scalars(select(Run).where(Run.id.in_(queued)))
        }
    assert statuses == {"busy": "queued", "idle": "running"}


def test_a_run_left_queued_behind_an_old_claim_rewrites_no_assignment_each_tick(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    # Queued runs do not count in the newest-run columns (store/run_newest.py): while the
    # new owner waits for the old claim, its ticks neither lock nor rewrite the assignment.
    b, _ = queued_after_takeover(pair, clock)
    assert [d.target_name for d in store(b).claim_queued(clock.now)] == ["idle"]
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(" ".join(statement.split()))

    event.listen(b.app.db.engine, "before_cursor_execute", seen)
    try:
        again = [store(b).claim_queued(clock.now) for _ in range(3)]
    finally:
        event.remove(b.app.db.engine, "before_cursor_execute", seen)

    assert again == [[], [], []]
    assert any("FROM runs" in s for s in statements), statements  # it did look
    touching = [s for s in statements if "assignments" in s and "FOR UPDATE" in s]
    assert touching == [], touching
    assert not [s for s in statements if s.startswith("UPDATE assignments")], statements


def test_every_run_gets_the_claims_remaining_life_as_its_watchdog_budget(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    clock.advance(seconds=31)
    dispatch = store(a).claim_due(clock.now).dispatches[0]
    scheduler = Scheduler(a.app, guard=a.node.guard(), clock=clock)

    request = scheduler._request(dispatch)

    assert isinstance(request, ExecRequest)
    assert dispatch.deadline_at is not None and dispatch.claimed_at is not None
    life = (dispatch.deadline_at - dispatch.claimed_at).total_seconds()
    assert life == 300 + 60
    elapsed = time.monotonic() - dispatch.claimed_monotonic
    assert request.watchdog_s is not None
    assert life * (1 - 2 * CLOCK_RATE_TOLERANCE) - START_LATENCY_S - elapsed <= (request.watchdog_s)
    assert request.watchdog_s <= life * (1 - 2 * CLOCK_RATE_TOLERANCE) - START_LATENCY_S
    assert (request.run_id, request.generation) == (dispatch.run_id, 1)
    # The claim deadline stored with the claim is the dispatch's.
    with a.app.db.read() as session:
        assert (
            session.scalar(
                select(ExecutionClaim.deadline_at).where(ExecutionClaim.id == dispatch.claim_id)
            )
            == dispatch.deadline_at
        )


def test_a_run_whose_budget_is_gone_before_it_starts_is_not_started(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    clock.advance(seconds=31)
    dispatch = store(a).claim_due(clock.now).dispatches[0]
    # As if it had waited 359 s for a concurrency slot since its claim.
    late = replace(dispatch, claimed_monotonic=dispatch.claimed_monotonic - 359)
    scheduler = Scheduler(a.app, guard=a.node.guard(), clock=clock)

    result = asyncio.run(scheduler._run_on_target(late))

    assert result.status == "connect_error"
    assert result.error is not None and NOT_STARTED_DEADLINE in result.error
    assert dispatch.deadline_at is not None
    assert dispatch.deadline_at.isoformat() in result.error


def test_a_scheduler_that_may_no_longer_execute_kills_its_runs_and_records_them(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock, tmp_path: Path
) -> None:
    a, _ = pair
    pids = tmp_path / "pids"
    jobs.add_job(
        a.app,
        SYSTEM,
        "long",
        JobSpec("* * * * *", f"echo $$ >> {pids}; sleep 30", timeout_s=60),
        bulk=True,
    )
    holds = [True]
    clock.advance(seconds=31)
    idle = Dispatch(0, 0, 0, "probe", 0, "probe", "local", None, None, None, command="true")

    async def scenario() -> Scheduler:
        scheduler = Scheduler(
            a.app, guard=a.node.guard(), clock=clock, may_execute=lambda: holds[0]
        )
        await scheduler.start()
        await scheduler.tick()
        await eventually_async(
            lambda: pids.exists() and len(pids.read_text().split()) == 2,
            10,
            "both long commands to start",
            interval=0.05,
        )
        holds[0] = False  # the lease was not renewed in time
        await eventually_async(
            lambda: not scheduler.running, 30, "the self-fenced runs to end", interval=0.05
        )
        assert not scheduler.running
        assert scheduler._request(idle) == f"not started: {SELF_FENCED}"
        await asyncio.gather(*scheduler._recording)
        await scheduler.shutdown()
        return scheduler

    scheduler = asyncio.run(scenario())

    assert scheduler.self_fenced >= 2
    for pid in pids.read_text().split():
        assert not alive(int(pid)), f"command {pid} survived the self-fencing"
    with a.app.db.read() as session:
        long_runs = session.scalars(select(Run).where(Run.job_name == "long")).all()
    assert [r.status for r in long_runs] == ["interrupted", "interrupted"]
    assert all(SELF_FENCED in (r.reason or "") for r in long_runs)
    with a.app.db.read() as session:
        claim_states = session.scalars(
            select(ExecutionClaim.state).where(ExecutionClaim.run_id.in_([r.id for r in long_runs]))
        ).all()
    # Only the deadline proves a command gone (an SSH kill can fail unseen): claims stay live.
    assert claim_states == ["live", "live"]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


class ShortLease(cluster.Lease):
    """A 3 s lease on nodes whose settings have none."""

    @property
    def duration(self) -> float:
        return 3.0


def test_a_draining_owner_keeps_its_lease_so_it_does_not_fence_itself_during_a_handoff(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    a, b = pair
    lease = ShortLease(a.app, a.node)
    assert not lease.holds()
    assert lease.step() == "renewed" and lease.holds()
    cluster.request_transfer(a.app, SYSTEM, b.node_id, idempotency_key="handoff")
    # 2.5 s later, the lease about to expire: the next renewal must happen while draining.
    assert lease._renewed_at is not None
    lease._renewed_at -= 2.5
    assert not lease.holds()
    with a.app.db.session() as session:
        session.execute(text("UPDATE cluster_ownership SET lease_expires_at = clock_timestamp()"))

    assert lease.step() == "draining"
    assert lease.holds()
    with a.app.db.read() as session:
        shards = session.scalars(select(ClusterOwnership)).all()
        now = session.execute(select(func.clock_timestamp())).scalar_one()
    for ownership in shards:  # every shard's row, renewed by one statement
        assert ownership.draining
        assert ownership.lease_expires_at is not None and ownership.lease_expires_at > now


def test_a_renewal_whose_commit_fails_does_not_count_so_the_owner_fences_itself_in_time(
    pair: tuple[ClusterNode, ClusterNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link to PostgreSQL cut between the lease's update and its commit: the lease by
    the database clock is the previous renewal's, and the node must count from that one,
    not from the renewal that never committed."""
    a, _b = pair
    lease = ShortLease(a.app, a.node)
    assert lease.step() == "renewed"
    assert lease._renewed_at is not None
    lease._renewed_at -= 2.5  # the last committed renewal, 2.5 s ago: fenced by now
    assert not lease.holds()
    with a.app.db.read() as session:
        before = session.scalars(
            select(ClusterOwnership.lease_expires_at).order_by(ClusterOwnership.shard)
        ).all()

    original = shard_rows.renew_leases

    def renew_then_lose_the_commit(session: Session, node_id: str, s: float) -> bool | None:
        renewed = original(session, node_id, s)

        def cut(_session: Session) -> None:
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection"))

        event.listen(session, "before_commit", cut, once=True)
        return renewed

    monkeypatch.setattr(lease_module, "renew_leases", renew_then_lose_the_commit)
    with pytest.raises(StoreError, match="server closed the connection"):
        lease.step()
    assert not lease.holds()
    with a.app.db.read() as session:
        assert (
            session.scalars(
                select(ClusterOwnership.lease_expires_at).order_by(ClusterOwnership.shard)
            ).all()
            == before
        )

    monkeypatch.undo()
    assert lease.step() == "renewed" and lease.holds()


def test_a_standby_takes_over_an_expired_lease_and_audits_the_claims_it_waits_for(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    assert ShortLease(a.app, a.node).step() == "renewed"
    alpha_runs_then_dies(a, clock)
    standby = ShortLease(b.app, b.node)
    assert standby.step() == "standby"
    with b.app.db.session() as session:
        session.execute(text("UPDATE cluster_ownership SET lease_expires_at = clock_timestamp()"))

    assert standby.step() == "took over"

    with b.app.db.read() as session:
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.failover")
        ).one()
    assert event.detail["waiting_claims"] == 1
    assert standby.holds()
    clock.advance(seconds=60)
    assert [d.target_name for d in store(b).claim_due(clock.now).dispatches] == ["idle"]
