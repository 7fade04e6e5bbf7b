"""Fault injection: real scheduler processes on one real PostgreSQL, checked by C1-C4.

Simulated time runs ten times faster than real time (a schedule minute lasts 6 s); claim
deadlines and timeouts are real seconds on the database clock.
"""

from __future__ import annotations

import signal
import time
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
from sqlalchemy import Row, select

from fixtures.postgres import PostgresServer
from fleetcron.app import SYSTEM
from fleetcron.services.cluster import status as cluster
from fleetcron.store.schema import ExecutionClaim, Run

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

GRACE = timedelta(seconds=60)


def started_by(lab: Lab, node: str) -> int:
    return sum(1 for e in read_effects(lab.effects) if e.kind == "start" and e.node == node)


def check_all(lab: Lab, since: datetime) -> None:
    effects = read_effects(lab.effects)
    app = lab.app("alpha")
    c1_one_execution_per_slot(app, effects)
    c2_generation_never_decreases(effects)
    c3_every_due_slot_accounted_for(app, since, lab.accounted_until(GRACE))
    c6_newest_runs_kept(app)
    c4_no_overlap_across_owners(effects, until=time.time())


def settle(lab: Lab) -> None:
    """Stop every node gracefully so in-flight runs are recorded."""
    lab.stop_all()


def test_two_nodes_on_one_minute_with_500_assignments_run_each_slot_once(lab: Lab) -> None:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(500)
    since = lab.sim_now()
    lab.start("alpha")
    lab.start("beta")

    wait_until(lambda: started_by(lab, "alpha") >= 500, timeout=60, what="one minute of 500 runs")
    time.sleep(1)
    settle(lab)

    check_all(lab, since)
    assert started_by(lab, "beta") == 0
    assert len({e.slot for e in read_effects(lab.effects)}) >= 1


def test_negative_control_without_the_guard_the_checkers_catch_two_owners(lab: Lab) -> None:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(60, work="sleep 1")
    since = lab.sim_now()
    lab.start("alpha", FAULT_NODE_POLICY="unguarded")
    lab.start("beta", FAULT_NODE_POLICY="unguarded")

    wait_until(
        lambda: started_by(lab, "alpha") > 0 and started_by(lab, "beta") > 0,
        timeout=60,
        what="both nodes executing",
    )
    settle(lab)

    with pytest.raises(SafetyViolation, match="C4"):
        check_all(lab, since)


def test_a_paused_owner_past_its_deadline_is_taken_over_and_its_late_completion_refused(
    lab: Lab,
) -> None:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(5, work="sleep 2", timeout_s=3)
    since = lab.sim_now()
    lab.start("alpha")
    lab.start("beta")
    wait_until(lambda: started_by(lab, "alpha") >= 5, timeout=30, what="alpha's first runs")

    lab.signal("alpha", signal.SIGSTOP)
    time.sleep(10)  # past the claims' deadline: 3 s timeout + 6 s margin
    taken = cluster.takeover(
        lab.app("beta"), SYSTEM, lab.node("beta"), "http://alpha.test:8080", confirm_fenced=True
    )
    lab.signal("alpha", signal.SIGCONT)
    wait_until(
        lambda: len(lab.fenced_writes()) >= 5, timeout=30, what="alpha's refused completions"
    )
    wait_until(lambda: started_by(lab, "beta") >= 5, timeout=30, what="beta running the next slots")
    settle(lab)

    assert taken.generation_after == 2
    fenced = {r.id for r in lab.runs() if r.status == "fenced"}
    assert {w.run_id for w in lab.fenced_writes()} <= fenced
    check_all(lab, since)


def test_a_killed_owner_is_replaced_without_a_duplicate(lab: Lab) -> None:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(5, work="sleep 2", timeout_s=3)
    since = lab.sim_now()
    lab.start("alpha")
    lab.start("beta")
    wait_until(lambda: started_by(lab, "alpha") >= 5, timeout=30, what="alpha's first runs")

    lab.signal("alpha", signal.SIGKILL)
    wait_until(
        lambda: sum(r.status == "fenced" for r in lab.runs()) >= 5,
        timeout=30,
        what="beta's maintenance expiring alpha's claims",
    )
    cluster.takeover(
        lab.app("beta"), SYSTEM, lab.node("beta"), "http://alpha.test:8080", confirm_fenced=True
    )
    wait_until(lambda: started_by(lab, "beta") >= 5, timeout=30, what="beta running the next slots")
    settle(lab)

    check_all(lab, since)


