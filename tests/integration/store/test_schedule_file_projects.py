"""Schedules as code per project (SQLite and PostgreSQL): a file applied in one project
creates and changes that project's jobs only, names only the targets it reaches, and its
``--prune`` never deletes another project's jobs."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest
from sqlalchemy import select

from cli_env import run_in_process
from fleetcron.app import Actor, App
from fleetcron.core.schedule_file import ScheduleFileError
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.schedule_file import apply_schedule, export_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import shares
from fleetcron.store.schema import Job, Project

ADMIN = Actor("admin", "admin")


def file_of(target: str) -> str:
    return dedent(
        f"""\
        version: 1
        jobs:
          - name: backup
            target: {target}
            schedule: "30 3 * * *"
            command: backup.sh
        """
    )


@pytest.fixture
def two_projects(app: App) -> App:
    """``pbx`` with target p1, ``web`` with target w1 and its own job ``backup``."""
    for name in ("pbx", "web"):
        projects.add_project(app, ADMIN, name)
    targets.add_target(app, ADMIN.within("pbx"), TargetSpec("p1", TargetKind.LOCAL))
    web = ADMIN.within("web")
    targets.add_target(app, web, TargetSpec("w1", TargetKind.LOCAL))
    jobs.add_job(app, web, "backup", JobSpec(schedule="0 1 * * *", command="web.sh"), target="w1")
    return app


def jobs_by_project(app: App) -> set[tuple[str, str, str]]:
    with app.db.read() as session:
        rows = session.execute(
            select(Project.name, Job.name, Job.command).join(Project, Project.id == Job.project_id)
        )
        return {(p, j, c) for p, j, c in rows}


def test_a_file_creates_its_projects_job_and_leaves_the_other_projects_alone(
    two_projects: App,
) -> None:
    app = two_projects
    result = apply_schedule(app, ADMIN.within("pbx"), file_of("p1"), prune=True)
    assert result.applied
    assert jobs_by_project(app) == {("pbx", "backup", "backup.sh"), ("web", "backup", "web.sh")}
    # Pruning with an empty file in pbx deletes pbx's job only.
    empty = "version: 1\njobs: []\n"
    apply_schedule(app, ADMIN.within("pbx"), empty, prune=True)
    assert jobs_by_project(app) == {("web", "backup", "web.sh")}


def test_a_file_cannot_name_another_projects_target_until_it_is_shared(
    two_projects: App,
) -> None:
    """Negative control included: the same file applies once w1 is shared into pbx, so the
    refusal is the project's boundary, not a fault of the file."""
    app = two_projects
    with pytest.raises(ScheduleFileError, match="target w1 does not exist"):
        apply_schedule(app, ADMIN.within("pbx"), file_of("w1"))
    assert jobs_by_project(app) == {("web", "backup", "web.sh")}

    shares.share_target(app, ADMIN.within("web"), "w1", "pbx")
    apply_schedule(app, ADMIN.within("pbx"), file_of("w1"))
    assert ("pbx", "backup", "backup.sh") in jobs_by_project(app)


def test_an_export_holds_the_projects_jobs_only(two_projects: App) -> None:
    app = two_projects
    apply_schedule(app, ADMIN.within("pbx"), file_of("p1"))
    exported = export_schedule(app, ADMIN.within("pbx"))
    assert "backup.sh" in exported and "web.sh" not in exported


def test_the_cli_applies_in_the_project_it_names(
    two_projects: App,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = two_projects
    path = tmp_path / "pbx.yaml"
    path.write_text(file_of("p1"))
    done = run_in_process(app, monkeypatch, capsys, "apply", str(path), "--project", "pbx")
    assert done.returncode == 0, done.stderr
    assert ("pbx", "backup", "backup.sh") in jobs_by_project(app)
    # In the default project p1 does not exist: exit 2, nothing written there.
    refused = run_in_process(app, monkeypatch, capsys, "apply", str(path))
    assert refused.returncode == 2
    assert "target p1 does not exist" in refused.stderr
    missing = run_in_process(app, monkeypatch, capsys, "job", "list", "--project", "nowhere")
    assert missing.returncode == 2
    assert "project nowhere does not exist" in missing.stderr
