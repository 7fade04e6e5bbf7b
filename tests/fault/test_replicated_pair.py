"""Fault injection on a replicated pair: two real scheduler processes, each on its own
PostgreSQL 18, logical replication both ways through cuttable links (user-space proxies),
checked by C1-C4 over both databases' runs and the effects file.

alpha is the first node (its database was set up first and holds the data), beta the
second. Simulated time runs ten times faster than real time (a schedule minute lasts 6 s);
claim deadlines and timeouts are real seconds on each database's clock.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from checkers import (
    SafetyViolation,
    c1_one_execution_per_slot,
    c2_generation_never_decreases,
    c3_every_due_slot_accounted_for,
    c4_no_overlap_across_owners,
    c6_newest_runs_kept,
    read_effects,
)
from harness import Lab, wait_until
from netfault import CuttableLink
from node_forks import NodeForks
from sqlalchemy import delete, select

from fixtures.pg_pair import PgPair, loopback_socket, served
from fleetcron.app import SYSTEM
from fleetcron.crypto import generate_key
from fleetcron.errors import CoordinationError
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.secrets import ensure_secret
from fleetcron.services.pair import replication
from fleetcron.store.schema import Assignment, ClusterNode, ClusterOwnership, ClusterSecret, Run
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

GRACE = timedelta(seconds=60)
NODES = ("alpha", "beta")


@dataclass
class PairLab:
    lab: Lab
    db: PgPair
    to_beta: CuttableLink
    """alpha's subscription reads beta's database through it."""
    to_alpha: CuttableLink
    """beta's subscription reads alpha's database through it."""

    def side(self, name: str) -> str:
        return "left" if name == "alpha" else "right"

    def cut(self) -> None:
        self.to_beta.cut()
        self.to_alpha.cut()

    def restore(self) -> None:
        self.to_beta.restore()
        self.to_alpha.restore()

    def set_subscription(self, name: str, enabled: bool) -> None:
        side = self.side(name)
        [(sub,)] = self.db.execute(side, "SELECT subname FROM pg_subscription")
        self.db.execute(side, f'ALTER SUBSCRIPTION "{sub}" {"ENABLE" if enabled else "DISABLE"}')

    def ownership(self, name: str) -> tuple[str | None, int]:
        with self.lab.app(name).db.read() as session:
            row = session.scalars(select(ClusterOwnership)).one()
            return row.owner_node_id, row.generation

    def node_id(self, name: str) -> str:
        return self.lab.node(name).identity.node_id

    def runs(self, name: str) -> list[tuple[int, int, datetime, str]]:
        with self.lab.app(name).db.read() as session:
            return [
                (r.id, r.assignment_id, r.scheduled_for, r.status)
                for r in session.scalars(select(Run).order_by(Run.id))
            ]

    def in_step(self) -> bool:
        """Both databases hold the same runs (replication has caught up)."""
        return self.runs("alpha") == self.runs("beta")


def started_by(lab: Lab, node: str, generation: int | None = None) -> int:
    return sum(
        1
        for e in read_effects(lab.effects)
        if e.kind == "start" and e.node == node and generation in (None, e.generation)
    )


def check_all(pl: PairLab, since: datetime) -> None:
    """C1-C4 over the effects file and over each database's runs."""
    effects = read_effects(pl.lab.effects)
    c2_generation_never_decreases(effects)
    c4_no_overlap_across_owners(effects, until=time.time())
    for name in NODES:
        app = pl.lab.app(name)
        c1_one_execution_per_slot(app, effects)
        c3_every_due_slot_accounted_for(app, since, pl.lab.accounted_until(GRACE))
        c6_newest_runs_kept(app)


def settle(pl: PairLab) -> None:
    """Stop both nodes gracefully, heal the link and wait until both databases agree."""
    pl.lab.stopped_at = pl.lab.sim_now()
    for proc in pl.lab.processes.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
    for proc in pl.lab.processes.values():
        proc.wait(timeout=30)
    pl.restore()
    for name in NODES:
        pl.set_subscription(name, True)
    wait_until(pl.in_step, timeout=60, what="both databases to hold the same runs")


