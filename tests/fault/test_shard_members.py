"""Every node executes: the members placement (``FLEETCRON_SHARD_PLACEMENT=members``) on
real PostgreSQL, with real scheduler processes. Nodes share 4 shards; a node joins while
long commands run on the shards it takes (draining handoffs), another is SIGKILLed (its
shards are taken over once its lease has expired, after its claims' deadlines), and C1-C6
hold throughout (an operator drains the newcomer again meanwhile): every slot recorded
once, and in every shard at most one node and generation executing at any moment (C4), no
older generation running on a target when a newer one starts there (C5). A node paused
or cut from PostgreSQL loses only its own shards while the other goes on, and a node
that joins and leaves every few seconds never runs a shard beside another, and three
rebalances that race (two joins at once, then a drain) settle on one placement. The commands
a SIGKILLed node left on SSH targets are killed by the active cleanup of the nodes that
take its shards, whose runs then start before the old claims' deadlines (the control,
cleanup off, waits for them).

The job allows overlapping runs and its commands outlast a (simulated) minute, so a
shard handed over while its runs still go on would execute on two nodes at once: the
negative control hands shards over without draining them and C4 catches it.
"""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from datetime import datetime, timedelta

import pytest
from checkers import (
    Effect,
    SafetyViolation,
    c1_one_execution_per_slot,
    c2_generation_never_decreases,
    c3_every_due_slot_accounted_for,
    c4_no_overlap_across_owners,
    c5_no_older_generation_running_at_a_newer_start,
    c6_newest_runs_kept,
    read_effects,
)
from harness import Lab, namespace_resolver, remove_marks, wait_until
from netfault import CuttableLink, ProcessWatch
from sqlalchemy import select

from fixtures.sshd import SshServer
from fleetcron.app import SYSTEM
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.registry import set_drained
from fleetcron.services.cluster.shards import shard_view
from fleetcron.services.runs import reads as runs
from fleetcron.store.schema import AuditEvent, ClusterOwnership, ExecutionClaim, Run
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

GRACE = timedelta(seconds=60)
SHARDS = 4
MEMBERS = {
    "FLEETCRON_SHARD_PLACEMENT": "members",
    "FLEETCRON_LEASE_S": "3",
    "FLEETCRON_LEASE_RENEW_S": "0.5",
}
# The test's own view of a node (for `cluster drain`) has the nodes' placement, but not their
# short lease: its database sessions would get that lease's bounds (a transaction idle for
# 1.5 s is ended), which setting up a fleet on a loaded machine was seen to exceed. The view
# runs no lease of its own: its length bounds only the view's sessions.
VIEW: dict[str, object] = {"shard_placement": "members", "lease_s": 30.0}


def nodes_per_shard(lab: Lab, since: float = 0.0) -> dict[int, set[str]]:
    """Shard -> the nodes that started commands in it (after real time ``since``)."""
    found: dict[int, set[str]] = defaultdict(set)
    for e in read_effects(lab.effects):
        if e.kind == "start" and e.at >= since:
            found[e.shard].add(e.node)
    return found


def started(lab: Lab, node: str, since: float = 0.0) -> int:
    return sum(
        1
        for e in read_effects(lab.effects)
        if e.kind == "start" and e.node == node and e.at >= since
    )


def owners(lab: Lab) -> dict[int, str | None]:
    with lab.app("alpha").db.read() as session:
        rows = session.execute(select(ClusterOwnership.shard, ClusterOwnership.owner_node_id))
        return {shard: owner for shard, owner in rows}


def misplaced(lab: Lab) -> list[tuple[int, str | None, str | None]]:
    """The shards owned elsewhere than the members placement puts them: (shard, owner,
    placed on)."""
    view = shard_view(lab.app("alpha"), SYSTEM, lab.node("alpha"))
    return [(s.shard, s.owner, s.placed_on) for s in view.shards if s.misplaced]


def draining(lab: Lab) -> set[int]:
    """The shards whose handoff is under way."""
    with lab.app("alpha").db.read() as session:
        return set(
            session.scalars(
                select(ClusterOwnership.shard).where(ClusterOwnership.draining.is_(True))
            )
        )


def moves(lab: Lab) -> list[str]:
    with lab.app("alpha").db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent.action)
                .where(AuditEvent.action.like("cluster.shard_%"))
                .order_by(AuditEvent.id)
            )
        )


