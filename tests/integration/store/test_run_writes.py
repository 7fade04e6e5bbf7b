"""The run writes outside the claim path (``store/run_writes.py``) and the transition check
every run write makes: a move the run vocabulary does not allow is refused, and nothing is
written."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.statuses import ExecutorStatus, RunStatus
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecResult, OutputExcerpt
from fleetcron.scheduler.service import policy_from
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs_svc
from fleetcron.services.runs import retention
from fleetcron.services.targets import edit as targets
from fleetcron.store.run_writes import fence_runs, moved
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Run

EMPTY = OutputExcerpt(head="", tail="", total_bytes=0, truncated=False)


def statuses(app: App) -> list[tuple[int, RunStatus]]:
    with app.db.read() as session:
        return [(i, s) for i, s in session.execute(select(Run.id, Run.status).order_by(Run.id))]


def result(status: str, clock: FakeClock) -> ExecResult:
    return ExecResult(cast(ExecutorStatus, status), 0, EMPTY, EMPTY, clock.now, clock.now, 1)


@pytest.fixture
def running(app: App, admin: Actor, clock: FakeClock) -> tuple[RunStore, int]:
    """A store and the id of one run it recorded as running."""
    store = RunStore(app.db, node="test", policy=policy_from(app), clock=clock)
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", JobSpec("* * * * *", "true"), target="box")
    clock.advance(seconds=31)
    [dispatch] = store.claim_due(clock.now).dispatches
    return store, dispatch.run_id


def test_allowed_moves_pass_and_others_raise_naming_both_statuses() -> None:
    assert moved(None, "queued") is RunStatus.QUEUED
    assert moved(RunStatus.RUNNING, RunStatus.FENCED) is RunStatus.FENCED
    with pytest.raises(ValueError, match="a succeeded run may not become 'running'"):
        moved(RunStatus.SUCCEEDED, RunStatus.RUNNING)
    with pytest.raises(ValueError, match="a new run may not become 'succeeded'"):
        moved(None, RunStatus.SUCCEEDED)
    with pytest.raises(ValueError, match="may not become 'cancel'"):
        moved(RunStatus.RUNNING, "cancel")


def test_a_completion_with_a_status_running_may_not_become_is_refused_whole(
    app: App, running: tuple[RunStore, int], clock: FakeClock
) -> None:
    store, run_id = running
    with pytest.raises(ValueError, match="a running run may not become 'queued'"):
        store.finish([(run_id, result("queued", clock))])
    assert statuses(app) == [(run_id, RunStatus.RUNNING)]
    # Negative control: the same write with an executor outcome goes through.
    assert store.finish([(run_id, result("succeeded", clock))]) == []
    assert statuses(app) == [(run_id, RunStatus.SUCCEEDED)]


def test_fencing_ends_only_running_runs(
    app: App, running: tuple[RunStore, int], clock: FakeClock
) -> None:
    store, run_id = running
    with app.db.session() as session:
        assert fence_runs(session, [run_id], clock.now, "claim revoked") == 1
    with app.db.session() as session:
        # Already fenced: a second fence changes nothing (fenced is terminal).
        assert fence_runs(session, [run_id], clock.now, "again") == 0
        assert fence_runs(session, [], clock.now, "nothing") == 0
    assert statuses(app) == [(run_id, RunStatus.FENCED)]
    # A fenced run's late completion is not written over it.
    store.finish([(run_id, result("succeeded", clock))])
    with app.db.read() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status is RunStatus.FENCED
        assert run.reason == "claim revoked"


def test_manual_runs_are_queued_by_the_store_and_active_runs_are_never_pruned(
    app: App, admin: Actor, running: tuple[RunStore, int], clock: FakeClock
) -> None:
    _store, run_id = running
    [queued] = runs_svc.request_run(app, admin, "reload")
    with app.db.read() as session:
        row = session.get(Run, queued)
        assert row is not None
        assert (row.status, row.trigger, row.actor) == (RunStatus.QUEUED, "manual", "admin")
    clock.advance(days=app.settings.retention_days + 1)
    assert retention.prune(app, admin, dry_run=True).runs_by_age == 0
    assert {i for i, _ in statuses(app)} == {run_id, queued}
    # Negative control: once decided, the old run is pruned.
    with app.db.session() as session:
        fence_runs(session, [run_id], clock.now - timedelta(days=1), "ended")
    assert retention.prune(app, admin).runs_by_age == 1
    assert [i for i, _ in statuses(app)] == [queued]
