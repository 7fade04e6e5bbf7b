"""Runs recorded through the run store (claim, then finish), for the history tests."""

from __future__ import annotations

from collections.abc import Sequence

from fixtures.app import FakeClock
from fleetcron.app import App
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.store.runs import RunStore


def fire_minutes(app: App, clock: FakeClock, outcomes: Sequence[Sequence[tuple[str, int]]]) -> None:
    """For each minute: claim what is due, then finish its runs in target-name order with
    the given (status, duration_ms) per run (jobs on ``* * * * *``)."""
    store = RunStore(app.db, node="test", clock=clock)
    for minute in outcomes:
        clock.advance(minutes=1)
        claimed = store.claim_due(clock.now)
        dispatches = sorted(claimed.dispatches, key=lambda d: d.target_name)
        assert len(dispatches) == len(minute), (len(dispatches), len(minute))
        results = []
        for dispatch, (status, duration) in zip(dispatches, minute, strict=True):
            exit_code = 0 if status == "succeeded" else 1 if status == "failed" else None
            results.append(
                (
                    dispatch.run_id,
                    ExecResult(
                        status,  # type: ignore[arg-type]
                        exit_code,
                        EMPTY_OUTPUT,
                        EMPTY_OUTPUT,
                        clock.now,
                        clock.now,
                        duration,
                    ),
                )
            )
        assert store.finish(results) == []
