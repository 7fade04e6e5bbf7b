"""A node frozen inside a run write (SIGSTOP, a suspended VM, a cut link) cannot hold the
ownership lock for good: every session of a node lets PostgreSQL end it once it has sat
idle in a transaction for half the lease (``store.db.session_bounds``), so a takeover gets
the lock and the frozen write is rolled back. The control holds the same lock in a session
without those bounds: the takeover then waits until its own lock timeout gives up."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from fixtures.cluster import ClusterNode, approve
from fleetcron.app import SYSTEM
from fleetcron.coordination.ownership_change import lock_ownership
from fleetcron.services.cluster import status as cluster
from fleetcron.store.db import Database, application_name, session_bounds
from fleetcron.store.schema import ClusterOwnership

MakeNode = Callable[[str], ClusterNode]
#: How long the taker waits for the lock before giving up (the control's failure).
TAKER_LOCK_TIMEOUT_S = 8


def take_the_lock(node: ClusterNode) -> str:
    """What a takeover does first: lock the ownership row; returns the owner it saw."""
    with Session(node.app.db.engine) as session, session.begin():
        session.execute(text(f"SET LOCAL lock_timeout = '{TAKER_LOCK_TIMEOUT_S}s'"))
        return str(lock_ownership(session).owner_node_id)


@pytest.fixture
def owner_and_standby(migrated: str, make_node: MakeNode) -> tuple[ClusterNode, ClusterNode]:
    a, b = make_node("alpha"), make_node("beta")
    approve(a)
    approve(b)
    cluster.request_transfer(a.app, SYSTEM, a.node_id)
    return a, b


def test_a_node_frozen_inside_a_run_write_loses_its_lock_and_its_write(
    owner_and_standby: tuple[ClusterNode, ClusterNode],
) -> None:
    a, b = owner_and_standby
    bounded = Database(a.app.db.url, bounds=session_bounds(2.0))  # ended after 1 s idle
    frozen = Session(bounded.engine)
    frozen.begin()
    verdict = a.node.guard().verdict(frozen)  # holds the lock, then "freezes"
    assert verdict.kind == "owner"

    assert take_the_lock(b) == a.node_id  # the lock came free before the taker gave up

    with pytest.raises((OperationalError, DBAPIError)):
        frozen.execute(text("SELECT 1"))  # the frozen node's session was ended
    frozen.close()
    bounded.dispose()


def test_control_a_lock_held_by_a_session_without_bounds_keeps_the_taker_waiting(
    owner_and_standby: tuple[ClusterNode, ClusterNode],
) -> None:
    a, b = owner_and_standby
    unbounded = Database(a.app.db.url)  # no session bounds: the lock is held for good
    holder = Session(unbounded.engine)
    holder.begin()
    holder.query(ClusterOwnership).with_for_update().all()
    try:
        with pytest.raises(OperationalError, match="lock timeout"):
            take_the_lock(b)
    finally:
        holder.rollback()
        holder.close()
        unbounded.dispose()


def test_status_on_the_standby_names_the_session_holding_the_ownership_lock(
    owner_and_standby: tuple[ClusterNode, ClusterNode],
) -> None:
    a, b = owner_and_standby
    a.app.db.rename(application_name(a.node_id, "scheduler"))
    holder = Session(a.app.db.engine)
    holder.begin()
    lock_ownership(holder)
    try:
        status = cluster.status(b.app, SYSTEM, b.node)
    finally:
        holder.rollback()
        holder.close()
    assert [h.application_name for h in status.lock_holders] == [f"fleetcron:{a.node_id}:scheduler"]
    assert status.lock_holders[0].state == "idle in transaction"
    assert status.lock_holders[0].since is not None
    assert f"ownership lock held by fleetcron:{a.node_id}:scheduler" in status.one_line()
    assert cluster.status(b.app, SYSTEM, b.node).lock_holders == []  # released


def test_every_session_of_a_node_carries_the_bounds_derived_from_its_lease(
    owner_and_standby: tuple[ClusterNode, ClusterNode],
) -> None:
    a, _b = owner_and_standby
    bounds = session_bounds(3.0)
    db = Database(a.app.db.url, bounds=bounds, name="fleetcron:probe:test")
    try:
        with db.read() as session:
            shown = {
                name: session.scalar(text(f"SHOW {name}"))
                for name in (
                    "statement_timeout",
                    "idle_in_transaction_session_timeout",
                    "lock_timeout",
                    "application_name",
                )
            }
    finally:
        db.dispose()
    assert shown == {
        "statement_timeout": "1500ms",
        "idle_in_transaction_session_timeout": "1500ms",
        "lock_timeout": "750ms",
        "application_name": "fleetcron:probe:test",
    }
    assert bounds.connect_args("x")["keepalives"] == 1
    assert bounds.connect_args("x")["tcp_user_timeout"] == 1500
    # Below the lease however long it is: a lock never outlives the lease.
    for lease in (0.5, 2.0, 3.0, 30.0, 600.0):
        b = session_bounds(lease)
        assert b.idle_in_transaction_ms < lease * 1000
        assert b.statement_timeout_ms < lease * 1000
        assert b.lock_timeout_ms < b.idle_in_transaction_ms
