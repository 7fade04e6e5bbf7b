"""The local gate at dispatch: unsetting ``local_run_as`` after an operator's job was
admitted to a local target does not run that command with the scheduler's privileges.

With ``local_run_as`` naming an unprivileged user (``nobody``) and ``local_job_role``
admin, an operator may put a job on the admin's local target ``box``. The administrator then
unsets ``local_run_as``: the assignment is still there, but every start, scheduled or
requested, is recorded ``skipped`` with a reason naming the gate (kind ``local_gate``) and
the command never runs. The negative control plants a dispatch without the check and sees
the command run as the scheduler's user.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.statuses import SkipKind
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store import run_dispatch
from fleetcron.store.schema import Run


@pytest.fixture
def unset_later(
    database_url: str, tmp_path: Path, clock: FakeClock, operator: Actor
) -> Iterator[App]:
    """The operator's job ``esc`` admitted on ``box`` while local commands ran as nobody,
    then the app opened again with ``local_run_as`` unset (the scheduler's own user)."""
    data = tmp_path / "data"
    marker = tmp_path / "ran-as-scheduler"
    before = App.open(
        make_settings(data, database_url, local_job_role="admin", local_run_as="nobody"),
        clock=clock,
    )
    targets.add_target(before, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    spec = JobSpec(schedule="* * * * *", command=f"touch {marker}")
    jobs.add_job(before, operator, "esc", spec, target="box")
    before.close()
    after = App.open(make_settings(data, database_url, local_job_role="admin"), clock=clock)
    yield after
    after.close()


def runs_of(app: App) -> list[Run]:
    with app.db.read() as session:
        return list(session.scalars(select(Run).where(Run.job_name == "esc").order_by(Run.id)))


async def fire_and_request(app: App, clock: FakeClock, operator: Actor) -> list[Run]:
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    try:
        clock.advance(seconds=31)  # 09:01:01: the scheduled slot is due
        await scheduler.tick()
        await scheduler.idle()
        runs.request_run(app, operator, "esc", target="box")
        await scheduler.tick()
        await scheduler.idle()
    finally:
        await scheduler.shutdown()
    return runs_of(app)


async def test_an_admitted_operator_job_does_not_run_once_local_run_as_is_unset(
    unset_later: App, clock: FakeClock, operator: Actor, tmp_path: Path
) -> None:
    found = await fire_and_request(unset_later, clock, operator)

    assert [(r.trigger, r.status, r.skip_kind) for r in found] == [
        ("schedule", "skipped", SkipKind.LOCAL_GATE),
        ("manual", "skipped", SkipKind.LOCAL_GATE),
    ]
    for run in found:
        assert run.reason is not None and run.reason.startswith("local gate: "), run.reason
        assert "olivia (operator)" in run.reason and "local_run_as" in run.reason
    assert not (tmp_path / "ran-as-scheduler").exists()


async def test_without_the_check_at_dispatch_the_command_runs_as_the_scheduler(
    unset_later: App,
    clock: FakeClock,
    operator: Actor,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_dispatch, "local_refusal", lambda **_: None)

    found = await fire_and_request(unset_later, clock, operator)

    assert [(r.trigger, r.status) for r in found] == [
        ("schedule", "succeeded"),
        ("manual", "succeeded"),
    ]
    assert (tmp_path / "ran-as-scheduler").exists()
