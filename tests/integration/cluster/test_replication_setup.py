"""The replicated pair's replication on two real PostgreSQL 18 clusters: setup, its checks,
node-scoped ids, status, and what a conflicting row does to a subscription."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select

from fixtures.pg_pair import PgPair, pair_settings, wait_for
from fixtures.postgres import PostgresServer
from fleetcron.app import SYSTEM, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.crypto import generate_key
from fleetcron.errors import ConfigError, Conflict
from fleetcron.services.accounts.users import create_token
from fleetcron.services.pair import replication
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import ApiToken, Target, User

pytestmark = pytest.mark.postgres


@pytest.fixture
def apps(pg_pair: PgPair, tmp_path: Path) -> Iterator[tuple[App, App]]:
    key = generate_key().decode()
    left = App.open(pair_settings(pg_pair, "left", tmp_path, key))
    right = App.open(pair_settings(pg_pair, "right", tmp_path, key))
    yield left, right
    left.close()
    right.close()


def names(app: App, model: type[Target] | type[User]) -> dict[str, int]:
    with app.db.read() as session:
        return {name: id_ for name, id_ in session.execute(select(model.name, model.id))}


def tokens(app: App) -> dict[str, int]:
    with app.db.read() as session:
        return {name: id_ for name, id_ in session.execute(select(ApiToken.name, ApiToken.id))}


def wait_healthy(app: App) -> None:
    try:
        wait_for(lambda: replication.status(app, SYSTEM).healthy, what="healthy replication")
    except AssertionError:
        assert replication.status(app, SYSTEM).problems == []
        raise


def test_setup_replicates_both_ways_with_ids_that_never_collide(
    pg_pair: PgPair, apps: tuple[App, App]
) -> None:
    left, right = apps
    result = replication.setup(left, SYSTEM, pg_pair.right_url)
    assert result.changed and result.peer.copy_data and not result.this.copy_data
    # The right side starts empty and receives the left side's rows (the seeded users).
    wait_for(lambda: set(names(right, User)) == {"admin", "olivia", "victor"}, what="the copy")
    # Written on either side, at nearly the same time: odd ids here, even ids there.
    for n in range(3):
        create_token(left, SYSTEM, "admin", f"l{n}")
        create_token(right, SYSTEM, "admin", f"r{n}")
    expected = {f"{side}{n}" for side in "lr" for n in range(3)}
    wait_for(lambda: set(tokens(left)) == expected, what="right's tokens on the left")
    wait_for(lambda: set(tokens(right)) == expected, what="left's tokens on the right")
    ids = tokens(left)
    assert tokens(right) == ids
    assert {ids[f"l{n}"] % 2 for n in range(3)} == {1}
    assert {ids[f"r{n}"] % 2 for n in range(3)} == {0}
    # Operator edits are the first node's until there is an owner (then the owner's).
    targets.add_target(left, SYSTEM, TargetSpec("web1", TargetKind.LOCAL))
    with pytest.raises(Conflict, match=r"target.add: there is no owner yet.* first node"):
        targets.add_target(right, SYSTEM, TargetSpec("web2", TargetKind.LOCAL))
    wait_for(lambda: set(names(right, Target)) == {"web1"}, what="the target on the right")
    for app in apps:
        wait_healthy(app)
        state = replication.status(app, SYSTEM)
        assert state.sequences_ok and len(state.subscriptions) == 1 and len(state.slots) == 1
        assert state.slots[0]["lag_bytes"] is not None
    # The replay cache of signed requests stays per node.
    assert "cluster_nonces" not in result.tables and "runs" in result.tables
    # Again: nothing changes.
    again = replication.setup(left, SYSTEM, pg_pair.right_url)
    assert not again.changed


def test_setup_refuses_a_peer_that_holds_rows(pg_pair: PgPair, apps: tuple[App, App]) -> None:
    left, right = apps
    targets.add_target(right, SYSTEM, TargetSpec("made-too-early", TargetKind.LOCAL))
    with pytest.raises(Conflict, match=r"already holds rows in .*targets \(1\)"):
        replication.setup(left, SYSTEM, pg_pair.right_url)
    # Nothing was created on either side.
    assert pg_pair.execute("left", "SELECT count(*) FROM pg_publication") == [(0,)]
    assert pg_pair.execute("right", "SELECT count(*) FROM pg_subscription") == [(0,)]


def test_setup_refuses_a_schema_behind(pg_pair: PgPair, apps: tuple[App, App]) -> None:
    left, _ = apps
    pg_pair.execute("right", "UPDATE alembic_version SET version_num = '0003'")
    with pytest.raises(ConfigError, match=r"the peer: the schema is at revision 0003"):
        replication.setup(left, SYSTEM, pg_pair.right_url)


def test_setup_refuses_postgresql_15_without_logical_wal(
    pg_pair: PgPair, apps: tuple[App, App], postgres_server: PostgresServer, migrated: str
) -> None:
    """Debian's PostgreSQL 15 (the shared-database fixture): too old for ``origin = none``."""
    left, _ = apps
    with pytest.raises(ConfigError, match=r"the peer: PostgreSQL 15 .* 16 or newer"):
        replication.setup(left, SYSTEM, migrated)


