"""The log lines of one run's life in the scheduler (logger ``fleetcron.cron``), each with
a stable ``action``: ``run.dispatch`` when its command is sent, ``run.stopped`` when an
operator stopped it, ``run.superseded`` when a newer owner's mark refused it on the target,
``run.done`` with its outcome."""

from __future__ import annotations

import logging

from fleetcron.executors.base import ExecResult
from fleetcron.store.run_dispatch import Dispatch

log = logging.getLogger("fleetcron.cron")


def log_dispatch(dispatch: Dispatch) -> None:
    log.info(
        "cron: dispatch job=%s target=%s run=%d attempt=%d",
        dispatch.job_name,
        dispatch.target_name,
        dispatch.run_id,
        dispatch.attempt,
        extra={
            "action": "run.dispatch",
            "job": dispatch.job_name,
            "target": dispatch.target_name,
            "run_id": dispatch.run_id,
        },
    )


def log_stopped(run_id: int, by: str) -> None:
    log.info(
        "cron: run %d stopped by %s",
        run_id,
        by,
        extra={"action": "run.stopped", "run_id": run_id, "by": by},
    )


def log_superseded(run_id: int, error: str) -> None:
    log.warning(
        "cron: run %d %s", run_id, error, extra={"action": "run.superseded", "run_id": run_id}
    )


def log_done(dispatch: Dispatch, result: ExecResult) -> None:
    log.info(
        "cron: done    job=%s target=%s run=%d status=%s exit=%s took=%dms",
        dispatch.job_name,
        dispatch.target_name,
        dispatch.run_id,
        result.status,
        "-" if result.exit_code is None else result.exit_code,
        result.duration_ms,
        extra={
            "action": "run.done",
            "job": dispatch.job_name,
            "target": dispatch.target_name,
            "run_id": dispatch.run_id,
            "status": result.status,
            "exit_code": result.exit_code,
            "took_ms": result.duration_ms,
        },
    )