def check_all(lab: Lab, since: datetime, watch: ProcessWatch | None = None) -> None:
    """C1-C6 (C2 per shard); ``watch``: when killed commands stopped (no end line)."""
    effects = read_effects(lab.effects)
    app = lab.app("alpha")
    now = time.time()
    gone_at = watch.gone_at if watch is not None else {}
    c1_one_execution_per_slot(app, effects)
    c2_generation_never_decreases_per_shard(effects)
    c3_every_due_slot_accounted_for(app, since, lab.accounted_until(GRACE))
    c6_newest_runs_kept(app)
    c4_no_overlap_across_owners(effects, until=now, gone_at=gone_at)
    c5_no_older_generation_running_at_a_newer_start(effects, until=now, gone_at=gone_at)


def c2_generation_never_decreases_per_shard(effects: list[Effect]) -> None:
    """C2 per shard: each shard's generation only grows, in the order its commands started."""
    by_shard: dict[int, list[Effect]] = defaultdict(list)
    for e in effects:
        by_shard[e.shard].append(e)
    for shard_effects in by_shard.values():
        c2_generation_never_decreases(shard_effects)


@pytest.fixture
def members_lab(lab: Lab) -> Lab:
    lab.shards = SHARDS
    lab.app_settings = VIEW
    lab.approve("alpha", "beta", "gamma")
    lab.add_fleet(12, work="sleep 8", timeout_s=12, overlap="allow")
    return lab


def test_nodes_share_the_shards_a_joining_node_takes_its_share_and_a_killed_ones_move(
    members_lab: Lab,
) -> None:
    lab = members_lab
    since = lab.sim_now()
    lab.start("alpha", **MEMBERS)
    lab.start("beta", **MEMBERS)
    wait_until(
        lambda: started(lab, "alpha") >= 3 and started(lab, "beta") >= 3,
        timeout=60,
        what="alpha and beta both executing",
    )
    # gamma joins while the shards' commands (8 s, longer than a minute here) run.
    joined = time.time()
    lab.start("gamma", **MEMBERS)
    wait_until(lambda: started(lab, "gamma", joined) >= 3, timeout=90, what="gamma executing")
    assert set(owners(lab).values()) == {
        lab.node(n).identity.node_id for n in ("alpha", "beta", "gamma")
    }
    # The three nodes agree: every shard ends up where the placement each computes puts it.
    eventually(
        lambda: not misplaced(lab),
        60,
        lambda: f"every shard owned where the placement puts it; misplaced: {misplaced(lab)}",
        interval=0.1,
    )
    # gamma is drained by an operator: its shards go back, each once its runs ended.
    gamma = lab.node("gamma").identity.node_id
    assert set_drained(lab.app("alpha"), SYSTEM, gamma, drained=True)
    wait_until(lambda: gamma not in owners(lab).values(), timeout=60, what="gamma drained")
    # beta is killed: its shards move once its lease expires, after its claims' deadlines.
    beta = lab.node("beta").identity.node_id
    lab.signal("beta", signal.SIGKILL)
    killed = time.time()
    wait_until(lambda: beta not in owners(lab).values(), timeout=60, what="beta's shards taken")
    wait_until(
        lambda: len(nodes_per_shard(lab, killed + 20)) == SHARDS,
        timeout=90,
        what="every shard executing again after beta's death",
    )
    lab.stop_all()

    check_all(lab, since)
    after = nodes_per_shard(lab, killed + 20)
    assert all(nodes == {"alpha"} for nodes in after.values()), after  # gamma: drained
    done = moves(lab)
    assert "cluster.shard_take" in done and "cluster.shard_handoff" in done, done
    assert "cluster.shard_takeover" in done, done


@pytest.mark.parametrize(
    ("policy", "overlaps"),
    [
        # Either the drain or the claim wait keeps a moving shard on one node at a time.
        ("no-claim-wait", False),
        ("no-drain", False),
        # Without both, the receiver starts while the giver's commands still run.
        ("no-drain-no-claim-wait", True),
    ],
)
def test_a_handoff_keeps_a_shard_on_one_node_by_draining_or_by_waiting_and_c4_sees_neither(
    members_lab: Lab, policy: str, overlaps: bool
) -> None:
    """beta joins while alpha runs every shard's long commands: the shards placed on
    beta move while their runs go on. The drain (alpha stops claiming there and hands a
    shard over once its runs ended) and the claim wait (beta waits for alpha's older
    claims) each keep the shard on one node at a time; the negative control, without
    either, executes a shard on both nodes at once, which C4 catches."""
    lab = members_lab
    lab.start("alpha", FAULT_NODE_POLICY=policy, **MEMBERS)
    wait_until(lambda: started(lab, "alpha") >= 12, timeout=60, what="alpha executing alone")
    lab.start("beta", FAULT_NODE_POLICY=policy, **MEMBERS)
    wait_until(lambda: started(lab, "beta") >= 6, timeout=60, what="beta executing")
    lab.stop_all()

    effects = read_effects(lab.effects)
    c1_one_execution_per_slot(lab.app("alpha"), effects)
    if overlaps:
        with pytest.raises(SafetyViolation, match="C4"):
            c4_no_overlap_across_owners(effects, until=time.time())
    else:
        c4_no_overlap_across_owners(effects, until=time.time())
    assert "cluster.shard_handoff" in moves(lab)


