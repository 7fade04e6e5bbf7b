"""One real cluster scheduler process for the fault-injection tests.

usage: python node_process.py REAL_EPOCH SIM_EPOCH SPEED
Settings come from the environment (FLEETCRON_*). Time runs SPEED times faster than real
time from SIM_EPOCH, the same for every node, so a minute of schedule passes in seconds;
timeouts and claim deadlines stay in real seconds on the database clock. SIGTERM stops it.

The negative controls weaken the ownership guard of their node by composition, never through
a setting: ``FAULT_NODE_POLICY`` (read here only, by the test harness) is ``unguarded`` (no
guard) or ``no-claim-wait`` (a new owner does not wait for the previous owners' claims).

Test-only hooks (environment variables read here, never by fleetcron itself):
- ``FAULT_HOLD_AT`` = ``renew`` | ``guard`` | ``commit`` with ``FAULT_HOLD_DIR``: once the
  file ``armed`` exists in that directory, the node stops at that point of its cycle
  (inside the lease renewal's transaction after it locked the ownership row; inside a run
  write after the guard locked it; just before a transaction holding that lock commits),
  writes ``inside`` and waits for ``go`` before it goes on, so the test cuts the link
  exactly there;
- ``FAULT_NO_BOUNDS=1``: the node's sessions get no PostgreSQL bounds and it ends no
  expired owner's sessions (the negative control).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

import fleetcron.app
from fleetcron.app import App
from fleetcron.config import load_settings
from fleetcron.coordination import guard, ownership_change
from fleetcron.coordination.node import GUARDED, GuardPolicy
from fleetcron.logs import configure_logging
from fleetcron.scheduler.assembly import build_scheduler
from fleetcron.services.cluster import lease as cluster_lease
from waiting import eventually

#: The hooks replace functions for the life of the process (never undone).
PATCH = pytest.MonkeyPatch()


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

    def verdict(self: guard.CoordinatedGuard, session: Session) -> Any:
        result = original_verdict(self, session)
        if point == "guard":
            _hold(directory)
        return result

    def before_commit(session: Session) -> None:
        if point == "commit" and session.info.pop("holds_ownership_lock", False):
            _hold(directory)

    PATCH.setattr(cluster_lease, "renew_lease", renew)
    PATCH.setattr(guard.CoordinatedGuard, "verdict", verdict)
    event.listen(Session, "before_commit", before_commit)


def _remove_bounds() -> None:
    def unbounded(_lease: float | None) -> None:
        return None

    def end_nothing(_self: cluster_lease.Lease) -> None:
        return None

    PATCH.setattr(fleetcron.app, "session_bounds", unbounded)
    PATCH.setattr(cluster_lease.Lease, "_end_expired_owner_sessions", end_nothing)

#: FAULT_NODE_POLICY's values: the guard policies of the negative controls.
POLICIES = {
    "": GUARDED,
    "unguarded": GuardPolicy(guarded=False),
    "no-claim-wait": GuardPolicy(wait_for_old_claims=False),
}


def main(real_epoch: float, sim_epoch: datetime, speed: float) -> None:
    configure_logging()
    if os.environ.get("FAULT_HOLD_AT"):
        _install_hold(os.environ["FAULT_HOLD_AT"], Path(os.environ["FAULT_HOLD_DIR"]))
    if os.environ.get("FAULT_NO_BOUNDS") == "1":
        _remove_bounds()

    def clock() -> datetime:
        return sim_epoch + timedelta(seconds=(time.time() - real_epoch) * speed)

    app = App.open(load_settings(), clock=clock)
    policy = POLICIES[os.environ.get("FAULT_NODE_POLICY", "")]

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        assert app.settings.cluster, "the fault harness starts cluster nodes"
        await build_scheduler(app, guard_policy=policy).serve(stop)

    asyncio.run(run())
    app.close()


if __name__ == "__main__":
    main(float(sys.argv[1]), datetime.fromisoformat(sys.argv[2]), float(sys.argv[3]))
