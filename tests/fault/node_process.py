"""One real cluster scheduler process for the fault-injection tests.

usage: python node_process.py REAL_EPOCH SIM_EPOCH SPEED
Settings come from the environment (FLEETCRON_*). Time runs SPEED times faster than real
time from SIM_EPOCH, the same for every node, so a minute of schedule passes in seconds;
timeouts and claim deadlines stay in real seconds on the database clock. SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from datetime import datetime, timedelta

from fleetcron.app import App
from fleetcron.config import load_settings
from fleetcron.logs import configure_logging
from fleetcron.scheduler.assembly import build_scheduler


def main(real_epoch: float, sim_epoch: datetime, speed: float) -> None:
    configure_logging()

    def clock() -> datetime:
        return sim_epoch + timedelta(seconds=(time.time() - real_epoch) * speed)

    app = App.open(load_settings(), clock=clock)

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        assert app.settings.cluster, "the fault harness starts cluster nodes"
        await build_scheduler(app).serve(stop)

    asyncio.run(run())
    app.close()


if __name__ == "__main__":
    main(float(sys.argv[1]), datetime.fromisoformat(sys.argv[2]), float(sys.argv[3]))