@pytest.mark.parametrize("fault", ["stop", "cut"])
def test_a_paused_or_cut_off_node_loses_only_its_shards_and_the_other_goes_on(
    members_lab: Lab, link: CuttableLink, fault: str
) -> None:
    """alpha is paused (SIGSTOP) or cut from PostgreSQL by a dropping proxy while its
    commands run: beta goes on with its own shards throughout, takes alpha's over once
    alpha's lease expired (after their claims' deadlines), and alpha, resumed or
    reconnected, gets its share back by handoffs. A cut-off alpha fences itself (kills
    its commands, whose end the process watch records)."""
    lab = members_lab
    since = lab.sim_now()
    alpha_env = dict(MEMBERS)
    if fault == "cut":
        alpha_env["FLEETCRON_DATABASE_URL"] = link.url_for(lab.database_url)
    watch = ProcessWatch(lab.effects).start()
    lab.start("alpha", **alpha_env)
    lab.start("beta", **MEMBERS)
    wait_until(
        lambda: started(lab, "alpha") >= 3 and started(lab, "beta") >= 3,
        timeout=60,
        what="alpha and beta both executing",
    )
    alpha = lab.node("alpha").identity.node_id
    betas = {s for s, o in owners(lab).items() if o != alpha}
    fault_at = time.time()
    if fault == "stop":
        lab.signal("alpha", signal.SIGSTOP)
    else:
        link.cut()
    wait_until(lambda: alpha not in owners(lab).values(), timeout=60, what="alpha's shards taken")
    wait_until(lambda: _all_started(lab, fault_at), timeout=60, what="beta executing every shard")
    # beta never stopped executing its own shards: it started them in every minute from the
    # fault on, before alpha's shards could start on it (after their claims' deadlines) and in
    # the minute they did (its own and alpha's start at one minute boundary, in either order).
    # A cut-off alpha may still start a run it claimed just before the cut (its guard had
    # committed): the takeover is beta's first start in alpha's shards.
    taken_at = min(
        e.at
        for e in read_effects(lab.effects)
        if e.kind == "start" and e.at > fault_at and e.shard not in betas and e.node == "beta"
    )
    minute = 60 / lab.speed
    own = [
        e
        for e in read_effects(lab.effects)
        if e.kind == "start" and fault_at < e.at <= taken_at + minute / 2 and e.shard in betas
    ]
    assert own and {e.node for e in own} == {"beta"}, (taken_at - fault_at, own)
    back = time.time()
    if fault == "stop":
        lab.signal("alpha", signal.SIGCONT)
    else:
        link.restore()
    wait_until(lambda: started(lab, "alpha", back) >= 3, timeout=90, what="alpha executing again")
    lab.stop_all()
    watch.stop()

    check_all(lab, since, watch)
    assert "cluster.shard_takeover" in moves(lab)


def _all_started(lab: Lab, after: float) -> bool:
    """beta started commands in every shard after ``after``. Only beta's starts count: a
    cut-off alpha may still start, in its own shards, runs it claimed just before the cut,
    and counting those ended the wait before beta had taken any of alpha's shards."""
    found = nodes_per_shard(lab, after)
    return all("beta" in found.get(shard, set()) for shard in range(SHARDS))


