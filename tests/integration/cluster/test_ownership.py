"""Ownership, claims and the guard on a real PostgreSQL shared by several nodes.

The fixture clock starts at 2026-03-02 09:00:30 UTC; an every-minute job is due at 09:01.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.engine import make_url

from fixtures.app import FakeClock
from fixtures.cluster import ClusterNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination.shard_rows import shard_count
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict, CoordinationError, InvalidInput, StoreError
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.services.cluster import status as cluster
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.db import application_name
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import (
    AuditEvent,
    ClusterOwnership,
    FencedWrite,
    Run,
)
from fleetcron.store.schema import (
    ClusterNode as NodeRow,
)

pytestmark = pytest.mark.postgres

MakeNode = Callable[[str], ClusterNode]


@pytest.fixture
def pair(migrated: str, make_node: MakeNode) -> tuple[ClusterNode, ClusterNode]:
    a, b = make_node("alpha"), make_node("beta")
    approve(a)
    approve(b)
    targets.add_target(a.app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(a.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    return a, b


def store(node: ClusterNode) -> RunStore:
    return RunStore(node.app.db, node=node.node_id, guard=node.node.guard())


def result_at(node: ClusterNode) -> ExecResult:
    now = node.app.now()
    return ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)


def runs(node: ClusterNode) -> list[Run]:
    with node.app.db.read() as session:
        return list(session.scalars(select(Run).order_by(Run.scheduled_for, Run.id)))


def test_a_new_node_is_a_candidate_and_may_not_run_jobs(migrated: str, make_node: MakeNode) -> None:
    a = make_node("alpha")

    status = cluster.status(a.app, SYSTEM, a.node)

    assert [n.state for n in status.nodes] == ["candidate"]
    assert status.verdict is not None and status.verdict.kind == "refused"


def test_with_no_owner_chosen_due_slots_are_skipped_with_the_reason(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    clock.advance(seconds=31)

    claimed = store(a).claim_due(clock.now)

    assert claimed.dispatches == []
    [run] = runs(a)
    assert run.status == "skipped"
    assert "no owner has been chosen" in (run.reason or "")


def test_the_first_transfer_makes_the_owner_at_generation_one(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    a, _ = pair

    result = cluster.request_transfer(a.app, SYSTEM, a.node_id)

    assert (result.kind, result.state, result.generation_after) == ("initial", "completed", 1)


def test_only_the_owner_claims_and_its_runs_carry_a_fencing_token(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)

    on_standby = store(b).claim_due(clock.now)
    on_owner = store(a).claim_due(clock.now)

    assert on_standby.dispatches == []
    [dispatch] = on_owner.dispatches
    assert dispatch.generation == 1 and dispatch.claim_id is not None
    assert [r.status for r in runs(a)] == ["running"]


def test_a_standby_records_nothing_for_slots_the_owner_will_run(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)

    store(b).claim_due(clock.now)

    assert runs(b) == []


def test_a_completion_after_a_forced_takeover_is_refused_and_recorded(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)
    [dispatch] = store(a).claim_due(clock.now).dispatches

    taken = cluster.takeover(
        b.app, SYSTEM, b.node, "http://alpha.example:8080/", confirm_fenced=True
    )
    refused = store(a).finish([(dispatch.run_id, result_at(a))])

    assert taken.generation_after == 2
    assert refused == [dispatch.run_id]
    [run] = runs(a)
    assert run.status == "fenced"
    assert "forced takeover" in (run.reason or "")
    with a.app.db.read() as session:
        assert session.scalar(select(FencedWrite.run_id)) == dispatch.run_id


def test_a_fenced_old_owner_may_not_claim_until_it_passes_verify_rejoin(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    cluster.takeover(b.app, SYSTEM, b.node, "http://alpha.example:8080", confirm_fenced=True)

    status = cluster.status(a.app, SYSTEM, a.node)

    assert status.verdict is not None and status.verdict.kind == "refused"
    assert "verify-rejoin" in status.verdict.reason


def test_a_transfer_to_a_fenced_node_is_refused(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    cluster.takeover(b.app, SYSTEM, b.node, "http://alpha.example:8080", confirm_fenced=True)

    with pytest.raises(InvalidInput, match="fenced"):
        cluster.request_transfer(b.app, SYSTEM, a.node_id)

    verdict = cluster.verify_rejoin(a.app, SYSTEM, a.node)

    assert verdict.kind == "standby"
    assert cluster.request_transfer(b.app, SYSTEM, a.node_id).state == "pending"


def test_takeover_needs_the_owners_exact_endpoint_and_the_fencing_confirmation(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)

    with pytest.raises(InvalidInput, match="not the owner's endpoint"):
        cluster.takeover(b.app, SYSTEM, b.node, "http://alpha.example:9090", confirm_fenced=True)
    with pytest.raises(InvalidInput, match="--confirm-fenced"):
        cluster.takeover(b.app, SYSTEM, b.node, "http://alpha.example:8080", confirm_fenced=False)


def test_a_handoff_drains_then_completes_when_the_owners_claims_finish(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)
    [dispatch] = store(a).claim_due(clock.now).dispatches

    pending = cluster.request_transfer(a.app, SYSTEM, b.node_id, idempotency_key="move-1")
    clock.advance(minutes=1)
    no_new_claims = store(a).claim_due(clock.now)
    still_draining = cluster.maintain(a.app)
    store(a).finish([(dispatch.run_id, result_at(a))])
    done = cluster.maintain(a.app)

    assert pending.state == "pending"
    assert no_new_claims.dispatches == []
    assert still_draining.completed_transfers == []
    assert done.completed_transfers == [pending.id]
    again = cluster.request_transfer(a.app, SYSTEM, b.node_id, idempotency_key="move-1")
    assert (again.state, again.generation_after) == ("completed", 2)
    assert [r.status for r in runs(a)] == ["succeeded"]
    assert len(store(b).claim_due(clock.now).dispatches) == 1


def test_maintenance_expires_a_claim_past_its_deadline_and_fences_the_run(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)
    [dispatch] = store(a).claim_due(clock.now).dispatches
    with a.app.db.session() as session:
        session.execute(
            text("UPDATE execution_claims SET deadline_at = created_at - interval '1 second'")
        )

    result = cluster.maintain(a.app)
    refused = store(a).finish([(dispatch.run_id, result_at(a))])

    assert result.expired_claims == 1
    assert refused == [dispatch.run_id]
    assert [r.status for r in runs(a)] == ["fenced"]


def test_a_node_whose_fingerprint_changed_may_not_claim(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    with a.app.db.session() as session:
        session.execute(
            update(NodeRow).where(NodeRow.node_id == a.node_id).values(fingerprint="0" * 64)
        )
    clock.advance(seconds=31)

    assert store(a).claim_due(clock.now).dispatches == []
    assert runs(a) == []


def test_two_ownership_rows_fail_closed_and_say_why(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    with a.app.db.session() as session:
        shards = shard_count(session)
        # One row per shard is unique in the schema; a row for a shard beyond the count
        # is the extra row the guard must refuse.
        session.add(
            ClusterOwnership(
                shard=shards,
                owner_node_id=a.node_id,
                generation=1,
                draining=False,
                updated_at=clock.now,
            )
        )
    clock.advance(seconds=31)

    store(a).claim_due(clock.now)

    [run] = runs(a)
    assert run.status == "skipped"
    assert f"{shards + 1} ownership rows" in (run.reason or "")


def test_an_owner_that_was_retired_is_invalid_state(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    with a.app.db.session() as session:
        session.execute(update(NodeRow).where(NodeRow.node_id == a.node_id).values(state="retired"))
    clock.advance(seconds=31)

    store(b).claim_due(clock.now)

    [run] = runs(b)
    assert run.status == "skipped"
    assert "retired" in (run.reason or "")


def test_the_owner_cannot_be_retired(pair: tuple[ClusterNode, ClusterNode]) -> None:
    a, _ = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)

    with pytest.raises(Conflict, match="owns the jobs"):
        cluster.retire(a.app, SYSTEM, a.node_id)


def test_verify_rejoin_fails_while_the_node_still_has_live_claims(
    pair: tuple[ClusterNode, ClusterNode], clock: FakeClock
) -> None:
    a, _ = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    clock.advance(seconds=31)
    store(a).claim_due(clock.now)

    with pytest.raises(CoordinationError, match="live claim"):
        cluster.verify_rejoin(a.app, SYSTEM, a.node)


def test_standalone_status_is_one_line() -> None:
    status = cluster.ClusterStatus("standalone", None, None, 0, False, None, None, [], {})

    assert status.one_line() == "Standalone: this node runs every job"


def _holding_the_rows(database_url: str, node_id: str) -> psycopg.Connection[tuple[object, ...]]:
    """A session named as ``node_id``'s, inside a transaction that holds every ownership
    row: what a process of that node paused mid-transaction (SIGSTOP, a frozen VM) leaves."""
    url = make_url(database_url)
    conn = psycopg.connect(
        host=url.host,
        port=url.port,
        user=url.username,
        dbname=url.database,
        application_name=application_name(node_id, "runs"),
    )
    conn.execute("SELECT 1 FROM cluster_ownership FOR UPDATE")
    return conn


def test_a_forced_takeover_ends_the_fenced_owners_session_a_pause_left_holding_the_rows(
    pair: tuple[ClusterNode, ClusterNode], migrated: str
) -> None:
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    holder = _holding_the_rows(migrated, a.node_id)
    try:
        taken = cluster.takeover(
            b.app, SYSTEM, b.node, "http://alpha.example:8080", confirm_fenced=True
        )
        assert taken.generation_after == 2
        with pytest.raises(psycopg.OperationalError):
            holder.execute("SELECT 1")
    finally:
        holder.close()
    with b.app.db.read() as session:
        detail = session.scalars(
            select(AuditEvent.detail).where(AuditEvent.action == "cluster.takeover")
        ).one()
    assert detail["ended_sessions"] == 1


def test_negative_control_a_session_of_another_node_holds_the_takeover_to_its_lock_timeout(
    pair: tuple[ClusterNode, ClusterNode], migrated: str
) -> None:
    """Only the fenced owner's sessions are ended: rows held by anyone else still stop the
    takeover, at its lock timeout (a quarter of the unleased bound, 7.5 s)."""
    a, b = pair
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    holder = _holding_the_rows(migrated, "someone-else")
    try:
        with pytest.raises(StoreError, match="lock timeout"):
            cluster.takeover(
                b.app, SYSTEM, b.node, "http://alpha.example:8080", confirm_fenced=True
            )
        assert holder.execute("SELECT 1").fetchone() == (1,)
    finally:
        holder.close()
