"""Health, retention and the probes, on SQLite and PostgreSQL.

The fixture clock starts at 2026-03-02 09:00:30 UTC; an every-minute job is due at 09:01.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.metrics import Metrics
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.health import report as health
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import retention
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Run
from fleetcron.web.app import create_app


@pytest.fixture
def box(app: App) -> str:
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    return "box"


async def run_minutes(
    app: App, clock: FakeClock, minutes: int, metrics: Metrics | None = None
) -> None:
    scheduler = Scheduler(app, clock=clock, metrics=metrics)
    await scheduler.start()
    for _ in range(minutes):
        clock.advance(minutes=1)
        await scheduler.tick()
        await scheduler.idle()
    await scheduler.shutdown()


async def test_all_is_well_when_every_slot_ran_and_succeeded(
    app: App, viewer: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "ok", JobSpec("* * * * *", "true"), target=box)
    await run_minutes(app, clock, 2)

    result = health.summary(app, viewer)

    assert result.ok
    assert result.runs_24h == {"succeeded": 2}


async def test_a_failing_job_is_reported_with_its_streak(
    app: App, viewer: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "broken", JobSpec("* * * * *", "exit 3"), target=box)
    await run_minutes(app, clock, 3)

    result = health.summary(app, viewer)

    [problem] = result.problems
    assert (problem.kind, problem.job, problem.target) == ("failing", "broken", "box")
    assert "3 failure(s) in a row" in problem.detail
    assert result.failures_24h == 3


async def test_a_success_after_failures_clears_the_failing_state(
    app: App, viewer: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "flaky", JobSpec("* * * * *", "exit 1"), target=box)
    await run_minutes(app, clock, 2)
    jobs.edit_job(app, SYSTEM, "flaky", command="true")
    await run_minutes(app, clock, 1)

    assert health.summary(app, viewer).ok


def test_a_slot_nobody_decided_is_late(app: App, viewer: Actor, box: str, clock: FakeClock) -> None:
    jobs.add_job(app, SYSTEM, "nightly", JobSpec("0 2 * * *", "true"), target=box)
    clock.advance(days=1)  # no scheduler ran: the 02:00 slot passed undecided

    result = health.summary(app, viewer)

    [problem] = result.problems
    assert (problem.kind, problem.job) == ("late", "nightly")


def test_a_paused_assignment_is_not_late(
    app: App, viewer: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "nightly", JobSpec("0 2 * * *", "true"), target=box)
    jobs.set_enabled(app, SYSTEM, "nightly", False)
    clock.advance(days=1)

    assert health.summary(app, viewer).ok


async def test_a_run_past_its_deadline_is_stuck(
    app: App, viewer: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "slow", JobSpec("* * * * *", "sleep 30", timeout_s=5), target=box)
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    clock.advance(seconds=31)
    await scheduler.tick()
    clock.advance(minutes=5)  # the clock moves on while the run is still going

    kinds = {p.kind for p in health.summary(app, viewer).problems}

    await scheduler.shutdown()
    assert "stuck" in kinds


async def test_prune_removes_runs_beyond_the_per_assignment_cap(
    app: App, admin: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "often", JobSpec("* * * * *", "true"), target=box)
    await run_minutes(app, clock, 5)
    object.__setattr__(app.settings, "retention_max_runs", 2)
    object.__setattr__(app.settings, "prune_batch", 1)

    counted = retention.prune(app, admin, dry_run=True)
    removed = retention.prune(app, admin)

    assert (counted.runs_by_count, removed.runs_by_count) == (3, 3)
    with app.db.read() as session:
        kept = session.scalars(select(Run.scheduled_for).order_by(Run.scheduled_for)).all()
        audited = session.scalar(
            select(func.count(AuditEvent.id)).where(AuditEvent.action == "retention.prune")
        )
    assert [t.minute for t in kept] == [4, 5]
    assert audited == 1


async def test_prune_removes_runs_older_than_the_retention_age(
    app: App, admin: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "often", JobSpec("* * * * *", "true"), target=box)
    await run_minutes(app, clock, 2)
    clock.advance(days=91)

    assert retention.prune(app, admin).runs_by_age == 2


def test_only_an_admin_may_prune(app: App, operator: Actor) -> None:
    with pytest.raises(Exception, match="admin"):
        retention.prune(app, operator)


async def test_probes_and_metrics_answer_without_credentials(
    app: App, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "ok", JobSpec("* * * * *", "true"), target=box)
    metrics = Metrics()
    await run_minutes(app, clock, 2, metrics)
    client = TestClient(create_app(app, metrics=metrics))

    alive = client.get("/healthz")
    ready = client.get("/readyz")
    scraped = client.get("/metrics").text

    assert alive.json() == {"status": "alive"}
    assert ready.status_code == 200 and ready.json()["checks"]["database"] == "ok"
    assert 'fleetcron_runs_total{origin="individual",status="succeeded"} 2.0' in scraped
    assert "fleetcron_dispatch_lateness_seconds_count 2.0" in scraped
    assert "fleetcron_late_assignments 0.0" in scraped
    assert 'fleetcron_ownership{state="standalone"} 1.0' in scraped
    # The incident gauges, read from the database at scrape time (nothing failed).
    assert 'fleetcron_incidents_open{cause="failing"} 0.0' in scraped
    assert 'fleetcron_incidents_silenced{cause="halted"} 0.0' in scraped


def test_the_health_api_needs_credentials_and_reports_late_slots(
    app: App, box: str, clock: FakeClock
) -> None:
    from fleetcron.services.accounts.users import create_token

    jobs.add_job(app, SYSTEM, "nightly", JobSpec("0 2 * * *", "true"), target=box)
    clock.advance(days=1)
    token, _ = create_token(app, SYSTEM, "victor", "probe")
    client = TestClient(create_app(app))

    anonymous = client.get("/api/v1/health")
    answer = client.get("/api/v1/health", headers={"Authorization": f"Bearer {token}"})

    assert anonymous.status_code == 401
    assert answer.json()["ok"] is False
    assert answer.json()["grouped"][0]["kind"] == "late"


async def test_per_target_health_shows_last_run_last_success_and_the_failure_streak(
    app: App, viewer: Actor, box: str, clock: FakeClock
) -> None:
    jobs.add_job(app, SYSTEM, "flaky", JobSpec("* * * * *", "true"), target=box)
    await run_minutes(app, clock, 1)
    jobs.edit_job(app, SYSTEM, "flaky", command="exit 4")
    await run_minutes(app, clock, 2)

    [row] = health.assignment_health(app, viewer, "flaky")

    assert (row.target, row.last_status, row.consecutive_failures, row.late) == (
        "box",
        "failed",
        2,
        False,
    )
    assert row.last_success_at is not None and row.last_run_at is not None
    assert row.last_success_at < row.last_run_at


def test_housekeeping_removes_expired_web_sessions(app: App, clock: FakeClock) -> None:
    from fleetcron.scheduler.housekeeping import Housekeeping
    from fleetcron.services.accounts import sessions
    from fleetcron.store.schema import WebSession

    token, _ = sessions.login(app, "victor", "viewer-password", "127.0.0.1")
    clock.advance(hours=13)

    Housekeeping(app)()

    assert sessions.resolve(app, token) is None
    with app.db.read() as session:
        assert session.scalar(select(func.count(WebSession.id))) == 0
