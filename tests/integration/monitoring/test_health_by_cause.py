"""Health grouped by cause, on SQLite and PostgreSQL.

An unreachable target is one line with its connection error and the start of the outage;
a command failure is one line per job × target; ``problems`` keeps every job × target.

Runs come from real scheduler ticks (a local target, and a real sshd that is stopped so that
its loopback port refuses connections), or, where a test needs exact start times, are
recorded through the store's write path (``RunStore.claim_due`` then ``finish``) with the
outcome an executor would report. The fixture clock starts at 2026-03-02 09:00:30 UTC.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast, get_args

import pytest
from fastapi.testclient import TestClient

from fixtures.app import FakeClock
from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult, Status
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.accounts.users import create_token
from fleetcron.services.health import report as health
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.web.app import create_app
from integration.web.conftest import log_in, new_client
from sql_statements import statements

REFUSED = "connection refused: 127.0.0.1:22413"


async def tick_minutes(app: App, clock: FakeClock, minutes: int) -> list[datetime]:
    """Run a real scheduler for ``minutes`` one-minute ticks; the times of the ticks (each
    run starts at its tick's time: the clock stands still during a tick)."""
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    times = []
    for _ in range(minutes):
        times.append(clock.advance(minutes=1))
        await scheduler.tick()
        await scheduler.idle()
    await scheduler.shutdown()
    return times


class Pbx:
    """An SSH target backed by its own sshd, which a test can stop (its port then refuses)."""

    def __init__(self, workdir: Path, key: ClientKey) -> None:
        self._stack = contextlib.ExitStack()
        self.server: SshServer = self._stack.enter_context(
            running_sshd(workdir, authorized_keys=[key.public_key_line], client_key=key)
        )

    def pair(self, app: App, name: str) -> None:
        targets.add_target(
            app,
            SYSTEM,
            TargetSpec(
                name,
                host=self.server.host,
                port=self.server.port,
                user=self.server.user,
                private_key=self.server.client_private_key.encode(),
                host_key=self.server.host_key_line,
            ),
        )

    def stop(self) -> None:
        self._stack.close()


@pytest.fixture
def pbx(app: App, tmp_path: Path, sshd_client_key: ClientKey) -> Iterator[Pbx]:
    """Target ``pbx``, paired with its own running sshd (pairing runs its own event loop,
    so it happens here, outside the test's)."""
    server = Pbx(tmp_path / "pbx-sshd", sshd_client_key)
    server.pair(app, "pbx")
    yield server
    server.stop()


def record_slot(
    app: App, clock: FakeClock, outcomes: Mapping[str, tuple[str, str | None, int]]
) -> None:
    """Claim the slots due now through the store and finish each run of job ``name`` with
    ``outcomes[name]`` = (status, error, seconds after the tick the run started)."""
    store = RunStore(app.db, node=app.node_name, clock=clock)
    claimed = store.claim_due(clock.now).dispatches
    results = []
    for dispatch in claimed:
        status, error, offset = outcomes[dispatch.job_name]
        assert status in get_args(Status)
        started = clock.now + timedelta(seconds=offset)
        results.append(
            (
                dispatch.run_id,
                ExecResult(
                    cast(Status, status),
                    0 if status == "succeeded" else (1 if status == "failed" else None),
                    EMPTY_OUTPUT,
                    EMPTY_OUTPUT,
                    started,
                    started + timedelta(milliseconds=5),
                    5,
                    error,
                ),
            )
        )
    assert sorted(d.job_name for d in claimed) == sorted(outcomes)
    assert store.finish(results) == []


def every_minute_on(app: App, target: str, *names: str) -> None:
    for name in names:
        jobs.add_job(app, SYSTEM, name, JobSpec("* * * * *", f"echo {name}"), target=target)


@pytest.mark.sshd
async def test_an_unreachable_target_with_five_jobs_is_one_line_with_the_error_and_start(
    app: App, viewer: Actor, clock: FakeClock, pbx: Pbx
) -> None:
    names = [f"job{i}" for i in range(1, 6)]
    every_minute_on(app, "pbx", *names)
    await tick_minutes(app, clock, 1)  # reached: five successes
    pbx.stop()
    outage = await tick_minutes(app, clock, 3)

    result = health.summary(app, viewer)

    [line] = result.grouped
    assert (line.kind, line.target, line.job) == ("unreachable", "pbx", None)
    assert line.jobs == tuple(names)
    assert line.error == f"connection refused: 127.0.0.1:{pbx.server.port}"
    assert line.error in line.detail and "5 job(s) cannot connect" in line.detail
    assert line.since == outage[0]  # the first refused connection, not the latest
    assert line.failures == 15
    assert [(p.kind, p.job, p.status) for p in result.problems] == [
        ("failing", name, "connect_error") for name in names
    ]
    # every job's own streak began with the outage; its newest failure is the last tick
    assert {(p.since, p.last_failure_at, p.failures) for p in result.problems} == {
        (outage[0], outage[-1], 3)
    }
    assert not result.ok


@pytest.mark.sshd
async def test_a_command_failure_is_a_job_by_target_line_even_on_an_ssh_target(
    app: App, viewer: Actor, clock: FakeClock, pbx: Pbx
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "check", JobSpec("* * * * *", "exit 3"), bulk=True)
    jobs.add_job(app, SYSTEM, "fine", JobSpec("* * * * *", "true"), bulk=True)
    started = await tick_minutes(app, clock, 2)

    result = health.summary(app, viewer)

    assert [(g.kind, g.job, g.target, g.jobs) for g in result.grouped] == [
        ("failing", "check", "box", ("check",)),
        ("failing", "check", "pbx", ("check",)),
    ]
    for line in result.grouped:
        assert "last run failed (exit 3); 2 failure(s) in a row" in line.detail
    assert {p.since for p in result.problems} == {started[0]}


async def test_a_timeout_is_a_job_by_target_line_with_its_error(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "slow", JobSpec("* * * * *", "sleep 30", timeout_s=1), target="box")
    await tick_minutes(app, clock, 1)

    [line] = health.summary(app, viewer).grouped

    assert (line.kind, line.job, line.target) == ("failing", "slow", "box")
    assert line.error and line.error in line.detail
    assert "last run timed_out" in line.detail


async def test_a_success_restarts_the_streak_of_a_job(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "flaky", JobSpec("* * * * *", "exit 1"), target="box")
    await tick_minutes(app, clock, 2)
    jobs.edit_job(app, SYSTEM, "flaky", command="true")
    await tick_minutes(app, clock, 1)
    jobs.edit_job(app, SYSTEM, "flaky", command="exit 1")
    again = await tick_minutes(app, clock, 2)

    [problem] = health.summary(app, viewer).problems

    assert (problem.since, problem.failures) == (again[0], 2)
    assert problem.last_failure_at is not None and problem.last_failure_at >= again[1]


def test_a_run_reaching_the_target_restarts_its_outage(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    every_minute_on(app, "pbx", "a", "b")
    down = ("connect_error", REFUSED, 0)
    clock.advance(seconds=31)  # 09:01:01
    record_slot(app, clock, {"a": down, "b": down})
    clock.advance(minutes=1)
    record_slot(app, clock, {"a": ("succeeded", None, 0), "b": down})  # a reached it
    clock.advance(minutes=1)
    second_outage = clock.now
    record_slot(app, clock, {"a": down, "b": down})
    clock.advance(minutes=1)
    record_slot(app, clock, {"a": down, "b": down})

    result = health.summary(app, viewer)

    [line] = result.grouped
    assert (line.kind, line.jobs, line.since, line.failures) == (
        "unreachable",
        ("a", "b"),
        second_outage,
        4,
    )
    by_job = {p.job: (p.since, p.failures) for p in result.problems}
    # b never succeeded: its own streak goes back to the first slot.
    assert by_job == {"a": (second_outage, 2), "b": (second_outage - timedelta(minutes=2), 4)}


def test_a_connection_error_followed_by_a_run_that_reached_the_target_is_a_job_line(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    every_minute_on(app, "pbx", "a", "b")
    clock.advance(seconds=31)
    # a's connection failed at :01; b reached the target 10 s later and failed on its own.
    record_slot(app, clock, {"a": ("connect_error", REFUSED, 0), "b": ("failed", None, 10)})

    grouped = health.summary(app, viewer).grouped

    assert [(g.kind, g.job, g.error) for g in grouped] == [
        ("failing", "a", REFUSED),
        ("failing", "b", None),
    ]
    assert REFUSED in grouped[0].detail


def test_a_connection_error_from_before_the_target_was_last_reached_stays_out_of_its_outage(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "daily", JobSpec("1 9 * * *", "echo daily"), target="pbx")
    every_minute_on(app, "pbx", "often")
    clock.advance(seconds=31)  # 09:01:01: both are due
    record_slot(
        app, clock, {"daily": ("connect_error", REFUSED, 0), "often": ("succeeded", None, 10)}
    )
    clock.advance(minutes=1)  # 09:02:01: only "often", and now the target is down
    outage = clock.now
    record_slot(app, clock, {"often": ("connect_error", REFUSED, 0)})

    grouped = health.summary(app, viewer).grouped

    assert [(g.kind, g.job, g.jobs, g.since) for g in grouped] == [
        ("unreachable", None, ("often",), outage),
        ("failing", "daily", ("daily",), outage - timedelta(minutes=1)),
    ]


def test_unreachable_targets_come_first_and_other_failures_keep_their_own_lines(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    for name in ("pbx1", "pbx2"):
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    every_minute_on(app, "pbx1", "a1", "b1")
    every_minute_on(app, "pbx2", "a2", "b2")
    clock.advance(seconds=31)
    down = ("connect_error", REFUSED, 0)
    record_slot(app, clock, {"a1": down, "b1": down, "a2": ("failed", None, 0), "b2": down})

    grouped = health.summary(app, viewer).grouped

    # pbx2 is not unreachable: a2's command ran there (in the same second as b2's refusal,
    # so the target counts as reached at that time).
    assert [(g.kind, g.target, g.job) for g in grouped] == [
        ("unreachable", "pbx1", None),
        ("failing", "pbx2", "a2"),
        ("failing", "pbx2", "b2"),
    ]


def test_health_reads_a_fixed_number_of_statements_however_many_assignments_fail(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    """No query per assignment or per target: the statement count is the same for a fleet
    with 2 failing assignments and one with 14 (the former code issued 2 per assignment)."""

    def measured() -> tuple[int, health.HealthSummary]:
        with statements(app) as seen:
            result = health.summary(app, viewer)
        return len(seen), result

    targets.add_target(app, SYSTEM, TargetSpec("t0", TargetKind.LOCAL))
    every_minute_on(app, "t0", "j0a", "j0b")
    clock.advance(seconds=31)
    record_slot(app, clock, {"j0a": ("failed", None, 0), "j0b": ("connect_error", REFUSED, 0)})
    small, small_result = measured()

    outcomes: dict[str, tuple[str, str | None, int]] = {}
    for t in range(1, 5):
        targets.add_target(app, SYSTEM, TargetSpec(f"t{t}", TargetKind.LOCAL))
        names = [f"j{t}{c}" for c in "abc"]
        every_minute_on(app, f"t{t}", *names)
        for name in names:
            outcomes[name] = ("connect_error", REFUSED, 0) if t % 2 else ("failed", None, 0)
    clock.advance(minutes=1)
    record_slot(
        app, clock, {**outcomes, "j0a": ("failed", None, 0), "j0b": ("connect_error", REFUSED, 0)}
    )
    large, large_result = measured()

    assert (len(small_result.problems), len(large_result.problems)) == (2, 14)
    assert [g.kind for g in large_result.grouped].count("unreachable") == 2  # t1 and t3
    assert small == large


def test_json_keeps_the_detail_and_the_api_shows_the_grouped_view(
    app: App, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    names = [f"job{i}" for i in range(1, 6)]
    every_minute_on(app, "pbx", *names)
    clock.advance(seconds=31)
    record_slot(app, clock, {name: ("connect_error", REFUSED, 0) for name in names})
    token, _ = create_token(app, SYSTEM, "victor", "probe")
    auth = {"Authorization": f"Bearer {token}"}
    client = TestClient(create_app(app))

    grouped = client.get("/api/v1/health", headers=auth).json()
    detailed = client.get("/api/v1/health", params={"detail": "true"}, headers=auth).json()

    assert grouped["ok"] is False and "problems" not in grouped
    [line] = grouped["grouped"]
    assert (line["kind"], line["target"], line["jobs"], line["error"]) == (
        "unreachable",
        "pbx",
        names,
        REFUSED,
    )
    assert detailed["grouped"] == grouped["grouped"]
    assert [(p["job"], p["status"], p["error"]) for p in detailed["problems"]] == [
        (name, "connect_error", REFUSED) for name in names
    ]


def test_the_dashboard_shows_one_row_for_an_unreachable_target(app: App, clock: FakeClock) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    names = [f"job{i}" for i in range(1, 8)]
    every_minute_on(app, "pbx", *names)
    jobs.add_job(app, SYSTEM, "broken", JobSpec("* * * * *", "exit 3"), target="box")
    clock.advance(seconds=31)
    record_slot(
        app,
        clock,
        {"broken": ("failed", None, 0), **{n: ("connect_error", REFUSED, 0) for n in names}},
    )

    with new_client(app) as client:
        log_in(client, "viewer")
        page = client.get("/").text

    table = page[page.index('id="needs-attention"') : page.index("</table>")]
    assert table.count("<tr>") == 3  # the header, pbx, broken on box
    assert "unreachable" in table and REFUSED in table
    assert "7 job(s): job1, job2, job3, job4, job5 and 2 more" in table
    assert "last run failed (exit 1)" in table


def test_per_target_health_gives_each_streak_and_its_start_in_a_fixed_number_of_statements(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    for name in ("t1", "t2", "t3"):
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "check", JobSpec("* * * * *", "check"), bulk=True)
    jobs.add_job(app, SYSTEM, "solo", JobSpec("* * * * *", "solo"), target="t1")
    store = RunStore(app.db, node=app.node_name, clock=clock)
    outcomes: list[dict[str, Status]] = [
        {"t1": "failed", "t2": "succeeded", "t3": "succeeded"},
        {"t1": "failed", "t2": "failed", "t3": "succeeded"},
    ]
    slots = []
    for outcome in outcomes:
        clock.advance(minutes=1)
        slots.append(clock.now)
        results = []
        for d in store.claim_due(clock.now).dispatches:
            status: Status = outcome[d.target_name] if d.job_name == "check" else "succeeded"
            code = 0 if status == "succeeded" else 1
            results.append(
                (
                    d.run_id,
                    ExecResult(status, code, EMPTY_OUTPUT, EMPTY_OUTPUT, clock.now, clock.now, 1),
                )
            )
        store.finish(results)
    with statements(app) as seen:
        rows = health.assignment_health(app, viewer, "check")
        many = len(seen)
        seen.clear()
        health.assignment_health(app, viewer, "solo")

    assert [(r.target, r.last_status, r.consecutive_failures, r.failing_since) for r in rows] == [
        ("t1", "failed", 2, slots[0]),
        ("t2", "failed", 1, slots[1]),
        ("t3", "succeeded", 0, None),
    ]
    assert rows[1].last_success_at == slots[0] and rows[0].last_success_at is None
    assert len(seen) == many  # 3 targets cost what 1 does


def test_a_run_lost_with_its_scheduler_is_a_job_line_that_says_why(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("pbx", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "backup", JobSpec("1 9 * * *", "backup", timeout_s=60), target="pbx")
    store = RunStore(app.db, node=app.node_name, clock=clock)
    clock.advance(seconds=31)
    [dispatch] = store.claim_due(clock.now).dispatches  # started; then its node vanished
    clock.advance(minutes=5)  # past the run's deadline
    assert store.close_lost(clock.now) == 1

    [line] = health.summary(app, viewer).grouped

    assert (line.kind, line.job, line.target, line.run_id) == (
        "failing",
        "backup",
        "pbx",
        dispatch.run_id,
    )
    assert line.detail.startswith("last run lost: the scheduler stopped while this run was going")
