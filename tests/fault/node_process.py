"""One real cluster scheduler process for the fault-injection tests.

usage: python node_process.py REAL_EPOCH SIM_EPOCH SPEED
Settings come from the environment (FLEETCRON_*). Time runs SPEED times faster than real
time from SIM_EPOCH, the same for every node, so a minute of schedule passes in seconds;
timeouts and claim deadlines stay in real seconds on the database clock. SIGTERM stops it.

The negative controls weaken the ownership guard of their node by composition, never through
a setting: ``FAULT_NODE_POLICY`` (read here only, by the test harness) is ``unguarded`` (no
guard) or ``no-claim-wait`` (a new owner does not wait for the previous owners' claims).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import datetime, timedelta

from fleetcron.app import App
from fleetcron.config import load_settings
from fleetcron.coordination.node import GUARDED, GuardPolicy
from fleetcron.logs import configure_logging
from fleetcron.scheduler.assembly import build_scheduler

#: FAULT_NODE_POLICY's values: the guard policies of the negative controls.
POLICIES = {
    "": GUARDED,
    "unguarded": GuardPolicy(guarded=False),
    "no-claim-wait": GuardPolicy(wait_for_old_claims=False),
}


def main(real_epoch: float, sim_epoch: datetime, speed: float) -> None:
    configure_logging()

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