def test_a_handoff_with_20_runs_in_flight_never_overlaps_the_two_nodes(lab: Lab) -> None:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(20, work="sleep 3", timeout_s=10)
    since = lab.sim_now()
    lab.start("alpha")
    lab.start("beta")
    wait_until(lambda: started_by(lab, "alpha") >= 20, timeout=30, what="20 runs in flight")

    pending = cluster.request_transfer(
        lab.app("beta"), SYSTEM, lab.node("beta").identity.node_id, idempotency_key="handoff-1"
    )
    wait_until(
        lambda: cluster.transfer_status(lab.app("beta"), SYSTEM, "handoff-1").state == "completed",
        timeout=30,
        what="the drained handoff",
    )
    wait_until(lambda: started_by(lab, "beta") >= 20, timeout=30, what="beta's first minute")
    settle(lab)

    assert pending.state == "pending"
    check_all(lab, since)


def test_postgresql_restarted_mid_run_loses_no_safety(
    lab: Lab, postgres_server: PostgresServer
) -> None:
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(20, work="sleep 0.5")
    since = lab.sim_now()
    lab.start("alpha")
    lab.start("beta")
    wait_until(lambda: started_by(lab, "alpha") >= 20, timeout=30, what="alpha's first minute")

    postgres_server.restart()
    before = started_by(lab, "alpha")
    wait_until(
        lambda: started_by(lab, "alpha") >= before + 20, timeout=40, what="work after restart"
    )
    settle(lab)

    check_all(lab, since)


LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def test_an_owner_whose_clock_is_30_seconds_ahead_breaks_no_safety_rule(lab: Lab) -> None:
    assert LIBFAKETIME.exists(), "libfaketime is missing: run `bash scripts/system-deps.sh`"
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(10, work="sleep 0.5")
    since = lab.sim_now()
    # 3 real seconds are 30 seconds of schedule at ten times speed.
    lab.start(
        "alpha", LD_PRELOAD=str(LIBFAKETIME), FAKETIME="+3s", FAKETIME_DONT_FAKE_MONOTONIC="1"
    )
    lab.start("beta")
    wait_until(lambda: started_by(lab, "alpha") >= 20, timeout=40, what="two minutes on alpha")

    cluster.request_transfer(
        lab.app("beta"), SYSTEM, lab.node("beta").identity.node_id, idempotency_key="skewed"
    )
    wait_until(lambda: started_by(lab, "beta") >= 10, timeout=40, what="beta after the handoff")
    settle(lab)

    check_all(lab, since)
    # The precondition (the skew was in effect): the database clock is true time, and alpha
    # claimed slots more than 2 s before they came, which a node with a true clock never
    # does: beta, the control, claimed none early. How many of alpha's claims were that
    # early depends on the load (each claim batch of a tick may wait for the cores).
    assert early_claims(lab, "alpha"), "alpha claimed no slot early"
    assert early_claims(lab, "beta") == [], "beta, with a true clock, claimed early"


def early_claims(lab: Lab, node: str) -> list[Row[datetime, datetime]]:
    """``node``'s claims made more than 2 s (real time) before their slot came."""
    with lab.app("alpha").db.read() as session:
        claims = session.execute(
            select(ExecutionClaim.created_at, Run.scheduled_for)
            .join(Run, Run.id == ExecutionClaim.run_id)
            .where(ExecutionClaim.node_id == lab.node(node).identity.node_id)
        ).all()
    return [c for c in claims if c.created_at.timestamp() < lab.real_time_of(c.scheduled_for) - 2]


def test_with_automatic_failover_a_killed_owner_is_replaced_when_its_lease_expires(
    lab: Lab,
) -> None:
    lease = {"FLEETCRON_LEASE_S": "3", "FLEETCRON_LEASE_RENEW_S": "0.5"}
    lab.approve("alpha", "beta")
    lab.make_owner("alpha")
    lab.add_fleet(5, work="sleep 0.5", timeout_s=5)
    since = lab.sim_now()
    lab.start("alpha", **lease)
    lab.start("beta", **lease)
    wait_until(lambda: started_by(lab, "alpha") >= 5, timeout=30, what="alpha's first runs")

    lab.signal("alpha", signal.SIGKILL)
    wait_until(lambda: started_by(lab, "beta") >= 5, timeout=40, what="beta after the failover")
    settle(lab)

    status = cluster.status(lab.app("beta"), SYSTEM, lab.node("beta"))
    assert status.owner == lab.node("beta").identity.node_id
    assert status.generation == 2
    fenced = {n.node_id: n.fenced for n in status.nodes}
    assert fenced[lab.node("alpha").identity.node_id] is True
    check_all(lab, since)