@pytest.mark.parametrize("gamma_placement", ["same", "rotated"], ids=["agree", "control-disagree"])
def test_rebalances_that_race_keep_every_shard_on_one_node_and_settle_on_one_placement(
    members_lab: Lab, gamma_placement: str
) -> None:
    """Three rebalances at once: alpha executes every shard's long commands alone; beta
    and gamma join at the same instant (each node's step computes its moves from rows the
    others are changing), and an operator drains alpha as soon as its first handoffs
    drain (alpha's commands still running). Every shard settles on the node the placement
    puts it on (none misplaced and none draining for 5 s), and C1-C6 hold throughout.

    The control: gamma computes another placement than alpha and beta (as a node of
    another version might). The shards never settle (they go back and forth by draining
    handoffs, which the check sees), and C1-C6 still hold: agreement is for liveness,
    never for safety. A slot may wait while its shard goes back and forth (C3 looks at
    slots due two graces before the stop), but is never lost: once gamma has left, beta
    settles and records every slot due meanwhile, run or missed."""
    lab = members_lab
    since = lab.sim_now()
    watch = ProcessWatch(lab.effects).start()
    lab.start("alpha", **MEMBERS)
    wait_until(lambda: started(lab, "alpha") >= 12, timeout=60, what="alpha executing alone")
    joined = time.time()
    lab.start("beta", **MEMBERS)
    gamma_env = {"FAULT_PLACEMENT": "rotated"} if gamma_placement == "rotated" else {}
    lab.start("gamma", **MEMBERS, **gamma_env)
    wait_until(lambda: bool(draining(lab)), timeout=60, what="alpha's first handoffs draining")
    alpha = lab.node("alpha").identity.node_id
    assert set_drained(lab.app("alpha"), SYSTEM, alpha, drained=True)
    wait_until(lambda: alpha not in owners(lab).values(), timeout=90, what="alpha drained")
    settle = Settled(lab, SETTLED_FOR_S)
    if gamma_placement == "rotated":
        with pytest.raises(AssertionError, match="settled"):
            eventually(settle, 30, settle.describe, interval=0.1)
        lab.signal("gamma", signal.SIGTERM)
        lab.processes["gamma"].wait(timeout=30)
        agreed = Settled(lab, SETTLED_FOR_S)
        eventually(agreed, 60, agreed.describe, interval=0.1)
        lab.stop_all()
        watch.stop()
        check_all(lab, since, watch)
        return
    eventually(settle, 60, settle.describe, interval=0.1)
    settled = time.time()
    wait_until(
        lambda: len(nodes_per_shard(lab, settled)) == SHARDS,
        timeout=90,
        what="every shard executing after the rebalances",
    )
    lab.stop_all()
    watch.stop()

    check_all(lab, since, watch)
    after = nodes_per_shard(lab, settled)
    assert all(len(nodes) == 1 and "alpha" not in nodes for nodes in after.values()), after
    assert {n for nodes in after.values() for n in nodes} == {"beta", "gamma"}, after
    assert started(lab, "beta", joined) and started(lab, "gamma", joined)


#: How long no shard may be misplaced or draining for the placement to count as settled.
SETTLED_FOR_S = 5.0


class Settled:
    """A predicate: no shard misplaced or draining, continuously for ``seconds``."""

    def __init__(self, lab: Lab, seconds: float) -> None:
        self.lab, self.seconds = lab, seconds
        self.since: float | None = None
        self.last: tuple[object, ...] = ()

    def __call__(self) -> bool:
        unsettled = (misplaced(self.lab), draining(self.lab))
        if any(unsettled):
            self.since, self.last = None, unsettled
            return False
        self.since = self.since if self.since is not None else time.monotonic()
        return time.monotonic() - self.since >= self.seconds

    def describe(self) -> str:
        misplaced_now, draining_now = self.last or ([], set())
        return (
            f"the shards settled for {self.seconds:g} s; last seen misplaced "
            f"{misplaced_now}, draining {draining_now}"
        )


def test_a_flapping_node_never_runs_a_shard_beside_another(members_lab: Lab) -> None:
    """gamma joins and leaves (a clean stop) every few seconds while alpha and beta run:
    shards go to it and come back, and C1-C6 hold."""
    lab = members_lab
    since = lab.sim_now()
    watch = ProcessWatch(lab.effects).start()
    lab.start("alpha", **MEMBERS)
    lab.start("beta", **MEMBERS)
    wait_until(lambda: started(lab, "beta") >= 3, timeout=60, what="alpha and beta executing")
    for _ in range(4):
        lab.start("gamma", **MEMBERS)
        time.sleep(4)  # sleep-in-loop: the flapping rhythm itself (joined for 4 s, gone 2 s)
        lab.signal("gamma", signal.SIGTERM)
        lab.processes["gamma"].wait(timeout=30)
        time.sleep(2)  # sleep-in-loop: as above
    lab.start("gamma", **MEMBERS)
    wait_until(lambda: started(lab, "gamma") >= 1, timeout=90, what="gamma executing at last")
    lab.stop_all()
    watch.stop()

    check_all(lab, since, watch)


