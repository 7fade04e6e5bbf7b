"""The composition root builds the process that ``fleetcron serve`` runs.

Cluster mode (guard, lease) is assembled by the same function and exercised by the fault
harness, whose node processes are built here too (tests/fault/node_process.py).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.config import Settings
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor
from fleetcron.executors.kinds import LocalKind, SshKind
from fleetcron.scheduler.assembly import build_scheduler, prepare
from fleetcron.scheduler.housekeeping import Housekeeping
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Run, User


def test_a_first_start_on_the_embedded_default_sets_itself_up(tmp_path: Path) -> None:
    data = tmp_path / "data"
    app = prepare(Settings(data_dir=data, database_url=None))
    try:
        with app.db.read() as session:
            assert session.scalars(select(User.name)).all() == ["admin"]
        assert (data / "master.key").exists()
        assert (data / "initial-admin-password").read_text().strip()
        assert data.stat().st_mode & 0o777 == 0o700
    finally:
        app.close()


async def test_a_standalone_scheduler_has_housekeeping_and_the_standard_executors(
    app: App,
) -> None:
    scheduler = build_scheduler(app)

    assert scheduler.guard is None and scheduler.may_execute is None
    assert isinstance(scheduler.maintenance, Housekeeping)
    assert scheduler.clock is app.clock
    assert scheduler.executors is not None
    assert isinstance(scheduler.executors["local"], LocalKind)
    assert isinstance(scheduler.executors["ssh"], SshKind)
    assert set(scheduler.executors) == {"local", "ssh"}


async def test_the_executors_given_to_the_root_run_the_jobs(
    tmp_path: Path, database_url: str, clock: FakeClock, operator: Actor
) -> None:
    app = App.open(make_settings(tmp_path / "data", database_url), clock=clock)
    fake = FakeExecutor(clock=clock)
    try:
        targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
        jobs.add_job(app, operator, "hello", JobSpec("* * * * *", "echo hi"), target="box")
        scheduler = build_scheduler(app, executors={"local": fake})
        await scheduler.start()
        clock.advance(seconds=31)
        await scheduler.tick()
        await scheduler.idle()
        await scheduler.shutdown()
        with app.db.read() as session:
            assert session.scalars(select(Run.status)).all() == ["succeeded"]
    finally:
        app.close()
    assert [request.command for _, request in fake.calls] == ["echo hi"]
