"""Live output and stop, on a real scheduler running real local processes, on SQLite and
PostgreSQL: a follower sees the output while the run runs (in this process from memory,
from another process through the run row's snapshot); a stop kills the whole process
group and records the run ``cancelled`` with who stopped it, audited; a stop asked for
elsewhere is picked up by the owner on its next tick; a queued run is cancelled before it
starts; a finished run cannot be stopped."""

from __future__ import annotations

import asyncio
import functools

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fixtures.sshd import SshServer
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict, PermissionDenied
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Run
from integration.executors.procs import kill_all, marker_seconds, sleeping
from waiting import eventually_async


@pytest.fixture
def local(app: App) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    return "box"


def add(app: App, actor: Actor, name: str, command: str) -> None:
    jobs.add_job(app, actor, name, JobSpec(schedule="0 0 1 1 *", command=command), target="box")


def the_run(app: App, run_id: int) -> Run:
    with app.db.read() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run


def stop_events(app: App) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(session.scalars(select(AuditEvent).where(AuditEvent.action == "run.stop")))


async def started(app: App, operator: Actor, scheduler: Scheduler, job: str) -> int:
    [run_id] = runs.request_run(app, operator, job)
    await scheduler.tick()
    assert run_id in scheduler.running
    return run_id


async def test_a_follower_sees_the_output_while_it_runs_and_a_stop_kills_the_group(
    app: App, operator: Actor, local: str, scheduler: Scheduler
) -> None:
    main, child = marker_seconds(), marker_seconds()
    add(app, operator, "slow", f"sleep {child} & echo one; echo two >&2; sleep {main}")
    run_id = await started(app, operator, scheduler, "slow")

    def seen() -> str:
        return runs.follow_output(app, operator, run_id, 0, live=scheduler.live).text

    await eventually_async(
        lambda: "one" in seen() and "two" in seen(), message="both lines in the live output"
    )
    view = runs.follow_output(app, operator, run_id, 0, live=scheduler.live)
    assert (view.source, view.running, view.node) == ("live", True, app.node_name)
    assert "__fleetcron_pgid__" not in view.text
    assert runs.follow_output(app, operator, run_id, view.offset, live=scheduler.live).text == ""
    # The checker can fail: both processes are there before the stop.
    await eventually_async(
        lambda: bool(sleeping(main)) and bool(sleeping(child)),
        message="the command and its child sleeping",
    )

    try:
        outcome = runs.stop_run(app, operator, run_id, local_stop=scheduler.stop)
        await scheduler.idle()
    finally:
        kill_all(main, child)

    assert (outcome.status, outcome.immediate) == ("running", True)
    assert sleeping(main) == [] and sleeping(child) == []
    run = the_run(app, run_id)
    assert run.status == "cancelled"
    assert (run.stop_requested_by, run.reason) == ("olivia", "stopped by olivia")
    assert run.stdout_head == "one\n" and run.stderr_head == "two\n"
    assert run.live_output is None
    assert len(scheduler.live) == 0
    [event] = stop_events(app)
    assert (event.actor, event.success, event.job_name) == ("olivia", True, "slow")
    assert event.detail["was"] == "running"


async def test_a_stop_asked_for_elsewhere_is_picked_up_on_the_next_tick(
    app: App, operator: Actor, local: str, scheduler: Scheduler
) -> None:
    main = marker_seconds()
    add(app, operator, "slow", f"echo hello; sleep {main}")
    scheduler.live_snapshot_s = 0.0
    run_id = await started(app, operator, scheduler, "slow")
    # The command sleeping is not enough: its line may still be in the pipe, not yet read.
    await eventually_async(
        lambda: bool(sleeping(main))
        and runs.follow_output(app, operator, run_id, 0, live=scheduler.live).text == "hello\n",
        message="the command sleeping, its line in the scheduler's live output",
    )
    await scheduler.tick()  # writes the snapshot

    # Another process (the CLI, another node's web app) reads the run row.
    view = runs.follow_output(app, operator, run_id, 0)
    assert (view.source, view.text, view.offset) == ("snapshot", "hello\n", 6)
    assert runs.follow_output(app, operator, run_id, 6).text == ""
    try:
        outcome = runs.stop_run(app, operator, run_id)  # no scheduler in this process
        assert (outcome.status, outcome.immediate) == ("running", False)
        await asyncio.sleep(0.3)
        assert sleeping(main), "nothing acts on the request until the owner's tick"
        assert the_run(app, run_id).status == "running"
        await scheduler.tick()
        await scheduler.idle()
    finally:
        kill_all(main)

    assert sleeping(main) == []
    run = the_run(app, run_id)
    assert (run.status, run.stop_requested_by) == ("cancelled", "olivia")


async def test_a_queued_run_is_cancelled_before_it_starts(
    app: App, operator: Actor, local: str, scheduler: Scheduler, clock: FakeClock
) -> None:
    add(app, operator, "never", "echo should not run")
    [run_id] = runs.request_run(app, operator, "never")

    outcome = runs.stop_run(app, operator, run_id)
    await scheduler.tick()
    await scheduler.idle()

    assert outcome.status == "cancelled"
    run = the_run(app, run_id)
    assert (run.status, run.started_at, run.stdout_head) == ("cancelled", None, "")
    assert run.reason == "stopped by olivia before it started"
    assert run.finished_at == clock.now


