"""Operator pins on a real PostgreSQL (the members placement, 8 shards, two nodes): a
pinned shard moves to its node by the owner's drain and handoff, and not before the claim
in flight on it ended; unpinning lets the placement decide again (an over-pinned node gives
back its extra shards); a pin to a drained node is ignored, said why, and holds again once
the node is undrained. ``fleetcron cluster shard move|unpin`` refuse with exit 2 and the
field what they cannot do, and every attempt is audited."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event, select, update

from cli_env import run_in_process
from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM, Actor
from fleetcron.coordination.shard_moves import ShardMove, placement_step
from fleetcron.services.accounts.users import add_user
from fleetcron.services.cluster.pins import pin_shard, unpin_shard
from fleetcron.services.cluster.registry import set_drained
from fleetcron.services.cluster.shards import shard_readings, shard_view
from fleetcron.store.schema import AuditEvent, ClusterOwnership, ExecutionClaim
from integration.cluster.test_shard_moves import join, live_claim, owned_by, owners, step

pytestmark = pytest.mark.postgres

SHARDS = 8
LEASE_S = 30.0
MEMBERS = {"shard_placement": "members", "lease_s": LEASE_S, "lease_renew_s": 5.0}
ADMIN = Actor("ops", "admin")

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def pair(make_node: MakeNode) -> tuple[ClusterNode, ClusterNode]:
    """alpha and beta, approved members with 4 shards each."""
    alpha, beta = (make_node(n, shards=SHARDS, **MEMBERS) for n in ("alpha", "beta"))
    for node in (alpha, beta):
        approve(node)
        join(node)
    settle(alpha, beta)
    assert len(owned_by(alpha, alpha)) == len(owned_by(alpha, beta)) == SHARDS // 2
    return alpha, beta


def settle(*nodes: ClusterNode) -> list[ShardMove]:
    """Every node steps until a round moves nothing (at most 5 rounds)."""
    made: list[ShardMove] = []
    for _ in range(5):
        moved = [m for node in nodes for m in step(node)]
        if not moved:
            return made
        made += moved
    raise AssertionError(f"the placement did not settle: {made}")


def test_a_pinned_shard_moves_by_drain_and_handoff_once_its_claim_ended(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    alpha, beta = pair
    shard = min(owned_by(alpha, alpha))
    generation = owners(alpha)[shard][1]
    claim = live_claim(alpha, shard, generation)

    result = pin_shard(alpha.app, ADMIN, shard, beta.node_id)

    assert (result.node, result.changed, result.owner, result.ignored) == (
        beta.node_id,
        True,
        alpha.node_id,
        None,
    )
    assert [(m.shard, m.kind) for m in step(beta) if m.shard == shard] == []  # alpha's still
    assert (shard, "drain") in {(m.shard, m.kind) for m in step(alpha)}
    settle(alpha, beta)  # every other move the pin made is done; this one waits
    assert owners(alpha)[shard] == (alpha.node_id, generation, True)

    with alpha.app.db.session() as session:
        session.execute(
            update(ExecutionClaim).where(ExecutionClaim.id == claim).values(state="done")
        )
    handed = settle(alpha, beta)

    assert (shard, "handoff") in {(m.shard, m.kind) for m in handed}
    assert owners(alpha)[shard] == (beta.node_id, generation + 1, False)
    # The pin counts against beta's share: the rest stays balanced.
    assert Counter(o for o, _, _ in owners(alpha).values()) == {
        alpha.node_id: SHARDS // 2,
        beta.node_id: SHARDS // 2,
    }
    line = shard_view(alpha.app, SYSTEM, alpha.node).shards[shard]
    assert (line.pinned_to, line.pin_ignored) == (beta.node_id, None)


def test_negative_control_a_step_that_does_not_drain_hands_the_pinned_shard_over_at_once(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    """The wait above can fail: without the drain (the fault tests' composition), the
    pinned shard is handed over while its claim is still live."""
    alpha, beta = pair
    shard = min(owned_by(alpha, alpha))
    live_claim(alpha, shard, owners(alpha)[shard][1])
    pin_shard(alpha.app, ADMIN, shard, beta.node_id)

    with alpha.app.db.session() as session:
        moves = placement_step(session, alpha.node_id, lease_s=LEASE_S, drain=False)

    assert (shard, "handoff") in {(m.shard, m.kind) for m in moves}
    assert owners(alpha)[shard][0] == beta.node_id


def test_negative_control_without_the_pin_the_shard_stays(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    """The move above is the pin's: without it the settled placement moves nothing."""
    alpha, beta = pair
    shard = min(owned_by(alpha, alpha))
    assert settle(alpha, beta) == []
    assert owners(alpha)[shard][0] == alpha.node_id


def test_unpinning_lets_the_placement_decide_again(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    alpha, beta = pair
    pinned = sorted(owned_by(alpha, alpha))[:2] + sorted(owned_by(alpha, beta))
    for shard in pinned:  # 6 of 8 shards on beta: past its share
        pin_shard(alpha.app, ADMIN, shard, beta.node_id)
    settle(alpha, beta)
    assert owned_by(alpha, beta) == set(pinned)

    for shard in pinned:
        assert unpin_shard(alpha.app, ADMIN, shard).changed
    assert not unpin_shard(alpha.app, ADMIN, pinned[0]).changed  # already
    moves = settle(alpha, beta)

    assert {m.kind for m in moves} == {"drain", "handoff"}
    assert {m.from_node for m in moves} == {beta.node_id}  # beta gives back its extra two
    assert len(owned_by(alpha, alpha)) == len(owned_by(alpha, beta)) == SHARDS // 2
    assert all(s.pinned_to is None for s in shard_view(alpha.app, SYSTEM, alpha.node).shards)


def test_a_pin_to_a_drained_node_is_ignored_until_it_is_undrained(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    alpha, beta = pair
    assert set_drained(alpha.app, SYSTEM, beta.node_id, drained=True)
    settle(alpha, beta)
    assert owned_by(alpha, beta) == set()
    shard = 3

    result = pin_shard(alpha.app, ADMIN, shard, beta.node_id)

    assert result.ignored == "the node is drained"
    assert settle(alpha, beta) == []  # placed as any other: it stays on alpha
    line = shard_view(alpha.app, SYSTEM, alpha.node).shards[shard]
    assert (line.owner, line.pinned_to, line.pin_ignored) == (
        alpha.node_id,
        beta.node_id,
        "the node is drained",
    )

    assert set_drained(alpha.app, SYSTEM, beta.node_id, drained=False)
    settle(alpha, beta)
    assert shard in owned_by(alpha, beta)
    assert len(owned_by(alpha, beta)) == SHARDS // 2
    assert shard_view(alpha.app, SYSTEM, alpha.node).shards[shard].pin_ignored is None


def test_a_pin_to_a_node_that_is_not_running_is_ignored_and_said_why(
    pair: tuple[ClusterNode, ClusterNode], make_node: MakeNode
) -> None:
    alpha, beta = pair
    gamma = make_node("gamma", shards=SHARDS, **MEMBERS)
    approve(gamma)  # approved, but no scheduler of it runs: no member row

    result = pin_shard(alpha.app, ADMIN, 0, gamma.node_id)

    assert result.ignored is not None and "not a live member" in result.ignored
    assert settle(alpha, beta) == []


@pytest.fixture
def cli(
    pair: tuple[ClusterNode, ClusterNode],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Cli:
    """``fleetcron ARGS`` in this process, as alpha's operator (a members cluster), with an
    admin ``ops`` and a viewer ``watcher``."""
    alpha, _ = pair
    add_user(alpha.app, SYSTEM, "ops", "ops-password-1234", "admin")
    add_user(alpha.app, SYSTEM, "watcher", "watcher-password-1234", "viewer")
    settings = alpha.app.settings
    for name, value in {
        "FLEETCRON_CLUSTER": "true",
        "FLEETCRON_ENDPOINT": str(settings.endpoint),
        "FLEETCRON_MACHINE_ID_FILE": str(settings.machine_id_file),
        "FLEETCRON_SHARD_PLACEMENT": "members",
        "FLEETCRON_LEASE_S": "30",
        "FLEETCRON_LEASE_RENEW_S": "5",
    }.items():
        monkeypatch.setenv(name, value)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return run_in_process(alpha.app, monkeypatch, capsys, *args)

    return run


def audit(node: ClusterNode) -> list[tuple[str, bool, dict[str, Any]]]:
    with node.app.db.read() as session:
        events = session.execute(
            select(AuditEvent.action, AuditEvent.success, AuditEvent.detail)
            .where(AuditEvent.action.in_(["shard.pin", "shard.unpin"]))
            .order_by(AuditEvent.id)
        ).all()
    return [(a, s, d if isinstance(d, dict) else json.loads(d)) for a, s, d in events]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["cluster", "shard", "move", "8", "--to", "{beta}"], "shard: 8 is not a shard"),
        (["cluster", "shard", "unpin", "-1"], "No such option"),
        (["cluster", "shard", "unpin", "99"], "(0 to 7)"),
        (["cluster", "shard", "move", "1", "--to", "nosuchnode"], "to: no node 'nosuchnode'"),
        (["cluster", "shard", "move", "1", "--to", "{gamma}"], "is candidate"),
        (["cluster", "shard", "move", "1", "--to", "{beta}", "--as", "watcher"], "role"),
        (["cluster", "shard", "move", "1"], "Missing option '--to'"),
    ],
    ids=["range", "negative", "unpin-range", "unknown", "candidate", "viewer", "no-to"],
)
def test_the_commands_refuse_what_they_cannot_do_with_exit_2(
    cli: Cli,
    pair: tuple[ClusterNode, ClusterNode],
    make_node: MakeNode,
    args: list[str],
    fragment: str,
) -> None:
    alpha, beta = pair
    gamma = make_node("gamma", shards=SHARDS, **MEMBERS)  # a candidate
    named = [a.format(beta=beta.node_id, gamma=gamma.node_id) for a in args]

    result = cli(*named)

    assert result.returncode == 2, (result.stdout, result.stderr)
    assert fragment in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert all(not s.pinned_to for s in shard_view(alpha.app, SYSTEM, alpha.node).shards)


def test_the_commands_need_the_members_placement(
    cli: Cli, pair: tuple[ClusterNode, ClusterNode]
) -> None:
    _, beta = pair
    result = cli(
        "cluster", "shard", "move", "1", "--to", beta.node_id, FLEETCRON_SHARD_PLACEMENT="owner"
    )

    assert result.returncode == 2, result.stderr
    assert "shard_placement:" in result.stderr
    assert "FLEETCRON_SHARD_PLACEMENT=members" in result.stderr


def test_move_and_unpin_from_the_command_line_are_audited_and_shown(
    cli: Cli, pair: tuple[ClusterNode, ClusterNode]
) -> None:
    alpha, beta = pair
    shard = min(owned_by(alpha, alpha))

    moved = cli("cluster", "shard", "move", str(shard), "--to", beta.node_id)
    assert moved.returncode == 0, moved.stderr
    assert f"shard {shard} pinned to {beta.node_id}" in moved.stdout
    assert "drains it and hands it over" in moved.stdout
    refused = cli("cluster", "shard", "move", "1", "--to", beta.node_id, "--as", "watcher")
    assert refused.returncode == 2

    listed = cli("cluster", "shards", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["shards"][shard]["pinned_to"] == beta.node_id
    table = cli("cluster", "shards")
    assert table.returncode == 0 and "pin" in table.stdout and beta.node_id in table.stdout

    unpinned = cli("cluster", "shard", "unpin", str(shard), "--json")
    assert unpinned.returncode == 0, unpinned.stderr
    assert json.loads(unpinned.stdout) == {
        "shard": shard,
        "node": None,
        "changed": True,
        "owner": alpha.node_id,
        "ignored": None,
    }

    events = audit(alpha)
    assert [(a, s) for a, s, _ in events] == [
        ("shard.pin", True),
        ("shard.pin", False),
        ("shard.unpin", True),
    ]
    assert {k: events[0][2][k] for k in ("shard", "node", "changed")} == {
        "shard": shard,
        "node": beta.node_id,
        "changed": True,
    }
    assert {k: events[2][2][k] for k in ("shard", "node")} == {"shard": shard, "node": beta.node_id}


def test_the_shard_view_says_where_the_placement_puts_each_shard_and_which_are_elsewhere(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    """Settled, every shard is owned where the placement every node computes puts it; a
    pin moves the placement first (the shard is shown misplaced: moving) and the owners
    after; a shard owned against the placement (as a node computing another placement
    would leave it) makes its node hold more than its share, which the view shows."""
    alpha, beta = pair
    settled = shard_view(alpha.app, ADMIN, alpha.node).shards
    assert all(s.placed_on == s.owner and not s.misplaced for s in settled), settled

    shard = min(owned_by(alpha, alpha))
    pin_shard(alpha.app, ADMIN, shard, beta.node_id)
    moving = {s.shard: s for s in shard_view(alpha.app, ADMIN, alpha.node).shards if s.misplaced}
    assert (moving[shard].owner, moving[shard].placed_on) == (alpha.node_id, beta.node_id)
    # beta's share stays bounded: one of its shards is placed on alpha in exchange.
    assert [(s.owner, s.placed_on) for k, s in moving.items() if k != shard] == [
        (beta.node_id, alpha.node_id)
    ]
    settle(alpha, beta)
    assert not any(s.misplaced for s in shard_view(alpha.app, ADMIN, alpha.node).shards)

    other = min(owned_by(alpha, alpha))
    with alpha.app.db.session() as session:
        session.execute(
            update(ClusterOwnership)
            .where(ClusterOwnership.shard == other)
            .values(owner_node_id=beta.node_id)
        )
    # beta now holds one shard over its share: the placement keeps shards where they are
    # as far as the shares allow, so one of beta's (which one depends on the hash) is
    # placed back on alpha, and shown so.
    wrong = [s for s in shard_view(alpha.app, ADMIN, alpha.node).shards if s.misplaced]
    assert [(s.owner, s.placed_on) for s in wrong] == [(beta.node_id, alpha.node_id)], wrong
    # The gauge says the same (fleetcron_shard_misplaced).
    readings = shard_readings(alpha.app, alpha.node)
    assert [r.shard for r in readings if r.misplaced] == [s.shard for s in wrong]


def test_another_nodes_claims_in_its_own_shards_never_hold_this_nodes_claim_wait(
    pair: tuple[ClusterNode, ClusterNode],
) -> None:
    """beta runs something in one of its shards under a generation below the highest of
    alpha's shards. alpha's claim wait looks only at alpha's shards: it finds no older
    claim there, and from then on, at the same generations, asks the database nothing
    (the guard remembers it), however long beta's run lasts."""
    alpha, beta = pair
    mine = sorted(owned_by(alpha, alpha))
    theirs = min(owned_by(alpha, beta))
    with alpha.app.db.session() as session:
        session.execute(
            update(ClusterOwnership).where(ClusterOwnership.shard == mine[0]).values(generation=9)
        )
    live_claim(beta, theirs, owners(alpha)[theirs][1])
    guard = alpha.node.guard()
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    with alpha.app.db.session() as session:
        verdict = guard.verdict(session)
        assert verdict.generation == 9 > owners(alpha)[theirs][1]
        assert guard.old_claims(session, verdict, [1]) == {}
        event.listen(session.connection(), "before_cursor_execute", count)
        assert guard.old_claims(session, verdict, [1]) == {}
    assert statements == []
