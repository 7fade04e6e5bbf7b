"""Who may put a command on a local target.

A local command without ``local_run_as`` runs as the scheduler's own user, beside the
database and the master key, so writing one is an admin's act; with ``local_run_as`` naming
an unprivileged user, operators may schedule there as on any target.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import PermissionDenied
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.schedule_file import apply_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Job


def spec(command: str = "cat /etc/hostname") -> JobSpec:
    return JobSpec(schedule="* * * * *", command=command)


@pytest.fixture
def with_here(database_url: str, tmp_path: Path, clock: FakeClock, admin: Actor) -> Iterator[App]:
    """The test database opened with the defaults of a real install for who may write
    local commands (``local_job_role`` admin, no ``local_run_as``), and one local target."""
    the_app = App.open(
        make_settings(tmp_path / "strict", database_url, local_job_role="admin"), clock=clock
    )
    targets.add_target(the_app, admin, TargetSpec("here", TargetKind.LOCAL))
    yield the_app
    the_app.close()


def test_by_default_only_admins_write_local_commands() -> None:
    from fleetcron.config import Settings

    assert Settings.model_fields["local_job_role"].default == "admin"


def test_when_operators_are_trusted_with_local_commands_they_may_schedule_there(
    with_here: App, operator: Actor, database_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    trusting = App.open(
        make_settings(tmp_path / "trusting", database_url, local_job_role="operator"),
        clock=clock,
    )
    try:
        view = jobs.add_job(trusting, operator, "peek", spec(), target="here")
    finally:
        trusting.close()

    assert view.total == 1


def job_names(app: App) -> list[str]:
    with app.db.read() as session:
        return list(session.scalars(select(Job.name).order_by(Job.name)))


def test_an_operator_may_not_add_an_individual_job_on_a_privileged_local_target(
    with_here: App, operator: Actor
) -> None:
    with pytest.raises(PermissionDenied, match="local target"):
        jobs.add_job(with_here, operator, "peek", spec(), target="here")

    assert job_names(with_here) == []


def test_an_operator_may_not_add_a_bulk_job_that_covers_a_privileged_local_target(
    with_here: App, operator: Actor
) -> None:
    with pytest.raises(PermissionDenied, match="here"):
        jobs.add_job(with_here, operator, "peek", spec(), bulk=True)

    assert job_names(with_here) == []


def test_an_operator_may_not_change_the_command_of_a_job_on_a_privileged_local_target(
    with_here: App, admin: Actor, operator: Actor
) -> None:
    jobs.add_job(with_here, admin, "uptime", spec("uptime"), target="here")

    with pytest.raises(PermissionDenied):
        jobs.edit_job(with_here, operator, "uptime", command="cat master.key")

    assert jobs.show_job(with_here, admin, "uptime").command == "uptime"


def test_an_operator_may_not_bring_a_local_target_in_through_a_schedule_file(
    with_here: App, operator: Actor
) -> None:
    text = (
        "version: 1\njobs:\n"
        "  - name: peek\n    bulk: true\n    schedule: '* * * * *'\n    command: id\n"
    )

    with pytest.raises(PermissionDenied):
        apply_schedule(with_here, operator, text, source="jobs.yaml")

    assert job_names(with_here) == []


def test_an_operator_may_pause_and_narrow_a_job_away_from_a_local_target(
    with_here: App, admin: Actor, operator: Actor
) -> None:
    jobs.add_job(with_here, admin, "uptime", spec("uptime"), bulk=True)

    jobs.set_enabled(with_here, operator, "uptime", False, target="here")
    view = jobs.edit_job(with_here, operator, "uptime", selector="role=pbx")

    assert view.total == 0


@pytest.fixture
def unprivileged(database_url: str, tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    """The same database, opened with local commands running as ``nobody``."""
    the_app = App.open(
        make_settings(
            tmp_path / "nobody", database_url, local_run_as="nobody", local_job_role="admin"
        ),
        clock=clock,
    )
    yield the_app
    the_app.close()


def test_with_an_unprivileged_run_as_user_an_operator_may_schedule_on_a_local_target(
    with_here: App, unprivileged: App, operator: Actor
) -> None:
    view = jobs.add_job(unprivileged, operator, "peek", spec(), target="here")

    assert (view.name, view.total) == ("peek", 1)
    assert not jobs.local_commands_privileged(unprivileged)
    assert jobs.local_commands_privileged(with_here)
