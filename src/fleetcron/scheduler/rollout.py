"""The scheduler's part of rollouts: each tick, after claiming due slots, ask the run store
to advance the rolled-out slots (:meth:`~fleetcron.store.runs.RunStore.advance_rollouts`),
and say what it did in the log.

The decisions are the pure plan's (``core/rollout.py``) over the rows in the database, so
this holds no state: pauses are waited out by asking again on later ticks, and a new owner
after a failover goes on where the old one stopped.
"""

from __future__ import annotations

import logging

from fleetcron.store.run_rollouts import RolloutStep

log = logging.getLogger("fleetcron.cron")


def log_step(step: RolloutStep) -> None:
    """One log line per wave started (per job) and per slot halted."""
    started: dict[str, int] = {}
    for dispatch in step.dispatches:
        started[dispatch.job_name] = started.get(dispatch.job_name, 0) + 1
    for job, count in sorted(started.items()):
        log.info(
            "cron: rollout of %s starts %d target(s)",
            job,
            count,
            extra={"action": "rollout.wave", "job": job, "count": count},
        )
    for halted in step.halted:
        log.warning(
            "cron: rollout of %s at %s halted, %d target(s) skipped: %s",
            halted.job_name,
            halted.scheduled_for.isoformat(),
            halted.skipped,
            halted.reason,
            extra={
                "action": "rollout.halted",
                "job": halted.job_name,
                "scheduled_for": halted.scheduled_for.isoformat(),
                "count": halted.skipped,
                "reason": halted.reason,
            },
        )


__all__ = ["log_step"]
