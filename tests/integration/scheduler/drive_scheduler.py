"""Run one real scheduler process through simulated minutes (used by the exactly-once test).

usage: python drive_scheduler.py DATABASE_URL NODE START_ISO MINUTES GO_FILE

The clock is simulated: the process ticks at second 1 of each minute from START, as fast as
it can. It writes NODE.ready beside GO_FILE when it is set up, then waits for GO_FILE to
exist, so that several processes start ticking together.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime, timedelta
from pathlib import Path

from fleetcron.app import App
from fleetcron.config import load_settings
from fleetcron.logs import configure_logging
from fleetcron.scheduler.service import Scheduler
from waiting import eventually


class SteppedClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


async def main(url: str, node: str, start: datetime, minutes: int, go: Path) -> None:
    # Small claim batches make the two processes interleave within each minute.
    configure_logging()
    app = App.open(
        load_settings(
            database_url=url,
            node_name=node,
            claim_batch=10,
            allow_local_targets=True,
            local_allow_root=True,
            # As in the app fixture that added the jobs: an operator's command may run
            # on these local targets (the dispatch gate asks the same setting).
            local_job_role="operator",
        )
    )
    clock = SteppedClock(start)
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    go.with_name(f"{node}.ready").touch()
    # Blocking the loop on purpose, as before the scheduler's first tick.
    eventually(go.exists, 60, "the test's go", interval=0.01)
    for minute in range(1, minutes + 1):
        clock.now = start + timedelta(minutes=minute, seconds=1)
        await scheduler.tick()

    await scheduler.idle()
    await scheduler.shutdown()
    app.close()


if __name__ == "__main__":
    url, node, start_iso, minutes, go_file = sys.argv[1:6]
    asyncio.run(main(url, node, datetime.fromisoformat(start_iso), int(minutes), Path(go_file)))
