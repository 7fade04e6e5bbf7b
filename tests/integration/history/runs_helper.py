"""Runs recorded through the run store (claim, then finish), for the history tests."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import App
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult, OutputExcerpt
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Assignment, Job


def output(text: str) -> OutputExcerpt:
    if not text:
        return EMPTY_OUTPUT
    return OutputExcerpt(head=text, tail="", total_bytes=len(text.encode()), truncated=False)


def fire_minutes(
    app: App,
    clock: FakeClock,
    outcomes: Sequence[Sequence[tuple[str, int]]],
    *,
    stdout: Sequence[Sequence[str]] = (),
    stderr: Sequence[Sequence[str]] = (),
    jobs: Collection[str] = (),
) -> None:
    """For each minute: claim what is due, then finish its runs, in (target, job) name
    order, with the given (status, duration_ms) per run and the given output (by minute,
    then run); the jobs are on ``* * * * *``. ``jobs``: only these jobs' slots are claimed
    (on an app that other tests share, whose jobs may fall due in the same minutes)."""
    store = RunStore(app.db, node="test", clock=clock)
    others: list[int] = []
    if jobs:
        with app.db.read() as session:
            others = list(
                session.scalars(
                    select(Assignment.id).join(Job).where(Job.name.not_in(sorted(jobs)))
                )
            )
    for index, minute in enumerate(outcomes):
        clock.advance(minutes=1)
        claimed = store.claim_due(clock.now, exclude=others)
        dispatches = sorted(claimed.dispatches, key=lambda d: (d.target_name, d.job_name))
        assert len(dispatches) == len(minute), (len(dispatches), len(minute))
        results = []
        for place, (dispatch, (status, duration)) in enumerate(
            zip(dispatches, minute, strict=True)
        ):
            out = stdout[index][place] if index < len(stdout) else ""
            err = stderr[index][place] if index < len(stderr) else ""
            exit_code = 0 if status == "succeeded" else 1 if status == "failed" else None
            results.append(
                (
                    dispatch.run_id,
                    ExecResult(
                        status,  # type: ignore[arg-type]
                        exit_code,
                        output(out),
                        output(err),
                        clock.now,
                        clock.now,
                        duration,
                    ),
                )
            )
        assert store.finish(results) == []