async def test_a_finished_run_cannot_be_stopped_and_a_viewer_cannot_stop(
    app: App, operator: Actor, viewer: Actor, local: str, scheduler: Scheduler
) -> None:
    add(app, operator, "quick", "echo done")
    [run_id] = runs.request_run(app, operator, "quick")
    await scheduler.tick()
    await scheduler.idle()

    with pytest.raises(Conflict, match=r"run \d+ has already ended \(succeeded\)"):
        runs.stop_run(app, operator, run_id)
    with pytest.raises(PermissionDenied, match="needs the operator role"):
        runs.stop_run(app, viewer, run_id)

    assert the_run(app, run_id).status == "succeeded"
    assert [(e.actor, e.success) for e in stop_events(app)] == [
        ("olivia", False),
        ("victor", False),
    ]


async def test_a_run_that_is_not_stopped_runs_on(
    app: App, operator: Actor, local: str, scheduler: Scheduler
) -> None:
    """Negative control: without a stop request the tick does not end the run."""
    main = marker_seconds()
    add(app, operator, "slow", f"sleep {main}")
    run_id = await started(app, operator, scheduler, "slow")
    try:
        await eventually_async(lambda: bool(sleeping(main)), message="the command sleeping")
        await scheduler.tick()
        await asyncio.sleep(0.3)
        assert sleeping(main)
        assert the_run(app, run_id).status == "running"
    finally:
        kill_all(main)


@pytest.mark.sshd
async def test_a_run_on_an_ssh_target_is_followed_and_stopped_with_nothing_left_there(
    app: App, operator: Actor, scheduler: Scheduler, sshd: SshServer
) -> None:
    """The sshd fixture runs on this machine: its processes are the target's processes."""
    await asyncio.to_thread(  # pairs it: logs in with the pinned host key
        functools.partial(
            targets.add_target,
            app,
            Actor("admin", "admin"),
            TargetSpec(
                "pbx",
                host=sshd.host,
                port=sshd.port,
                user=sshd.user,
                private_key=sshd.client_private_key.encode(),
                host_key=sshd.host_key_line,
            ),
        )
    )
    main, child = marker_seconds(), marker_seconds()
    command = f"sleep {child} & echo remote one; echo remote two >&2; sleep {main}"
    jobs.add_job(app, operator, "far", JobSpec(schedule="0 0 1 1 *", command=command), target="pbx")
    run_id = await started(app, operator, scheduler, "far")

    def seen() -> str:
        return runs.follow_output(app, operator, run_id, 0, live=scheduler.live).text

    try:
        await eventually_async(
            lambda: "remote one" in seen() and "remote two" in seen(),
            message="both remote lines in the live output",
        )
        await eventually_async(
            lambda: bool(sleeping(main)) and bool(sleeping(child)),
            message="the command and its child sleeping",
        )
        runs.stop_run(app, operator, run_id, local_stop=scheduler.stop)
        await scheduler.idle()
        left = sleeping(main) + sleeping(child)
    finally:
        kill_all(main, child)

    assert left == []
    run = the_run(app, run_id)
    assert (run.status, run.stop_requested_by) == ("cancelled", "olivia")
    assert (run.stdout_head, run.stderr_head) == ("remote one\n", "remote two\n")


async def test_the_fake_executor_streams_and_stops_like_the_real_ones(
    app: App, operator: Actor, local: str, fake_scheduler: Scheduler, fake: FakeExecutor
) -> None:
    add(app, operator, "simulated", "simulated long job")
    fake.script = {"simulated long job": FakeOutcome(duration_s=600, stdout="pretend\n")}
    run_id = await started(app, operator, fake_scheduler, "simulated")

    view = runs.follow_output(app, operator, run_id, 0, live=fake_scheduler.live)
    runs.stop_run(app, operator, run_id, local_stop=fake_scheduler.stop)
    await asyncio.wait_for(fake_scheduler.idle(), 10)

    assert (view.source, view.text) == ("live", "pretend\n")
    assert (the_run(app, run_id).status, the_run(app, run_id).stop_requested_by) == (
        "cancelled", "olivia"
    )  # fmt: skip


async def test_a_run_stopped_while_it_waits_for_a_slot_never_starts(
    app: App, operator: Actor, local: str, clock: FakeClock
) -> None:
    fake = FakeExecutor(clock=clock, concurrency=1)
    fake.script = {"hold": FakeOutcome(duration_s=0.5), "waits": FakeOutcome(duration_s=600)}
    scheduler = Scheduler(app, clock=clock, executors={"local": fake})
    await scheduler.start()
    try:
        add(app, operator, "hold", "hold")
        add(app, operator, "waits", "waits")
        [first] = runs.request_run(app, operator, "hold")
        [second] = runs.request_run(app, operator, "waits")
        await scheduler.tick()
        assert {first, second} <= set(scheduler.running)
        runs.stop_run(app, operator, second, local_stop=scheduler.stop)
        await asyncio.wait_for(scheduler.idle(), 10)
    finally:
        await scheduler.shutdown()

    assert [request.command for _, request in fake.calls] == ["hold"]
    assert the_run(app, first).status == "succeeded"
    run = the_run(app, second)
    assert (run.status, run.reason, run.error) == (
        "cancelled", "stopped by olivia", "stopped before it started"
    )  # fmt: skip
