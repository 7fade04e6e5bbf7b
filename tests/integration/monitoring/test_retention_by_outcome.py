"""History kept by outcome (SQLite and PostgreSQL): successes, failures and the other runs
each pruned after their own days, a job's own days overriding the settings, the newest N
runs of each job on each target always kept, never a run whose claim is live, and the
cleaner's rounds readable afterwards (``retention.status``, the audit event and the log
line with the stable action ``retention.prune``)."""

from __future__ import annotations

import itertools
import logging
from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import retention
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import ExecutionClaim, Run

ADMIN = Actor("admin", "admin")
_SECONDS = itertools.count()


def old_run(app: App, *, days: float, status: str, job_id: int = 1, assignment_id: int = 1) -> int:
    """One finished run of ``status`` scheduled ``days`` ago."""
    slot = app.now() - timedelta(days=days, seconds=next(_SECONDS))
    row = (
        {"assignment_id": assignment_id, "job_id": job_id, "target_id": 1}
        | {"job_name": f"job{job_id}", "target_name": "box", "origin": "individual"}
        | {"command": "true", "scheduled_for": slot, "trigger": "schedule", "attempt": 1}
        | {"status": status, "started_at": slot, "finished_at": slot, "node": "t"}
        | {"actor": "system", "created_at": slot}
    )
    with app.db.engine.begin() as conn:
        table = Run.__table__
        return int(conn.execute(insert(table).returning(table.c.id), [row]).scalar_one())  # type: ignore[arg-type]


def left(app: App) -> set[int]:
    with app.db.read() as session:
        return set(session.scalars(select(Run.id)))


def configure(app: App, **values: int) -> None:
    for name, value in values.items():
        object.__setattr__(app.settings, name, value)


def test_each_outcome_is_kept_its_own_days(app: App) -> None:
    configure(app, retention_success_days=14, retention_failure_days=90, retention_days=30)
    success_20 = old_run(app, days=20, status="succeeded")
    success_10 = old_run(app, days=10, status="succeeded")
    failure_20 = old_run(app, days=20, status="failed")
    timeout_60 = old_run(app, days=60, status="timed_out")
    failure_100 = old_run(app, days=100, status="connect_error")
    skipped_20 = old_run(app, days=20, status="skipped")
    missed_40 = old_run(app, days=40, status="missed")

    result = retention.prune(app, ADMIN)

    assert dict(result.by_outcome) == {"succeeded": 1, "failed": 1, "other": 1}
    assert result.runs_by_age == 3
    assert left(app) == {success_10, failure_20, timeout_60, skipped_20}
    assert not {success_20, failure_100, missed_40} & left(app)


def test_without_the_new_settings_every_outcome_follows_retention_days(app: App) -> None:
    """Negative control, and today's behaviour for an existing install: unset, the days by
    outcome are ``retention_days`` (90), so a 20-day-old success stays and nothing is kept
    past 90 days whatever its outcome."""
    kept = {old_run(app, days=20, status=s) for s in ("succeeded", "failed", "skipped")}
    for status in ("succeeded", "failed", "skipped"):
        old_run(app, days=91, status=status)
    assert retention.prune(app, ADMIN).runs_by_age == 3
    assert left(app) == kept


def test_a_jobs_own_days_override_the_settings(app: App) -> None:
    configure(app, retention_success_days=14, retention_failure_days=14)
    targets.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL))
    spec = JobSpec("0 2 * * *", "echo keep", "UTC", keep_successes_days=30, keep_failures_days=7)
    job_id = jobs.add_job(app, ADMIN, "keeper", spec, target="box").id
    # Runs of an assignment since removed (history outlives it): no newest-run columns.
    gone = 900
    own_success = old_run(app, days=20, status="succeeded", job_id=job_id, assignment_id=gone)
    own_failure = old_run(app, days=10, status="failed", job_id=job_id, assignment_id=gone)
    other_success = old_run(app, days=20, status="succeeded", job_id=999, assignment_id=gone)
    other_failure = old_run(app, days=10, status="failed", job_id=999, assignment_id=gone)

    retention.prune(app, ADMIN)

    assert own_success in left(app) and other_success not in left(app)
    assert own_failure not in left(app) and other_failure in left(app)
    policy = retention.status(app, ADMIN).policy
    assert policy.job_successes == {30: (job_id,)} and policy.job_failures == {7: (job_id,)}


@pytest.mark.parametrize("keep_last", [0, 2])
def test_the_newest_runs_of_each_assignment_are_kept_whatever_their_age(
    app: App, keep_last: int
) -> None:
    configure(app, retention_keep_last=keep_last)
    first = [old_run(app, days=200 - k, status="succeeded", assignment_id=1) for k in range(5)]
    second = [old_run(app, days=150, status="failed", assignment_id=2)]

    retention.prune(app, ADMIN)

    # days=200-k: the newest is the last made.
    expected = set(first[-keep_last:]) | set(second) if keep_last else set()
    assert left(app) == expected


def test_a_run_whose_claim_is_live_is_never_pruned(app: App) -> None:
    live = old_run(app, days=200, status="fenced")
    done = old_run(app, days=200, status="fenced")
    with app.db.session() as session:
        for run_id, state in ((live, "live"), (done, "done")):
            session.add(
                ExecutionClaim(
                    run_id=run_id,
                    node_id="n1",
                    generation=1,
                    created_at=app.now(),
                    deadline_at=app.now() + timedelta(hours=1),
                    state=state,
                )
            )
    retention.prune(app, ADMIN)
    # The claim that is done is the negative control: its run goes.
    assert left(app) == {live}


def test_the_cleaners_work_is_visible(app: App, caplog: pytest.LogCaptureFixture) -> None:
    configure(app, retention_success_days=14)
    old_run(app, days=20, status="succeeded")
    old_run(app, days=100, status="failed")
    assert retention.status(app, ADMIN).recent == []

    with caplog.at_level(logging.INFO, logger="fleetcron.services.runs.retention"):
        retention.prune(app, ADMIN)

    recent = retention.status(app, ADMIN).recent
    assert len(recent) == 1
    assert recent[0].actor == "admin"
    assert recent[0].detail["runs_by_outcome"] == {"succeeded": 1, "failed": 1, "other": 0}
    assert [r.action for r in caplog.records if hasattr(r, "action")] == ["retention.prune"]
    # A dry run deletes nothing and records nothing.
    old_run(app, days=20, status="succeeded")
    assert retention.prune(app, ADMIN, dry_run=True).by_outcome["succeeded"] == 1
    assert len(retention.status(app, ADMIN).recent) == 1
