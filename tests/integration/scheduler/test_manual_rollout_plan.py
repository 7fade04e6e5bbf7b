"""A manual run follows the job's rollout, and its preview (``services/jobs/plan.py``) is
what the real scheduler then does, target by target, on SQLite and PostgreSQL.

The fixture clock starts at 2026-03-02 09:00:30 UTC and the job's one slot is at 09:01:
every run here is a manual one, made before the slot (the clock never reaches it).
Runs execute on the fake executor, which records every execution it was asked for.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.statuses import RunStatus, SkipKind
from fleetcron.errors import InvalidInput
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.plan import JobRunPlan, plan_job_run
from fleetcron.services.jobs.selection import Selection
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Run
from integration.scheduler.test_rollout_scheduler import (
    NAMES,
    add_fleet,
    add_rollout_job,
    failing_on,
    slot_rows,
    step,
)


async def waves_run(scheduler: Scheduler, fake: FakeExecutor, steps: int = 8) -> list[list[str]]:
    """The targets the scheduler started, tick by tick (a tick that starts nothing is left
    out): the waves as they really happened."""
    waves: list[list[str]] = []
    seen = len(fake.calls)
    for _ in range(steps):
        await step(scheduler)
        started = [t.name for t, _ in fake.calls[seen:]]
        seen = len(fake.calls)
        if started:
            waves.append(started)
    return waves


def planned(plan: JobRunPlan) -> list[list[str]]:
    return [[t.name for t in b.starts] for b in plan.plan.batches]


def audit_details(app: App, action: str) -> list[dict[str, object]]:
    with app.db.read() as session:
        rows = session.scalars(
            select(AuditEvent.detail).where(AuditEvent.action == action).order_by(AuditEvent.id)
        ).all()
    return [d if isinstance(d, dict) else json.loads(d or "{}") for d in rows]


async def test_the_preview_and_the_manual_run_start_the_same_targets_in_the_same_waves(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor
) -> None:
    add_fleet(app, NAMES, labels={"box4": {"role": "canary"}})
    add_rollout_job(app, operator, batch="2", canary="role=canary")
    targets.pause_target(app, operator, "box2", "disk swap")
    jobs.set_enabled(app, operator, "reload", False, target="box5")

    plan = plan_job_run(app, operator, "reload")
    run_ids = runs.request_run(app, operator, "reload")
    waves = await waves_run(fake_scheduler, fake)

    assert planned(plan) == [["box4"], ["box0", "box1"], ["box3"]]
    assert waves == planned(plan)
    assert plan.paused == ["box2"]
    assert [e.name for e in plan.plan.excluded] == ["box5"]
    rows = {r.target_name: r for r in slot_rows(app)}
    assert len(run_ids) == 5 and "box5" not in rows  # excluded: no row at all
    assert rows["box2"].status == RunStatus.SKIPPED
    assert rows["box2"].skip_kind == SkipKind.TARGET_PAUSED
    assert all(rows[n].trigger == "manual" for n in rows)
    assert audit_details(app, "job.run")[-1]["rollout"] == "job"


async def test_a_manual_run_halts_at_the_threshold_the_preview_names(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor
) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures="2")
    fake.script = failing_on("box1", "box2")

    plan = plan_job_run(app, operator, "reload")
    runs.request_run(app, operator, "reload")
    waves = await waves_run(fake_scheduler, fake)

    assert plan.plan.threshold == 2
    assert "2 failed of 6" in plan.plan.halts_what()
    # The run is the plan's first two waves; the threshold halts the third.
    assert waves == planned(plan)[:2]
    rows = {r.target_name: r for r in slot_rows(app)}
    assert [rows[n].status for n in NAMES[4:]] == ["skipped", "skipped"]
    assert rows["box4"].skip_kind == SkipKind.ROLLOUT_HALTED
    assert (
        rows["box4"].reason == "rollout halted: max_failures 2 reached after failures on box1, box2"
    )


async def test_all_at_once_skips_the_rollout_and_is_audited_as_such(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor
) -> None:
    # Negative control of the two tests above: the same job, asked all at once.
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures="2")
    fake.script = failing_on("box1", "box2")

    plan = plan_job_run(app, operator, "reload", all_at_once=True)
    runs.request_run(app, operator, "reload", all_at_once=True)
    waves = await waves_run(fake_scheduler, fake)

    assert planned(plan) == [NAMES]
    assert sorted(waves[0]) == NAMES and len(waves) == 1
    assert plan.plan.threshold is None
    assert audit_details(app, "job.run")[-1]["rollout"] == "all_at_once"


async def test_failed_takes_every_target_that_did_not_succeed_halted_ones_too(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures="2")
    fake.script = failing_on("box1", "box2")
    runs.request_run(app, operator, "reload")
    await waves_run(fake_scheduler, fake)

    def names(selection: Selection) -> list[str]:
        found = plan_job_run(app, operator, "reload", selection=selection, all_at_once=True)
        return sorted(t.name for b in found.plan.batches for t in b.starts)

    assert names(Selection(failed=True)) == ["box1", "box2", "box4", "box5"]
    assert names(Selection(only=("halted",))) == ["box4", "box5"]
    assert names(Selection(only=("failed",))) == ["box1", "box2"]
    with pytest.raises(InvalidInput) as missed:
        names(Selection(only=("missed",)))
    assert missed.value.field == "failed"
    with pytest.raises(InvalidInput) as wrong:
        names(Selection(only=("broken",)))
    assert wrong.value.field == "only" and "timed_out" in wrong.value.message

    # The re-run itself takes the same four, and a second one takes none while they wait.
    clock.advance(seconds=1)  # a manual run is keyed by its request's moment
    rerun = runs.request_run(app, operator, "reload", selection=Selection(failed=True))
    with app.db.read() as session:
        rerun_targets = session.scalars(
            select(Run.target_name).where(Run.id.in_(rerun)).order_by(Run.target_name)
        ).all()
    assert list(rerun_targets) == ["box1", "box2", "box4", "box5"]
    clock.advance(seconds=1)
    with pytest.raises(InvalidInput):
        runs.request_run(app, operator, "reload", selection=Selection(failed=True))


async def test_a_target_that_succeeded_is_not_taken_by_failed(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor
) -> None:
    # Negative control: nothing failed, so a re-run of what did not succeed has nothing.
    add_fleet(app, NAMES[:2])
    add_rollout_job(app, operator, batch="1")
    runs.request_run(app, operator, "reload")
    await waves_run(fake_scheduler, fake)
    assert {r.status for r in slot_rows(app)} == {RunStatus.SUCCEEDED}
    with pytest.raises(InvalidInput) as nothing:
        plan_job_run(app, operator, "reload", selection=Selection(failed=True))
    assert nothing.value.field == "failed"


def test_a_preview_writes_nothing(app: App, operator: Actor, clock: FakeClock) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2")
    before = len(audit_details(app, "job.run"))
    plan_job_run(app, operator, "reload")
    assert slot_rows(app) == []
    assert len(audit_details(app, "job.run")) == before


async def test_a_rerun_of_what_a_threshold_halted_goes_in_batches_without_a_canary(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES, labels={"box0": {"role": "canary"}})
    add_rollout_job(app, operator, batch="2", max_failures="1", canary="role=canary")
    fake.script = failing_on("box1")
    runs.request_run(app, operator, "reload")
    assert await waves_run(fake_scheduler, fake) == [["box0"], ["box1", "box2"]]
    fake.script = failing_on()
    clock.advance(seconds=1)

    plan = plan_job_run(app, operator, "reload", selection=Selection(failed=True))
    runs.request_run(app, operator, "reload", selection=Selection(failed=True))
    waves = await waves_run(fake_scheduler, fake)

    # The canary proved itself in the first run; none of the re-run's targets is one, so
    # the re-run is not halted for want of a canary: it goes in batches of 2.
    assert plan.plan.halt is None
    assert planned(plan) == [["box1", "box3"], ["box4", "box5"]]
    assert waves == planned(plan)


def test_a_preview_of_targets_without_a_canary_of_a_canary_job_is_not_halted(
    app: App, operator: Actor
) -> None:
    add_fleet(app, NAMES, labels={"box0": {"role": "canary"}})
    add_rollout_job(app, operator, batch="2", canary="role=canary")
    chosen = plan_job_run(app, operator, "reload", selection=Selection(targets=("box1", "box2")))
    everything = plan_job_run(app, operator, "reload")
    assert chosen.plan.halt is None and planned(chosen) == [["box1", "box2"]]
    # Control: with the canary among the targets, it goes first and gates the rest.
    assert planned(everything) == [["box0"], ["box1", "box2"], ["box3", "box4"], ["box5"]]


async def test_slot_takes_what_did_not_succeed_in_that_slot_not_the_newest_runs(
    app: App, operator: Actor, fake_scheduler: Scheduler, fake: FakeExecutor, clock: FakeClock
) -> None:
    add_fleet(app, NAMES)
    add_rollout_job(app, operator, batch="2", max_failures="2")
    fake.script = failing_on("box1", "box2")
    runs.request_run(app, operator, "reload")
    first = clock.now
    await waves_run(fake_scheduler, fake)
    fake.script = failing_on()
    clock.advance(seconds=1)
    runs.request_run(app, operator, "reload", selection=Selection(failed=True))
    await waves_run(fake_scheduler, fake)

    def names(selection: Selection) -> list[str]:
        found = plan_job_run(app, operator, "reload", selection=selection)
        return sorted(t.name for b in found.plan.batches for t in b.starts)

    # The re-run succeeded everywhere: nothing is left by the newest runs, ...
    with pytest.raises(InvalidInput):
        names(Selection(failed=True))
    # ... but the first slot still says which targets did not succeed in it.
    assert names(Selection(slot=first)) == ["box1", "box2", "box4", "box5"]
    assert names(Selection(slot=first, only=("halted",))) == ["box4", "box5"]
    with pytest.raises(InvalidInput) as unknown:
        names(Selection(slot=first.replace(year=2025)))
    assert unknown.value.field == "slot"
