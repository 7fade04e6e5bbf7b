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
from fleetcron.services import cluster
from fleetcron.store.db import Database, session_bounds
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
