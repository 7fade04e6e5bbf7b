"""One real cluster scheduler process for the fault-injection tests.

usage: python node_process.py REAL_EPOCH SIM_EPOCH SPEED
Settings come from the environment (FLEETCRON_*). Time runs SPEED times faster than real
time from SIM_EPOCH, the same for every node, so a minute of schedule passes in seconds;
timeouts and claim deadlines stay in real seconds on the database clock. SIGTERM stops it.

One decision compares a duration of each clock: after a change of owner, whether an older
generation's claim ends (its real seconds left, on the database clock) within a slot's
misfire grace (its seconds left on the scheduler's clock), so the slot fires late, or not,
so it is recorded skipped at once (``core.planning.wait_for_old_claims``). In production
the two clocks run at one rate. Here the claim's real seconds are counted in the scheduler's
seconds (``SPEED`` times as many) before that comparison, so the decision is the one
production makes (on real time: does the claim end before the slot's grace does?).
Otherwise the planner, comparing real seconds with ten-times-fast ones, waits for a claim
that outlasts the grace and, once the grace has run out meanwhile, records the slot missed
instead of skipped. Nothing else changes: which claims block, and until when, is still
decided on the database clock.

The negative controls weaken the ownership guard of their node by composition, never through
a setting: ``FAULT_NODE_POLICY`` (read here only, by the test harness) is ``unguarded`` (no
guard), ``no-claim-wait`` (a new owner does not wait for the previous owners' claims),
``no-drain`` (with the members placement, a shard is handed over without draining it) or
both, ``no-drain-no-claim-wait``.

Test-only hooks (environment variables read here, never by fleetcron itself):
- ``FAULT_HOLD_AT`` = ``renew`` | ``guard`` | ``commit`` with ``FAULT_HOLD_DIR``: once the
  file ``armed`` exists in that directory, the node stops at that point of its cycle
  (inside the lease renewal's transaction after it locked the ownership row; inside a run
  write after the guard locked it; just before a transaction holding that lock commits),
  writes ``inside`` and waits for ``go`` before it goes on, so the test cuts the link
  exactly there;
- ``FAULT_NO_BOUNDS=1``: the node's sessions get no PostgreSQL bounds and it ends no
  expired owner's sessions (the negative control);
- ``FAULT_WORKER`` = ``I/N``: the process is worker I of the node's N worker processes,
  as ``fleetcron scheduler --workers N`` composes them (the harness starts each one);
- ``FAULT_PLACEMENT=rotated``: with the members placement, the node computes another
  placement than the others (each shard on the next member of the one the product's rule
  names), as a node of another version might during an upgrade;
- ``FAULT_PROFILE_DIR``: the node runs under cProfile and writes ``<name>-<pid>.prof``
  there when it stops (to find where a scenario's CPU goes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

import fleetcron.app
from fleetcron.app import App
from fleetcron.config import load_settings
from fleetcron.coordination import guard, ownership_change, shard_rows
from fleetcron.coordination.node import GUARDED, GuardPolicy
from fleetcron.core import members as core_members
from fleetcron.core import planning
from fleetcron.core.planning import OldClaim, Plan, SlotPolicy
from fleetcron.core.shards import Member
from fleetcron.logs import configure_logging
from fleetcron.scheduler.assembly import build_scheduler
from fleetcron.scheduler.workers import parse_worker_of
from fleetcron.services.cluster import lease as cluster_lease
from fleetcron.store import runs as run_store
from waiting import eventually


class _Patch:
    """The hooks replace functions for the life of the process (never undone): a plain
    ``setattr`` (pytest's MonkeyPatch would cost every node pytest's import, 0.1 s)."""

    @staticmethod
    def setattr(owner: object, name: str, value: object) -> None:
        assert hasattr(owner, name), f"{owner!r} has no {name}"
        setattr(owner, name, value)


PATCH = _Patch()


def _hold(directory: Path) -> None:
    """Once armed, stop here once: say so and wait for the test's ``go``."""
    armed = directory / "armed"
    if not armed.exists():
        return
    armed.unlink()
    (directory / "inside").write_text(str(time.time()))
    # The node holds here, inside the step under test, until the test says go (at most a
    # minute: a test that fails before its go does not leave the node held).
    with contextlib.suppress(AssertionError):
        eventually((directory / "go").exists, 60, "the test's go", interval=0.01)