@pytest.fixture
def pair_lab(pg_pair: PgPair, tmp_path: Path, node_forks: NodeForks) -> Iterator[PairLab]:
    beta_socket, beta_endpoint = loopback_socket()  # beta answers signed queries
    lab = Lab(
        pg_pair.left_url,
        tmp_path,
        master_key=generate_key().decode(),
        database_urls={"alpha": pg_pair.left_url, "beta": pg_pair.right_url},
        topology="replicated-pair",
        endpoints={"beta": beta_endpoint},
        forks=node_forks,
    )
    to_beta = CuttableLink(pg_pair.right.host, pg_pair.right.port)
    to_alpha = CuttableLink(pg_pair.left.host, pg_pair.left.port)
    pl = PairLab(lab, pg_pair, to_beta, to_alpha)
    try:
        replication.setup(
            lab.app("alpha"),
            SYSTEM,
            pg_pair.right_url,
            peer_conninfo=(
                f"host=127.0.0.1 port={to_beta.port} user=fleetcron dbname={pg_pair.name}"
            ),
            this_conninfo=(
                f"host=127.0.0.1 port={to_alpha.port} user=fleetcron dbname={pg_pair.name}"
            ),
        )
        wait_until(lambda: pl.ownership("beta") == (None, 0), timeout=30, what="the copy")
        for name in NODES:
            cluster.announce(lab.app(name), lab.node(name))
        beta_id = pl.node_id("beta")

        def beta_known() -> bool:
            with lab.app("alpha").db.read() as session:
                return (
                    session.scalar(select(ClusterNode).where(ClusterNode.node_id == beta_id))
                    is not None
                )

        wait_until(beta_known, timeout=30, what="beta's record on alpha")
        for name in NODES:
            cluster.approve(lab.app("alpha"), SYSTEM, lab.node(name).identity)
        ensure_secret(lab.app("alpha"), SYSTEM)

        def secret_on_beta() -> bool:
            with lab.app("beta").db.read() as session:
                return session.scalar(select(ClusterSecret.id)) is not None

        wait_until(secret_on_beta, timeout=30, what="the coordination secret on beta")
        lab.make_owner("alpha")
        lab.add_fleet(5, work="sleep 2", timeout_s=5)

        def fleet_on_beta() -> bool:
            with lab.app("beta").db.read() as session:
                return len(session.scalars(select(Assignment)).all()) == 5

        wait_until(fleet_on_beta, timeout=30, what="the fleet on beta")
        wait_until(
            lambda: pl.ownership("beta") == (pl.node_id("alpha"), 1),
            timeout=30,
            what="alpha's ownership on beta",
        )
        with served(lab.app("beta"), beta_socket):
            yield pl
    finally:
        lab.stop_all()
        pl.restore()
        to_beta.close()
        to_alpha.close()


def start_both(pl: PairLab) -> datetime:
    since = pl.lab.sim_now()
    for name in NODES:
        pl.lab.start(name)
    wait_until(lambda: started_by(pl.lab, "alpha") >= 5, timeout=30, what="alpha's first runs")
    return since