def test_setup_refuses_wal_level_replica(
    pg_pair: PgPair, apps: tuple[App, App], tmp_path: Path
) -> None:
    left, _ = apps
    pg_pair.execute("right", "ALTER SYSTEM SET wal_level = 'replica'")
    pg_pair.right.restart()
    try:
        with pytest.raises(ConfigError, match=r"the peer: wal_level is 'replica'"):
            replication.setup(left, SYSTEM, pg_pair.right_url)
    finally:
        pg_pair.execute("right", "ALTER SYSTEM RESET wal_level")
        pg_pair.right.restart()


def test_status_before_setup_names_what_is_missing(apps: tuple[App, App]) -> None:
    state = replication.status(apps[0], SYSTEM)
    assert not state.healthy
    assert any("no publication" in p for p in state.problems)
    assert any("not node-scoped" in p for p in state.problems)


def test_a_raw_conflicting_insert_stalls_the_subscription_and_status_says_so(
    pg_pair: PgPair, apps: tuple[App, App]
) -> None:
    """The negative control: a row with the same unique key written on both sides outside
    fleetcron's write paths stops the subscription at it, and status reports it."""
    left, right = apps
    replication.setup(left, SYSTEM, pg_pair.right_url)
    wait_for(lambda: "admin" in names(right, User), what="the copy")
    for app in apps:
        wait_healthy(app)
    insert = (
        "INSERT INTO users (name, password_hash, role, created_at, updated_at)"
        " VALUES ('mallory', 'x', 'viewer', now(), now())"
    )
    # Both rows must exist before either side's copy of the other arrives: written one
    # after the other, the left row could reach the right side first (the right INSERT
    # then fails as a duplicate, and there is no conflict to stall on). So the right row
    # is inserted in an open transaction first; the left row, committed meanwhile, reaches
    # the right side's apply worker, which waits on the open row and fails once it commits.
    with psycopg.connect(pg_pair.conninfo("right"), connect_timeout=10) as right_side:
        right_side.execute(insert)
        pg_pair.execute("left", insert)
        right_side.commit()

    def stalled(app: App) -> bool:
        return any(
            "already exists here" in p or "failed to apply" in p
            for p in replication.status(app, SYSTEM).problems
        )

    wait_for(lambda: stalled(left) and stalled(right), what="the stall to be reported")
    # And it stays stalled: a later change does not arrive.
    targets.add_target(left, SYSTEM, TargetSpec("after", TargetKind.LOCAL))
    assert "after" not in names(right, Target)


def test_setup_again_publishes_tables_a_migration_added(
    pg_pair: PgPair, apps: tuple[App, App]
) -> None:
    """An upgrade that adds a table: status names it, setup run again publishes it on both
    sides and refreshes both subscriptions, and its rows travel."""
    left, right = apps
    replication.setup(left, SYSTEM, pg_pair.right_url)
    wait_for(lambda: "admin" in names(right, User), what="the copy")
    for side in ("left", "right"):  # as if "targets" had come with the upgrade
        pg_pair.execute(side, 'ALTER PUBLICATION fleetcron DROP TABLE public."targets"')
    assert any("lacks table(s) targets" in p for p in replication.status(left, SYSTEM).problems)
    result = replication.setup(left, SYSTEM, pg_pair.right_url)
    assert result.changed
    assert result.this.tables_added == result.peer.tables_added == ["targets"]
    targets.add_target(left, SYSTEM, TargetSpec("after-upgrade", TargetKind.LOCAL))
    wait_for(lambda: "after-upgrade" in names(right, Target), what="the new table's rows")
    for app in apps:
        wait_healthy(app)