def _install_hold(point: str, directory: Path) -> None:
    original_renew = ownership_change.renew_lease
    original_verdict = guard.CoordinatedGuard.verdict

    def renew(session: Session, ownership: Any, lease_s: float) -> None:
        if point == "renew":
            _hold(directory)
        original_renew(session, ownership, lease_s)
        session.info["holds_ownership_lock"] = True

    original_renew_all = shard_rows.renew_leases

    def renew_all(session: Session, node_id: str, lease_s: float) -> bool | None:
        # The owner's renewal of every shard it owns: one UPDATE, which locks the rows.
        draining = original_renew_all(session, node_id, lease_s)
        if draining is not None:
            if point == "renew":
                _hold(directory)
            session.info["holds_ownership_lock"] = True
        return draining

    def verdict(self: guard.CoordinatedGuard, session: Session, **shards: Any) -> Any:
        result = original_verdict(self, session, **shards)
        if point == "guard":
            _hold(directory)
        return result

    def before_commit(session: Session) -> None:
        if point == "commit" and session.info.pop("holds_ownership_lock", False):
            _hold(directory)

    PATCH.setattr(cluster_lease, "renew_lease", renew)
    PATCH.setattr(cluster_lease, "renew_leases", renew_all)
    PATCH.setattr(guard.CoordinatedGuard, "verdict", verdict)
    event.listen(Session, "before_commit", before_commit)


def _remove_bounds() -> None:
    def unbounded(_lease: float | None) -> None:
        return None

    def end_nothing(_self: cluster_lease.Lease) -> None:
        return None

    PATCH.setattr(fleetcron.app, "session_bounds", unbounded)
    PATCH.setattr(cluster_lease.Lease, "_end_expired_owner_sessions", end_nothing)


def _rotate_placement() -> None:
    """This node's placement puts each shard on the member after the one the product's
    rule names (by name, wrapping around): it disagrees with every other node."""
    original = core_members.placement

    def rotated(
        shards: int,
        live: Sequence[Member],
        owners: Mapping[int, str | None],
        pins: Mapping[int, str] | None = None,
    ) -> dict[int, str]:
        placed = original(shards, live, owners, pins)
        names = sorted(set(placed.values()))
        following = {name: names[(i + 1) % len(names)] for i, name in enumerate(names)}
        return {shard: following[member] for shard, member in placed.items()}

    PATCH.setattr(core_members, "placement", rotated)


def _claim_wait_on_the_scheduler_clock(speed: float) -> None:
    """The planner's claim-versus-grace comparison on one clock (see the module's doc)."""
    original = planning.wait_for_old_claims

    def wait_for_old_claims(
        plan: Plan, claims: Sequence[OldClaim], now: datetime, policy: SlotPolicy
    ) -> Plan | None:
        in_scheduler_seconds = [replace(c, remaining_s=c.remaining_s * speed) for c in claims]
        return original(plan, in_scheduler_seconds, now, policy)

    PATCH.setattr(run_store, "wait_for_old_claims", wait_for_old_claims)


#: FAULT_NODE_POLICY's values: the guard policies of the negative controls.
POLICIES = {
    "": GUARDED,
    "unguarded": GuardPolicy(guarded=False),
    "no-claim-wait": GuardPolicy(wait_for_old_claims=False),
    "no-drain": GuardPolicy(drain_before_move=False),
    "no-drain-no-claim-wait": GuardPolicy(wait_for_old_claims=False, drain_before_move=False),
}


def main(real_epoch: float, sim_epoch: datetime, speed: float) -> None:
    configure_logging()
    _claim_wait_on_the_scheduler_clock(speed)
    if os.environ.get("FAULT_HOLD_AT"):
        _install_hold(os.environ["FAULT_HOLD_AT"], Path(os.environ["FAULT_HOLD_DIR"]))
    if os.environ.get("FAULT_NO_BOUNDS") == "1":
        _remove_bounds()
    if os.environ.get("FAULT_PLACEMENT") == "rotated":
        _rotate_placement()

    def clock() -> datetime:
        return sim_epoch + timedelta(seconds=(time.time() - real_epoch) * speed)

    app = App.open(load_settings(), clock=clock)
    policy = POLICIES[os.environ.get("FAULT_NODE_POLICY", "")]

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        assert app.settings.cluster, "the fault harness starts cluster nodes"
        worker = (
            parse_worker_of(os.environ["FAULT_WORKER"]) if "FAULT_WORKER" in os.environ else None
        )
        await build_scheduler(app, guard_policy=policy, worker=worker).serve(stop)

    asyncio.run(run())
    app.close()


def entry(args: Sequence[str]) -> None:
    """What ``python node_process.py REAL_EPOCH SIM_EPOCH SPEED`` runs (node_server.py forks
    a child that runs it with these ``args``)."""
    real_epoch, sim_epoch, speed = float(args[0]), datetime.fromisoformat(args[1]), float(args[2])
    directory = os.environ.get("FAULT_PROFILE_DIR")
    if not directory:
        main(real_epoch, sim_epoch, speed)
        return
    import cProfile

    Path(directory).mkdir(parents=True, exist_ok=True)
    with cProfile.Profile() as profile:
        main(real_epoch, sim_epoch, speed)
    node = os.environ["FLEETCRON_NODE_NAME"].replace("/", "-")
    profile.dump_stats(Path(directory) / f"{node}-{os.getpid()}.prof")


if __name__ == "__main__":
    entry(sys.argv[1:])