def test_handoff_with_runs_in_flight_and_a_delayed_ownership_transaction(
    pair_lab: PairLab,
) -> None:
    pl = pair_lab
    since = start_both(pl)
    wait_until(lambda: started_by(pl.lab, "alpha") >= 10, timeout=30, what="alpha's second minute")
    pl.set_subscription("beta", False)  # nothing of alpha's arrives at beta for a while
    result = cluster.request_transfer(pl.lab.app("alpha"), SYSTEM, pl.node_id("beta"))
    assert result.state == "pending"  # runs in flight: alpha drains first
    wait_until(
        lambda: pl.ownership("alpha") == (pl.node_id("beta"), 2),
        timeout=30,
        what="the handoff committed on alpha",
    )
    paused_at = time.time()
    time.sleep(9)  # a minute and a half of schedule: a slot falls due in the pause
    effects = read_effects(pl.lab.effects)
    assert not [e for e in effects if e.kind == "start" and e.at > paused_at]
    assert pl.ownership("beta") == (pl.node_id("alpha"), 1)  # not arrived: a safe pause
    pl.set_subscription("beta", True)
    wait_until(
        lambda: started_by(pl.lab, "beta", generation=2) >= 5,
        timeout=40,
        what="beta running after the ownership transaction arrived",
    )
    settle(pl)
    check_all(pl, since)
    assert started_by(pl.lab, "alpha", generation=2) == 0
    assert started_by(pl.lab, "beta", generation=1) == 0


def test_a_partition_between_the_nodes_keeps_one_owner(pair_lab: PairLab) -> None:
    pl = pair_lab
    since = start_both(pl)
    pl.cut()  # each node still reaches its own database
    before = started_by(pl.lab, "alpha")

    def cut_seen() -> bool:
        return not replication.status(pl.lab.app("beta"), SYSTEM).healthy

    wait_until(cut_seen, timeout=30, what="beta's status to report the cut link")
    wait_until(
        lambda: started_by(pl.lab, "alpha") >= before + 10,
        timeout=40,
        what="alpha running on during the partition",
    )
    assert started_by(pl.lab, "beta") == 0
    assert pl.runs("alpha") != pl.runs("beta")  # beta has not received them
    settle(pl)  # the link heals: beta receives everything alpha recorded
    check_all(pl, since)
    assert started_by(pl.lab, "beta") == 0
    for name in NODES:
        wait_until(
            lambda name=name: replication.status(pl.lab.app(name), SYSTEM).healthy,  # type: ignore[misc]
            timeout=30,
            what=f"{name}'s replication healthy again",
        )


def all_ended(pl: PairLab, node: str) -> bool:
    effects = read_effects(pl.lab.effects)
    started = {(e.slot, e.target) for e in effects if e.kind == "start" and e.node == node}
    ended = {(e.slot, e.target) for e in effects if e.kind == "end" and e.node == node}
    return started <= ended


def test_forced_takeover_on_the_survivor_and_rejoin(pair_lab: PairLab) -> None:
    pl = pair_lab
    since = start_both(pl)
    pl.lab.signal("alpha", signal.SIGKILL)  # the old owner's machine dies...
    pl.lab.processes["alpha"].wait()
    wait_until(lambda: all_ended(pl, "alpha"), timeout=20, what="alpha's commands to end")
    wait_until(pl.in_step, timeout=30, what="alpha's last writes on beta")
    pl.cut()  # ...and the link to it is down when it comes back
    # Its claims' commands are gone (the operator checked): --targets-verified.
    cluster.takeover(
        pl.lab.app("beta"),
        SYSTEM,
        pl.lab.node("beta"),
        "http://alpha.test:8080",
        confirm_fenced=True,
        targets_verified=True,
    )
    wait_until(
        lambda: started_by(pl.lab, "beta", generation=2) >= 5, timeout=30, what="beta running"
    )
    # alpha returns, still cut off: it has not received generation 2 and may not rejoin.
    with pytest.raises(CoordinationError, match="rejoin refused"):
        cluster.verify_rejoin(pl.lab.app("alpha"), SYSTEM, pl.lab.node("alpha"))
    assert pl.ownership("alpha") == (pl.node_id("alpha"), 1)
    pl.restore()
    wait_until(
        lambda: pl.ownership("alpha") == (pl.node_id("beta"), 2),
        timeout=40,
        what="generation 2 on alpha",
    )
    wait_until(
        lambda: not replication.rejoin_problems(pl.lab.app("alpha")),
        timeout=40,
        what="alpha's replication current",
    )
    verdict = cluster.verify_rejoin(pl.lab.app("alpha"), SYSTEM, pl.lab.node("alpha"))
    assert verdict.kind == "standby" and verdict.generation == 2
    rejoined = time.time()
    pl.lab.start("alpha")
    time.sleep(7)  # more than a minute of schedule with both running
    settle(pl)
    check_all(pl, since)
    late = [
        e
        for e in read_effects(pl.lab.effects)
        if e.kind == "start" and e.node == "alpha" and e.at > rejoined
    ]
    assert late == []


