"""The audit log per project (services/audit.py, ``GET /api/v1/audit``): each event carries
the project of its object; a global admin reads every event, a project's admin that
project's only, and another project's admin gets 404 for it, never its events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from cli_env import run_in_process
from fleetcron.app import Actor, App
from fleetcron.core.permissions import roles_of
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import NotFound
from fleetcron.services import audit as audit_svc
from fleetcron.services.accounts import users
from fleetcron.services.audit import AuditFilter, list_event_views
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.runs import reads as run_reads
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, bearer, log_in, new_client, sqlite_only

pytestmark = sqlite_only
ADMIN = Actor("admin", "admin")
#: project -> its admin (no global role)
ADMINS = {"pbx": "pam", "web": "wes"}


def project_admin(project: str) -> Actor:
    return Actor(ADMINS[project], "none", project_roles=roles_of({project: "admin"}))


def fill(app: App, project: str) -> None:
    """A target, a job on it, a run stopped, a job removed: each audited in ``project``."""
    admin = ADMIN.within(project)
    targets.add_target(app, admin, TargetSpec(f"{project}-1", TargetKind.LOCAL))
    spec = JobSpec(schedule="0 3 * * *", command="true")
    jobs.add_job(app, admin, f"{project}-job", spec, target=f"{project}-1")
    old = JobSpec(schedule="0 4 * * *", command="false")
    jobs.add_job(app, admin, f"{project}-old", old, target=f"{project}-1")
    run_reads.stop_run(app, admin, run_reads.request_run(app, admin, f"{project}-job")[0])
    jobs.remove_job(app, admin, f"{project}-old")


@dataclass(frozen=True)
class World:
    client: TestClient
    tokens: dict[str, str]


@pytest.fixture
def world(app: App) -> Iterator[World]:
    tokens = {}
    for project, name in ADMINS.items():
        projects.add_project(app, ADMIN, project)
        users.add_user(app, ADMIN, name, f"{name}-password-1", "none")
        projects.grant(app, ADMIN, project, name, "admin")
        tokens[name], _ = users.create_token(app, ADMIN, name, "audit")
        fill(app, project)
    tokens["admin"], _ = users.create_token(app, ADMIN, "admin", "audit")
    with new_client(app) as client:
        yield World(client, tokens)


def projects_of(app: App, actor: Actor, project: str | None = None) -> set[str | None]:
    events, total = list_event_views(app, actor, AuditFilter(project=project), limit=1000)
    assert total == len(events)
    return {event.project for event in events}


def test_every_action_on_a_projects_objects_carries_the_project(app: App, world: World) -> None:
    events, _ = list_event_views(app, ADMIN, AuditFilter(project="pbx"), limit=1000)
    assert sorted({e.action for e in events}) == [
        "job.add",
        "job.remove",
        "job.run",
        "project.add",
        "project.grant",
        "run.stop",
        "target.add",
        "target.pair",
    ]
    assert {e.project for e in events} == {"pbx"}
    # Negative control: the events about the install (accounts, tokens) carry none.
    everything, _ = list_event_views(app, ADMIN, AuditFilter(action="user.add"))
    assert {e.project for e in everything} == {None}


def test_a_global_admin_reads_everything_and_a_project_admin_its_project(
    app: App, world: World
) -> None:
    assert projects_of(app, ADMIN) == {None, "pbx", "web"}
    assert projects_of(app, project_admin("pbx"), "pbx") == {"pbx"}
    assert projects_of(app, project_admin("pbx").within("pbx")) == {"pbx"}
    with pytest.raises(NotFound):
        projects_of(app, project_admin("web"), "pbx")
    with pytest.raises(NotFound):  # the project it acts in by default, which it does not see
        projects_of(app, project_admin("web"))


def test_the_check_finds_a_project_admin_reading_another_projects_events(
    app: App, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with the project filter taken out, the check above sees the leak."""
    monkeypatch.setattr(audit_svc, "_readable_project", lambda *_: None)
    assert projects_of(app, project_admin("pbx"), "pbx") == {None, "pbx", "web"}


def test_the_api_shows_a_project_admin_its_project_only(world: World) -> None:
    def ask(who: str, query: str = "") -> tuple[int, set[str | None]]:
        answer = world.client.get(
            f"{API}/audit?limit=500{query}", headers=bearer(world.tokens[who])
        )
        items = answer.json().get("items", []) if answer.status_code == 200 else []
        return answer.status_code, {item["project"] for item in items}

    assert ask("admin") == (200, {None, "pbx", "web"})
    assert ask("admin", "&project=web") == (200, {"web"})
    assert ask("pam", "&project=pbx") == (200, {"pbx"})
    assert ask("wes", "&project=pbx") == (404, set())
    assert ask("wes") == (404, set())
    not_seen = world.client.get(f"{API}/audit?project=pbx", headers=bearer(world.tokens["wes"]))
    assert "items" not in not_seen.json()
    assert "project pbx" in not_seen.text, not_seen.text  # as for a project that does not exist


def test_the_cli_shows_a_project_admin_its_project_only(
    app: App, world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def cli(*args: str) -> tuple[int, set[str | None]]:
        done = run_in_process(app, monkeypatch, capsys, "audit", "list", "--limit", "500", *args)
        events = json.loads(done.stdout) if done.returncode == 0 else []
        return done.returncode, {event["project"] for event in events}

    assert cli("--json") == (0, {None, "pbx", "web"})  # the first admin: every event
    assert cli("--json", "--project", "pbx", "--as", "pam") == (0, {"pbx"})
    assert cli("--json", "--project", "pbx", "--as", "wes") == (2, set())


def test_the_audit_page_shows_a_project_admin_the_events_of_the_project_it_acts_in(
    app: App, world: World
) -> None:
    """The page reads as the API does: a project's admin (no global role) sees its
    project's events, none of the other's, and a global admin every event."""
    with new_client(app) as client:
        login = client.post("/login", data={"username": "pam", "password": "pam-password-1"})
        assert login.status_code == 303, login.text
        page = client.get("/audit")
    assert page.status_code == 200, page.text
    assert "pbx-job" in page.text
    assert "web-job" not in page.text and "web-1" not in page.text
    with new_client(app) as client:
        log_in(client, "admin")
        everything = client.get("/audit")
    assert "pbx-job" in everything.text and "web-job" in everything.text
