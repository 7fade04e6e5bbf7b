"""Two nodes of a replicated pair, each on its own PostgreSQL 18, replication both ways.

Only the owner records slots, manual runs from the standby are started by the owner once
they arrived, the coordination rows have one writer, a handoff's ownership transaction is
a safe pause while it has not arrived, and a returning node cannot rejoin before
replication from its peer runs. The clock starts at 09:00:30; the job fires every minute.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import uvicorn
from sqlalchemy import select

from fixtures.app import FakeClock
from fixtures.pg_pair import PgPair, loopback_socket, pair_settings, served, wait_for
from fleetcron.app import SYSTEM, App
from fleetcron.coordination.guard import current_verdict
from fleetcron.coordination.peer_calls import TRANSFER_PATH
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.crypto import generate_key
from fleetcron.errors import Conflict, CoordinationError, InvalidInput
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.services.cluster import pair_transfer
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.peers import approve_endpoint
from fleetcron.services.cluster.secrets import ensure_secret, rotate_secret
from fleetcron.services.cluster.status import Node
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.pair import peer as pair_peer
from fleetcron.services.pair import replication
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store import replication as repl_sql
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Assignment, ClusterNode, ClusterOwnership, ClusterSecret, Run
from fleetcron.web.app import create_app

pytestmark = pytest.mark.postgres


@dataclass
class Side:
    app: App
    node: Node

    @property
    def node_id(self) -> str:
        return self.node.identity.node_id

    def store(self, *, replicated_pair: bool = True) -> RunStore:
        guard = self.node.guard()
        guard.replicated_pair = replicated_pair
        return RunStore(self.app.db, node=self.node_id, guard=guard, clock=self.app.now)

    def runs(self) -> list[Run]:
        with self.app.db.read() as session:
            return list(session.scalars(select(Run).order_by(Run.id)))

    def ownership(self) -> tuple[str | None, int, bool]:
        with self.app.db.read() as session:
            row = session.scalars(select(ClusterOwnership)).one()
            return row.owner_node_id, row.generation, row.draining

    def verdict_kind(self) -> str:
        me = self.node.identity
        with self.app.db.read() as session:
            return current_verdict(session, me.node_id, me.fingerprint, lock=False).kind

    def has_node(self, node_id: str, state: str = "candidate") -> bool:
        with self.app.db.read() as session:
            row = session.scalar(select(ClusterNode).where(ClusterNode.node_id == node_id))
            return row is not None and row.state == state


@dataclass
class Pair:
    db: PgPair
    left: Side
    right: Side

    def subscription(self, side: str) -> str:
        rows = self.db.execute(side, "SELECT subname FROM pg_subscription")
        return str(rows[0][0])

    def set_subscription(self, side: str, enabled: bool) -> None:
        name = self.subscription(side)
        self.db.execute(side, f'ALTER SUBSCRIPTION "{name}" {"ENABLE" if enabled else "DISABLE"}')

    def pause_replication(self) -> None:
        """Both subscriptions disabled, and their apply workers gone (a worker stops
        shortly after the catalog says so: until then it may still apply)."""
        for side in ("left", "right"):
            self.set_subscription(side, False)

        def stopped(side: str) -> bool:
            return not self.db.execute(
                side, "SELECT 1 FROM pg_stat_subscription WHERE pid IS NOT NULL"
            )

        wait_for(lambda: stopped("left") and stopped("right"), what="the apply workers stopped")


def done(at: App) -> ExecResult:
    now = at.now()
    return ExecResult("succeeded", 0, EMPTY_OUTPUT, EMPTY_OUTPUT, now, now, 5)


def build_pair(
    pg_pair: PgPair,
    tmp_path: Path,
    clock: FakeClock,
    *,
    owner: bool,
    endpoints: dict[str, str] | None = None,
) -> Pair:
    key = generate_key().decode()
    apps = [
        App.open(pair_settings(pg_pair, s, tmp_path, key, **_endpoint(endpoints, s)), clock=clock)
        for s in ("left", "right")
    ]
    left, right = (Side(app, Node(app)) for app in apps)
    replication.setup(left.app, SYSTEM, pg_pair.right_url)
    wait_for(lambda: right.ownership()[1] == 0, what="the ownership row copied to the right")
    for side in (left, right):
        cluster.announce(side.app, side.node)
    wait_for(lambda: left.has_node(right.node_id), what="the right node's record on the left")
    for side in (left, right):
        cluster.approve(left.app, SYSTEM, side.node.identity)
    wait_for(lambda: right.has_node(right.node_id, "approved"), what="approvals on the right")
    ensure_secret(left.app, SYSTEM)

    def secret_on_the_right() -> bool:
        with right.app.db.read() as session:
            return session.scalar(select(ClusterSecret.id)) is not None

    wait_for(secret_on_the_right, what="the coordination secret on the right")
    targets.add_target(left.app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(left.app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    with left.app.db.read() as session:
        assignments = len(session.scalars(select(Assignment)).all())

    def arrived() -> bool:
        with right.app.db.read() as session:
            return len(session.scalars(select(Assignment)).all()) == assignments

    wait_for(arrived, what="the job on the right")
    if owner:
        cluster.request_transfer(left.app, SYSTEM, left.node_id)
        wait_for(lambda: right.ownership() == (left.node_id, 1, False), what="owner on the right")
    return Pair(pg_pair, left, right)


def _endpoint(endpoints: dict[str, str] | None, side: str) -> dict[str, object]:
    return {"endpoint": endpoints[side]} if endpoints and side in endpoints else {}


@pytest.fixture
def pair(pg_pair: PgPair, tmp_path: Path, clock: FakeClock) -> Iterator[Pair]:
    """The pair with an owner (left), both nodes served on real loopback endpoints."""
    (left_sock, left_url), (right_sock, right_url) = loopback_socket(), loopback_socket()
    endpoints = {"left": left_url, "right": right_url}
    built = build_pair(pg_pair, tmp_path, clock, owner=True, endpoints=endpoints)
    try:
        with served(built.left.app, left_sock), served(built.right.app, right_sock):
            yield built
    finally:
        built.left.app.close()
        built.right.app.close()


def test_only_the_owner_records_a_slot_and_both_databases_agree(
    pair: Pair, clock: FakeClock
) -> None:
    clock.advance(seconds=35)  # 09:01:05
    standby = pair.right.store().claim_due(clock.now)
    assert standby.dispatches == [] and standby.skipped == standby.missed == 0
    owner = pair.left.store().claim_due(clock.now)
    assert len(owner.dispatches) == 1
    run_id = owner.dispatches[0].run_id
    assert run_id % 2 == 1  # made on the first node
    assert pair.left.store().finish([(run_id, done(pair.left.app))]) == []  # none refused
    wait_for(
        lambda: [(r.id, r.status) for r in pair.right.runs()] == [(run_id, "succeeded")],
        what="the finished run on the right",
    )
    # The standby, ticking again once it has the run, records nothing either.
    assert pair.right.store().claim_due(clock.now).dispatches == []
    for side in (pair.left, pair.right):
        assert replication.status(side.app, SYSTEM).healthy


def test_the_counts_of_the_pairs_one_shard_are_compacted_by_the_owner_only(
    pair: Pair, clock: FakeClock
) -> None:
    """The pair's runs are of its one shard (0): the owner's triggers count them in that
    shard's row, which travels as a row; ten minutes later the standby's compaction writes
    nothing (two nodes folding the same minute would write the same row), the owner's
    folds it into the compacted row, which travels too: both sides exact, replication healthy."""
    from sqlalchemy.orm import Session

    from fleetcron.services.runs.count_compaction import compact_counts
    from fleetcron.store import run_counts
    from fleetcron.store.schema import RunCount

    def rows(side: Side) -> list[tuple[int, str, int]]:
        with side.app.db.read() as session:
            return [
                (r.shard, r.status, r.n)
                for r in session.query(RunCount.shard, RunCount.status, RunCount.n)
            ]

    clock.advance(seconds=35)
    [run] = pair.left.store().claim_due(clock.now).dispatches
    pair.left.store().finish([(run.run_id, done(pair.left.app))])
    wait_for(lambda: rows(pair.right) == [(0, "succeeded", 1)], what="the count on the right")
    clock.advance(minutes=10)
    assert compact_counts(pair.right.app, budget_s=1.0)
    assert rows(pair.right) == [(0, "succeeded", 1)]  # the standby left it to the owner
    with Session(pair.right.app.db.engine) as session:  # though it had a row to fold
        assert run_counts.compact(session, before=pair.right.app.now(), limit=10) == 1
        session.rollback()
    assert compact_counts(pair.left.app, budget_s=1.0)
    assert rows(pair.left) == [(-1, "succeeded", 1)]
    wait_for(lambda: rows(pair.right) == [(-1, "succeeded", 1)], what="the fold on the right")
    for side in (pair.left, pair.right):
        with side.app.db.read() as session:
            assert run_counts.stale(session) == {}
        assert replication.status(side.app, SYSTEM).healthy


def test_without_an_owner_nothing_is_recorded_and_the_shared_rule_would_stall(
    pg_pair: PgPair, tmp_path: Path, clock: FakeClock
) -> None:
    """Fail closed without an owner: in the pair neither node records the slot. The
    negative control records as a shared database does (every node writes the
    fail-closed skip): the same slot is inserted on both sides, and replication stops."""
    built = build_pair(pg_pair, tmp_path, clock, owner=False)
    try:
        clock.advance(seconds=35)
        for side in (built.left, built.right):
            result = side.store().claim_due(clock.now)
            assert result.dispatches == [] and result.skipped == 0
            assert side.runs() == []
        # Each side records the slot before the other's record could reach it (with the
        # link up, the left's record, replicated at once, would leave nothing due on the
        # right): replication paused for both claims, then resumed.
        built.pause_replication()
        for side in (built.left, built.right):
            assert side.store(replicated_pair=False).claim_due(clock.now).skipped == 1
        for name in ("left", "right"):
            built.set_subscription(name, True)

        def stalled(side: Side) -> bool:
            problems = replication.status(side.app, SYSTEM).problems
            return any("already exists" in p or "failed to apply" in p for p in problems)

        wait_for(lambda: stalled(built.left) and stalled(built.right), what="the stall")
    finally:
        built.left.app.close()
        built.right.app.close()


def test_a_run_requested_on_the_standby_is_started_by_the_owner_after_replication(
    pair: Pair,
) -> None:
    [run_id] = runs.request_run(pair.right.app, SYSTEM, "tick")
    assert run_id % 2 == 0  # made on the second node: no id the owner can make
    assert [(r.id, r.status) for r in pair.right.runs()] == [(run_id, "queued")]
    assert pair.right.store().claim_queued(pair.right.app.now()) == []
    wait_for(lambda: [r.id for r in pair.left.runs()] == [run_id], what="the request on the left")
    [dispatch] = pair.left.store().claim_queued(pair.left.app.now())
    assert dispatch.run_id == run_id
    pair.left.store().finish([(run_id, done(pair.left.app))])

    def finished_on_the_right() -> bool:
        return [(r.status, r.generation) for r in pair.right.runs()] == [("succeeded", 1)]

    wait_for(finished_on_the_right, what="the owner's run on the right")
    assert pair.right.runs()[0].node == pair.left.node_id


def test_coordination_changes_are_refused_on_the_standby(pair: Pair) -> None:
    with pytest.raises(
        Conflict, match=r"transfer: .* done on the owner, node .*\(http://127\.0\.0\.1:\d+\)"
    ):
        cluster.request_transfer(pair.right.app, SYSTEM, pair.right.node_id)
    with pytest.raises(Conflict, match=r"approve: .* done on the owner"):
        cluster.approve(pair.right.app, SYSTEM, pair.right.node.identity)
    # Operator edits too: a row edited here while the owner writes it would lose one of them.
    with pytest.raises(Conflict, match=r"target.pause: .* done on the owner"):
        targets.pause_target(pair.right.app, SYSTEM, "box")
    with pytest.raises(Conflict, match=r"cluster.rotate_secret: .* done on the owner"):
        rotate_secret(pair.right.app, SYSTEM)
    assert pair.right.ownership() == (pair.left.node_id, 1, False)


def test_a_delayed_ownership_transaction_is_a_safe_pause(pair: Pair, clock: FakeClock) -> None:
    clock.advance(seconds=35)  # 09:01:05: a run in flight on the owner
    [in_flight] = pair.left.store().claim_due(clock.now).dispatches
    result = cluster.request_transfer(pair.left.app, SYSTEM, pair.right.node_id)
    assert result.state == "pending"
    wait_for(lambda: pair.right.ownership()[2], what="draining on the right")
    pair.set_subscription("right", False)  # the ownership transaction will not arrive
    pair.left.store().finish([(in_flight.run_id, done(pair.left.app))])
    assert cluster.maintain(pair.left.app).completed_transfers == [result.id]
    assert pair.left.ownership() == (pair.right.node_id, 2, False)
    # The old owner stopped at once; the new one has not heard: nobody runs 09:02.
    clock.advance(seconds=60)  # 09:02:05
    for side in (pair.left, pair.right):
        assert side.store().claim_due(clock.now).dispatches == []
    assert pair.right.verdict_kind() == "standby" and pair.left.verdict_kind() == "standby"
    pair.set_subscription("right", True)
    wait_for(lambda: pair.right.ownership() == (pair.right.node_id, 2, False), what="arrival")
    [started] = pair.right.store().claim_due(clock.now).dispatches
    assert started.run_id % 2 == 0
    with pair.right.app.db.read() as session:
        run = session.get(Run, started.run_id)
        assert run is not None and run.generation == 2
        assert run.scheduled_for == clock.now.replace(second=0, microsecond=0)
    slots = [(r.scheduled_for, r.attempt) for r in pair.right.runs()]
    assert len(slots) == len(set(slots)) == 2


def test_takeover_on_the_survivor_and_rejoin_after_replication(
    pair: Pair, clock: FakeClock
) -> None:
    for side in ("left", "right"):
        pair.set_subscription(side, False)  # the link between the nodes is cut
    left_endpoint = pair.left.node.identity.endpoint
    with pytest.raises(InvalidInput, match=r"targets_verified|--targets-verified"):
        cluster.takeover(
            pair.right.app, SYSTEM, pair.right.node, left_endpoint, confirm_fenced=True
        )
    cluster.takeover(
        pair.right.app,
        SYSTEM,
        pair.right.node,
        left_endpoint,
        confirm_fenced=True,
        targets_verified=True,
    )
    assert pair.right.ownership() == (pair.right.node_id, 2, False)
    # The fenced old owner comes back: it has not received generation 2 yet.
    with pytest.raises(CoordinationError, match=r"rejoin refused: subscription .* disabled"):
        cluster.verify_rejoin(pair.left.app, SYSTEM, pair.left.node)
    # Replication from the peer runs again but has not delivered generation 2 yet (its
    # apply waits on a lock held here): the signed query to the peer tells.
    with psycopg.connect(pair.db.conninfo("left")) as blocker:
        blocker.execute("SELECT * FROM cluster_ownership FOR UPDATE")
        for side in ("left", "right"):
            pair.set_subscription(side, True)

        def applying() -> bool:
            return bool(
                pair.db.execute(
                    "left",
                    "SELECT 1 FROM pg_stat_subscription WHERE pid IS NOT NULL AND relid IS NULL",
                )
            )

        wait_for(applying, what="the left's apply worker")
        problems = replication.rejoin_problems(pair.left.app)
        assert any("generation 2" in p and "not received yet" in p for p in problems), problems
        blocker.rollback()
    wait_for(lambda: pair.left.ownership() == (pair.right.node_id, 2, False), what="generation 2")
    assert pair.left.verdict_kind() == "refused"  # fenced, as recorded by the takeover
    wait_for(
        lambda: not replication.rejoin_problems(pair.left.app), what="replication to be current"
    )
    verdict = cluster.verify_rejoin(pair.left.app, SYSTEM, pair.left.node)
    assert verdict.kind == "standby" and verdict.generation == 2
    clock.advance(seconds=35)
    assert pair.left.store().claim_due(clock.now).dispatches == []
    assert len(pair.right.store().claim_due(clock.now).dispatches) == 1


def test_sequences_are_checked_node_scoped_on_both_sides(pair: Pair) -> None:
    for side, parity in ((pair.left, 1), (pair.right, 0)):
        with side.app.db.engine.connect() as conn:
            states = repl_sql.sequence_state(conn, repl_sql.replicated_tables())
        assert states and {(s.increment, s.next_value % 2) for s in states} == {(2, parity)}


def test_a_peer_on_its_own_cluster_is_approved_through_its_endpoint(
    pg_pair: PgPair, tmp_path: Path, clock: FakeClock
) -> None:
    """The signed identity challenge across the pair: the peer answers with the identity of
    its own PostgreSQL cluster (a shared database would refuse a different one)."""
    key = generate_key().decode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
    left = App.open(pair_settings(pg_pair, "left", tmp_path, key), clock=clock)
    right = App.open(pair_settings(pg_pair, "right", tmp_path, key, endpoint=endpoint), clock=clock)
    server = uvicorn.Server(uvicorn.Config(create_app(right), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        replication.setup(left, SYSTEM, pg_pair.right_url)
        ensure_secret(left, SYSTEM)
        right_side = Side(right, Node(right))
        cluster.announce(right, right_side.node)
        left_side = Side(left, Node(left))
        wait_for(lambda: left_side.has_node(right_side.node_id), what="the right's record")

        def secret_on_the_right() -> bool:
            with right.db.read() as session:
                return session.scalar(select(ClusterSecret.id)) is not None

        wait_for(secret_on_the_right, what="the coordination secret on the right")
        row = approve_endpoint(left, SYSTEM, endpoint)
        assert row.state == "approved" and row.node_id == right_side.node_id
        assert right_side.node.identity.db_system_id != left_side.node.identity.db_system_id
        wait_for(lambda: right_side.has_node(right_side.node_id, "approved"), what="approval")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        left.close()
        right.close()


def test_a_transfer_asked_on_the_standby_is_prepared_by_the_owner_over_a_signed_request(
    pg_pair: PgPair, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
    built = build_pair(pg_pair, tmp_path, clock, owner=True, endpoints={"left": endpoint})
    left, right = built.left, built.right
    server = uvicorn.Server(
        uvicorn.Config(create_app(left.app), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        ensure_secret(left.app, SYSTEM)

        def secret_on_the_right() -> bool:
            with right.app.db.read() as session:
                return session.scalar(select(ClusterSecret.id)) is not None

        wait_for(secret_on_the_right, what="the coordination secret on the right")
        wait_for(lambda: server.started, what="the owner's web server")
        # The owner's answer is lost on the way back: the request reached it all the same.
        real_call = pair_peer.call

        def answer_lost(app: App, url: str, path: str, *args: object) -> object:
            answer = real_call(app, url, path, *args)  # type: ignore[arg-type]
            if path == TRANSFER_PATH:
                raise CoordinationError(f"node endpoint {url} is unreachable: connection reset")
            return answer

        monkeypatch.setattr(pair_peer, "call", answer_lost)
        built.set_subscription("right", False)  # and the owner's transaction is held back
        result = pair_transfer.request_transfer(
            right.app, SYSTEM, right.node_id, idempotency_key="handoff-1"
        )
        monkeypatch.undo()
        assert result.state == "pending" and result.to_node == right.node_id
        assert left.ownership() == (left.node_id, 1, True)  # the owner drains
        assert cluster.maintain(left.app).completed_transfers == [result.id]
        # Acknowledged by the owner (signed status query) before it arrived here.
        status = pair_transfer.transfer_status(right.app, SYSTEM, "handoff-1")
        assert (status.id, status.state, status.generation_after) == (result.id, "completed", 2)
        assert right.verdict_kind() == "standby" and right.ownership()[:2] == (left.node_id, 1)
        again = pair_transfer.request_transfer(
            right.app, SYSTEM, right.node_id, idempotency_key="handoff-1"
        )
        assert (again.id, again.state) == (result.id, "completed")
        built.set_subscription("right", True)
        wait_for(lambda: right.verdict_kind() == "owner", what="the transaction's arrival")
        assert right.ownership() == (right.node_id, 2, False)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        left.app.close()
        right.app.close()


def test_maintenance_is_left_to_the_owner(pair: Pair, clock: FakeClock) -> None:
    """A drained handoff visible on both sides is completed by the owner only: the standby's
    maintenance writes nothing, so the ownership row never has two writers."""
    clock.advance(seconds=35)
    [in_flight] = pair.left.store().claim_due(clock.now).dispatches
    result = cluster.request_transfer(pair.left.app, SYSTEM, pair.right.node_id)
    pair.left.store().finish([(in_flight.run_id, done(pair.left.app))])

    def drained_on_the_right() -> bool:
        runs_there = pair.right.runs()
        return pair.right.ownership()[2] and [r.status for r in runs_there] == ["succeeded"]

    wait_for(drained_on_the_right, what="the drained handoff on the right")
    assert cluster.maintain(pair.right.app).completed_transfers == []
    assert pair.right.ownership() == (pair.left.node_id, 1, True)
    assert cluster.maintain(pair.left.app).completed_transfers == [result.id]
    wait_for(lambda: pair.right.ownership() == (pair.right.node_id, 2, False), what="arrival")
    for side in (pair.left, pair.right):
        assert replication.status(side.app, SYSTEM).healthy