def test_negative_control_a_takeover_without_fencing_makes_the_checkers_fail(
    pair_lab: PairLab,
) -> None:
    """The operator skips fencing: alpha keeps running on its own database as owner of
    generation 1 while beta takes over with generation 2. C1, C2 and C4 catch it; a run
    row deleted outside fleetcron makes C3 fail."""
    pl = pair_lab
    since = start_both(pl)
    pl.cut()
    cluster.takeover(
        pl.lab.app("beta"),
        SYSTEM,
        pl.lab.node("beta"),
        "http://alpha.test:8080",
        confirm_fenced=True,  # a lie: alpha still runs
        targets_verified=True,
    )

    def both_executing() -> bool:
        """What the checkers below need, not a count that usually implies it: under load
        beta's first start (once alpha's claims replicated before the cut expire) can come
        after alpha's last start so far. C2 and C4 need a start of alpha after beta's first,
        C1 a slot that both ran."""
        effects = [e for e in read_effects(pl.lab.effects) if e.kind == "start"]
        new = [e for e in effects if e.node == "beta" and e.generation == 2]
        old = [e for e in effects if e.node == "alpha"]
        if len(new) < 5 or len(old) < 15:
            return False
        first_new = min(e.at for e in new)
        both = {(e.slot, e.target) for e in new} & {(e.slot, e.target) for e in old}
        return bool(both) and any(e.at > first_new for e in old)

    def end_of_a_window_with_a_run() -> datetime | None:
        """The end of the window C3 checks below, once beta has recorded a run inside it
        (at 10x, two graces after a slot is 12 s of real time: a quick scenario gets there
        before): taken while both nodes run, so every slot in it was due while they did."""
        until = pl.lab.sim_now() - 2 * GRACE
        with pl.lab.app("beta").db.read() as session:
            inside = session.scalar(
                select(Run.id).where(Run.scheduled_for > since, Run.scheduled_for <= until).limit(1)
            )
        return until if inside is not None else None

    wait_until(both_executing, timeout=60, what="both nodes executing")
    until = eventually(end_of_a_window_with_a_run, 60, "a run of beta's in the window C3 checks")
    effects = read_effects(pl.lab.effects)
    with pytest.raises(SafetyViolation, match="C4"):
        c4_no_overlap_across_owners(effects, until=time.time())
    with pytest.raises(SafetyViolation, match="C2"):
        c2_generation_never_decreases(effects)
    for name in NODES:
        pl.lab.signal(name, signal.SIGTERM)
    for proc in pl.lab.processes.values():
        proc.wait(timeout=30)
    effects = read_effects(pl.lab.effects)
    with pytest.raises(SafetyViolation, match="C1"):
        # Both owners ran the slots after the cut: on the effects file, the same slots twice.
        c1_one_execution_per_slot(pl.lab.app("beta"), effects)
    with pl.lab.app("beta").db.session() as session:
        # The first run of the window C3 checks: a slot due before ``since`` (fired late when
        # the fixture's replication waits took longer than a schedule minute) is outside it.
        first = session.scalars(
            select(Run)
            .where(Run.scheduled_for > since, Run.scheduled_for <= until)
            .order_by(Run.scheduled_for)
        ).first()
        assert first is not None
        session.execute(delete(Run).where(Run.id == first.id))
    with pytest.raises(SafetyViolation, match="C3"):
        c3_every_due_slot_accounted_for(pl.lab.app("beta"), since, until)
        c6_newest_runs_kept(pl.lab.app("beta"))
