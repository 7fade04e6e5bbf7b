"""Targets of two projects (SQLite and PostgreSQL): one server may be a target in each
without one project learning the other's target, while a second target on it within one
project is still refused (the negative control of the same check)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.reads import target_names

ADMIN = Actor("admin", "admin")
KEY = Ed25519PrivateKey.generate().private_bytes(
    serialization.Encoding.PEM,
    serialization.PrivateFormat.OpenSSH,
    serialization.NoEncryption(),
)


def add(app: App, project: str, name: str) -> None:
    spec = TargetSpec(name, host="db.example.net", port=22, user="cron", private_key=KEY)
    targets.add_target(app, ADMIN.within(project), spec, verify=False)


def test_one_server_is_a_target_in_each_project_without_naming_the_other(app: App) -> None:
    for name in ("pbx", "web"):
        projects.add_project(app, ADMIN, name)
    add(app, "pbx", "db-pbx")
    add(app, "web", "db-web")
    assert target_names(app, ADMIN.within("pbx")) == ["db-pbx"]
    assert target_names(app, ADMIN.within("web")) == ["db-web"]
    with pytest.raises(Conflict, match="target db-web already uses"):
        add(app, "web", "db-again")


def test_the_same_command_on_a_same_named_target_of_another_project_is_no_duplicate(
    app: App,
) -> None:
    """Target names repeat across projects: each project's ``box`` is its own server. The
    duplicate-registration check stays within a project (negative control: a second job
    with the command in the same project is refused)."""
    spec = JobSpec(schedule="0 4 * * *", command="backup.sh")
    for name in ("pbx", "web"):
        projects.add_project(app, ADMIN, name)
        targets.add_target(app, ADMIN.within(name), TargetSpec("box", TargetKind.LOCAL))
        jobs.add_job(app, ADMIN.within(name), f"backup-{name}", spec, target="box")
    with pytest.raises(Conflict, match="duplicate registration: jobs again and backup-web"):
        jobs.add_job(app, ADMIN.within("web"), "again", spec, target="box")
