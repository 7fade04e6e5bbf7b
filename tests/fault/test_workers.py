"""A node's worker processes (``fleetcron scheduler --workers N``) on real PostgreSQL:
each executes only its own shards, every slot is recorded once, and a worker killed
while its commands run is restarted without any shard ever executing in two processes.

Checked by C1-C4 and C6 (``checkers.py``). C4 (no two executors of one shard at once) is
the one the split answers to: two scheduler processes of one node that do not split the
shards execute the same shards at the same time, which the negative control shows C4
catching while C1 (the database's one run per slot) still passes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from checkers import (
    Effect,
    SafetyViolation,
    c1_one_execution_per_slot,
    c2_generation_never_decreases,
    c3_every_due_slot_accounted_for,
    c4_no_overlap_across_owners,
    c6_newest_runs_kept,
    read_effects,
)
from harness import Lab, wait_until

from fleetcron.app import SYSTEM
from fleetcron.coordination import members
from fleetcron.core.members import worker_shards
from fleetcron.services.runs.reads import request_run
from fleetcron.store.schema import Run
from waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

GRACE = timedelta(seconds=60)
LEASE = {"FLEETCRON_LEASE_S": "3", "FLEETCRON_LEASE_RENEW_S": "0.5"}
SHARDS = 4
TARGETS = 12


def started_by(lab: Lab) -> Counter[str]:
    return Counter(e.node for e in read_effects(lab.effects) if e.kind == "start")


def started_targets(lab: Lab) -> set[str]:
    return {e.target for e in read_effects(lab.effects) if e.kind == "start"}


def check_all(lab: Lab, since: datetime) -> None:
    effects = read_effects(lab.effects)
    app = lab.app("alpha")
    c1_one_execution_per_slot(app, effects)
    c2_generation_never_decreases(effects)
    c3_every_due_slot_accounted_for(app, since, lab.accounted_until(GRACE))
    c6_newest_runs_kept(app)
    c4_no_overlap_across_owners(effects, until=time.time())


def shard_of_worker(lab: Lab, count: int) -> dict[int, str]:
    """Shard -> the node name of the worker that should execute it."""
    node_id = lab.node("alpha").identity.node_id
    split = worker_shards(node_id, count, SHARDS)
    return {shard: f"alpha/{w}" for w, shards in enumerate(split) for shard in shards}


def executed_elsewhere(lab: Lab, count: int) -> list[tuple[int, str]]:
    """Runs recorded by a process other than their shard's worker: (run id, its node)."""
    expected = shard_of_worker(lab, count)
    with lab.app("alpha").db.read() as session:
        runs = session.query(Run.id, Run.shard, Run.node).filter(Run.started_at.is_not(None))
        return [(r.id, r.node) for r in runs if expected[r.shard] != r.node]


@pytest.fixture
def sharded(lab: Lab) -> Lab:
    lab.shards = SHARDS
    lab.approve("alpha")
    lab.make_owner("alpha")
    return lab