@pytest.mark.parametrize("cleanup", [True, False], ids=["cleanup", "control-no-cleanup"])
def test_a_killed_nodes_ssh_commands_are_cleaned_by_the_node_taking_its_shards(
    lab: Lab, isolated_sshd: SshServer, cleanup: bool
) -> None:
    """alpha, beta and gamma share 4 shards of SSH targets (a real sshd in its own PID
    namespace) with 7 s commands (8 s timeout) in flight when beta is SIGKILLed. Once
    beta's lease expired alpha and gamma take its shards over (neither owns every shard);
    with active cleanup each raises its new shards' marks and kills beta's commands on
    their targets, and beta's targets start again well before the old claims' deadlines.
    The control, cleanup off: they wait for the deadlines. C1-C6 hold in both (C4, C5
    with the process watch)."""
    server = isolated_sshd
    env = {**MEMBERS, "FLEETCRON_ACTIVE_CLEANUP": "true" if cleanup else "false"}
    lab.shards = SHARDS
    lab.app_settings = VIEW
    scope = cluster.mark_scope(lab.app("alpha"))
    try:
        lab.approve("alpha", "beta", "gamma")
        lab.add_fleet(8, work="sleep 7", timeout_s=8, ssh=server)  # every shard has a target
        since = lab.sim_now()
        watch = ProcessWatch(lab.effects, resolve=namespace_resolver(server)).start()
        for node in ("alpha", "beta", "gamma"):
            lab.start(node, **env)
        wait_until(
            lambda: all(started(lab, n) >= 1 for n in ("alpha", "beta", "gamma")),
            timeout=60,
            what="the three nodes executing",
        )
        time.sleep(0.5)  # every command of that round is in flight now
        beta = lab.node("beta").identity.node_id
        betas = {s for s, o in owners(lab).items() if o == beta}
        lab.signal("beta", signal.SIGKILL)
        runs.request_run(lab.app("alpha"), SYSTEM, "everywhere")
        killed = time.time()
        wait_until(lambda: beta not in owners(lab).values(), timeout=60, what="beta's shards")
        wait_until(
            lambda: _restarted(lab, betas, killed),
            timeout=60,
            what="runs in beta's former shards",
        )
        time.sleep(1)
        lab.stop_all()
        watch.stop()
    finally:
        remove_marks(scope)

    check_all(lab, since, watch)
    early = _started_before_the_old_deadlines(lab, betas)
    if cleanup:
        assert early and all(early.values()), early  # every target of beta's shards
    else:
        assert early and not any(early.values()), early  # the control waited for them
    with lab.app("alpha").db.read() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "cluster.active_cleanup")
        ).all()
    assert bool(events) == cleanup
    assert len(early) >= len(betas)  # each of beta's shards has a target


def _restarted(lab: Lab, shards: set[int], after: float) -> bool:
    """Another node than beta started a command in each of ``shards`` after real time
    ``after``."""
    return shards <= {
        e.shard
        for e in read_effects(lab.effects)
        if e.kind == "start" and e.node != "beta" and e.at > after
    }


def _started_before_the_old_deadlines(lab: Lab, shards: set[int]) -> dict[str, bool]:
    """Target of ``shards`` -> whether the first claim there after beta's claim that
    was in flight at the kill (not ``done``) was made at least 5 s before that claim's
    deadline (the wait it would otherwise have)."""
    with lab.app("alpha").db.read() as session:
        claims = session.execute(
            select(
                Run.target_name,
                ExecutionClaim.shard,
                ExecutionClaim.node_id,
                ExecutionClaim.created_at,
                ExecutionClaim.deadline_at,
                ExecutionClaim.state,
            ).join(Run, Run.id == ExecutionClaim.run_id)
        ).all()
    beta = lab.node("beta").identity.node_id
    last = {}
    for c in sorted(claims, key=lambda c: c.created_at):
        if c.node_id == beta and c.shard in shards and c.state != "done":
            last[c.target_name] = c
    early = {}
    for target, old in last.items():
        after = [
            c.created_at
            for c in claims
            if c.target_name == target and c.created_at > old.created_at
        ]
        if after:
            early[target] = (old.deadline_at - min(after)).total_seconds() > 5
    return early
