"""Run one real scheduler process until a rolled-out slot is done (the rollout test's
two-process adversary).

usage: python drive_rollout.py DATABASE_URL NODE NOW_ISO GO_FILE

The clock stands still at NOW (one slot due, no later one). The process writes NODE.ready
beside GO_FILE when set up, waits for GO_FILE, then ticks as fast as it can until no row of
the job is pending or running, writes the wall-clock times of its first and last tick to
NODE.ticks, and stops.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select

from fleetcron.app import App
from fleetcron.config import load_settings
from fleetcron.core.statuses import ACTIVE
from fleetcron.logs import configure_logging
from fleetcron.scheduler.service import Scheduler
from fleetcron.store.schema import Run
from waiting import eventually, eventually_async


async def main(url: str, node: str, now: datetime, go: Path) -> None:
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
    scheduler = Scheduler(app, clock=lambda: now)
    await scheduler.start()
    go.with_name(f"{node}.ready").touch()
    # Blocking the loop on purpose, as before the scheduler's first tick.
    eventually(go.exists, 60, "the test's go", interval=0.01)

    ticks: list[float] = []

    async def tick_until_done() -> bool:
        ticks.append(time.time())
        await scheduler.tick()
        await asyncio.sleep(0.02)  # the executions started by the tick get to run
        with app.db.read() as session:
            active = session.scalar(select(func.count(Run.id)).where(Run.status.in_(ACTIVE)))
            total = session.scalar(select(func.count(Run.id)))
        return bool(total and not active and not scheduler.running)

    await eventually_async(tick_until_done, 120, "the rolled-out slot to be done", interval=0)
    # When this process competed: its first and its last tick (wall clock, as the effects).
    go.with_name(f"{node}.ticks").write_text(f"{ticks[0]} {ticks[-1]}\n")
    await scheduler.idle()
    await scheduler.shutdown()
    app.close()


if __name__ == "__main__":
    url, node, now_iso, go_file = sys.argv[1:5]
    asyncio.run(main(url, node, datetime.fromisoformat(now_iso), Path(go_file)))