def test_two_workers_split_the_shards_and_a_killed_worker_comes_back(sharded: Lab) -> None:
    lab = sharded
    lab.add_fleet(TARGETS, work="sleep 2")
    since = lab.sim_now()
    # With automatic failover: each worker renews the lease and its member row together.
    first = lab.start_worker("alpha", 0, 2, **LEASE)
    second = lab.start_worker("alpha", 1, 2, **LEASE)
    wait_until(
        lambda: all(started_by(lab)[w] >= 2 * TARGETS // 3 for w in (first, second)),
        timeout=60,
        what="both workers executing their shards",
    )
    node_id = lab.node("alpha").identity.node_id
    with lab.app("alpha").db.read() as session:
        live = [m.name for m in members.live_members(session)]
    assert live == [f"{node_id}/0", f"{node_id}/1"]
    # Killed while its commands run; started again (its parent would restart it).
    lab.signal(second, signal.SIGKILL)
    lab.processes[second].wait()
    killed_at = sum(started_by(lab).values())
    lab.start_worker("alpha", 1, 2, **LEASE)
    wait_until(
        lambda: sum(started_by(lab).values()) >= killed_at + 2 * TARGETS,
        timeout=90,
        what="two more minutes of the fleet after the restart",
    )
    lab.stop_all()

    check_all(lab, since)
    assert executed_elsewhere(lab, 2) == []
    counts = started_by(lab)
    assert set(counts) == {first, second}, counts


def overlapping(effects: list[Effect]) -> bool:
    """Whether C4 finds two executors of one shard at once in ``effects`` so far."""
    try:
        c4_no_overlap_across_owners(effects, until=time.time())
    except SafetyViolation:
        return True
    return False


def test_negative_control_two_processes_that_do_not_split_execute_one_shard_at_once(
    sharded: Lab,
) -> None:
    """Two scheduler processes of one node without the split: the database still lets
    each slot run once (C1 passes), but both execute the same shards at the same time,
    which C4 catches, and runs land outside their shard's worker."""
    lab = sharded
    lab.add_fleet(TARGETS, work="sleep 2")
    lab.start("alpha", FLEETCRON_NODE_NAME="alpha/0")
    lab.processes["alpha/0"] = lab.processes.pop("alpha")
    lab.start("alpha", FLEETCRON_NODE_NAME="alpha/1")
    lab.processes["alpha/1"] = lab.processes.pop("alpha")
    # Which process claims a minute's slots is a race: one may take a whole minute and the
    # other the next, their executions then apart in time though in the same shards (seen
    # under load). Without the split the two keep taking the same shards, so their spans
    # in a shard interleave within a few minutes; the control waits for that (and fails if
    # it never comes), then checks every effect after the stop.
    wait_until(
        lambda: min(started_by(lab)[w] for w in ("alpha/0", "alpha/1")) >= 3
        and overlapping(read_effects(lab.effects)),
        timeout=120,
        what="both processes executing one shard at once",
    )
    lab.stop_all()

    effects = read_effects(lab.effects)
    c1_one_execution_per_slot(lab.app("alpha"), effects)
    with pytest.raises(SafetyViolation, match="C4"):
        c4_no_overlap_across_owners(effects, until=time.time())
    assert executed_elsewhere(lab, 2)


def test_the_command_starts_its_workers_and_they_stop_with_it(sharded: Lab, tmp_path: Path) -> None:
    """``fleetcron scheduler --workers 2`` as an operator types it: worker 0 starts worker
    1 (``--worker-of 1/2``), both execute, and killing worker 0 stops worker 1 too."""
    lab = sharded
    lab.add_fleet(TARGETS, work="sleep 0")
    env = lab.env("alpha", FLEETCRON_TICK_S="0.2", PYTHONPATH="")
    with open(tmp_path / "workers.log", "ab") as log:
        parent = subprocess.Popen(
            [sys.executable, "-m", "fleetcron", "scheduler", "--workers", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        child = eventually(lambda: _workers_of(parent.pid), 30, "worker 1 started")
        assert child == [("--worker-of", "1/2")], child
        # The real clock: a manual run of the job on every target, which each worker
        # starts on the targets of its own shards.
        request_run(lab.app("alpha"), SYSTEM, "everywhere")
        # Every target started (each by its shard's worker), not a count of starts that
        # worker 0 alone can reach with scheduled runs while worker 1 still starts up.
        eventually(
            lambda: len(started_targets(lab)) == TARGETS,
            60,
            lambda: f"every target started: {sorted(started_targets(lab))}",
        )
        assert set(started_by(lab)) == {"alpha/0", "alpha/1"}
        assert executed_elsewhere(lab, 2) == []
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        eventually(lambda: not _workers_of(parent.pid, alive=True), 30, "worker 1 stopped")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


_seen: dict[int, list[int]] = {}


def _workers_of(pid: int, *, alive: bool = False) -> list[tuple[str, str]]:
    """The ``--worker-of`` arguments of the processes ``pid`` started (with ``alive``:
    of those seen before that still exist, since a killed parent has no children)."""
    found = []
    pids = _seen.get(pid, []) if alive else _children(pid)
    _seen.setdefault(pid, []).extend(p for p in pids if p not in _seen.get(pid, []))
    for child in pids:
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if "--worker-of" in argv:
            found.append(("--worker-of", argv[argv.index("--worker-of") + 1]))
    return found


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]
