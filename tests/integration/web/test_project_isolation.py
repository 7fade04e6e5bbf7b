"""The isolation matrix of projects, against the web application on SQLite and PostgreSQL.

For a viewer, an operator and an admin of project ``pbx`` (no global role), every case
names an action of the permission table (``core/permissions.py``) and a route on one
object. On ``pbx``'s own objects the answer is what the table allows (2xx, else 403); on
the objects of project ``web`` it is 404 named in ``web``, and named in ``pbx`` what a name
``pbx`` does not hold gets (404, or 403 for an action the role lacks): names cannot be
probed; lists and the runs search show ``pbx``'s objects and never
``web``'s (blackout windows, incidents and silences too). A global viewer still sees both
(its rights are unchanged). The negative controls take the scope check out of the run
reads, and out of the blackout windows' reads, and show the checker finds the leak.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from cli_env import run_in_process
from fleetcron.app import Actor, App
from fleetcron.core.permissions import may, roles_of
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.blackouts import windows as blackout_windows
from fleetcron.services.blackouts.windows import BlackoutSpec, add_blackout
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.runs import reads as run_reads
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.store.schema import Blackout, Target
from integration.web.conftest import API, bearer, new_client

ADMIN = Actor("admin", "admin")
OWN, OTHER = "pbx", "web"
#: the user holding each role in ``pbx`` (and none globally)
MEMBERS = {"viewer": "amy", "operator": "oscar", "admin": "adam"}


@dataclass(frozen=True)
class Case:
    action: str
    method: str
    path: str
    body: dict[str, Any] | None = None

    def url(self, objects: dict[str, str], project: str) -> str:
        return f"{API}{self.path.format(**objects)}?project={project}"


#: one route per action of the table on a job, a target and a run
CASES = (
    Case("job.read", "GET", "/jobs/{job}"),
    Case("job.read", "GET", "/jobs/{job}/plan"),
    Case("job.disable", "POST", "/jobs/{job}/disable", {}),
    Case("job.enable", "POST", "/jobs/{job}/enable", {}),
    Case("job.run", "POST", "/jobs/{job}/run", {}),
    Case("target.read", "GET", "/targets/{target}"),
    Case("target.label", "POST", "/targets/{target}/labels", {"labels": {"team": "x"}}),
    Case("target.pause", "POST", "/targets/{target}/pause", {}),
    Case("target.pause", "POST", "/targets/{target}/resume"),
    Case("run.read", "GET", "/runs/{run}"),
    Case("run.read", "GET", "/runs/{run}/output"),
    Case("run.stop", "GET", "/runs/{run}/stop"),
    Case("blackout.read", "GET", "/blackouts/{blackout}"),
)


@dataclass(frozen=True)
class World:
    client: TestClient
    tokens: dict[str, str]
    #: project -> {job, target, run}
    objects: dict[str, dict[str, str]]


def _fill(app: App, project: str, prefix: str) -> dict[str, str]:
    admin = ADMIN.within(project)
    targets.add_target(app, admin, TargetSpec(f"{prefix}1", TargetKind.LOCAL))
    spec = JobSpec(schedule="0 3 * * *", command=f"echo {prefix}")
    jobs.add_job(app, admin, f"{prefix}job", spec, target=f"{prefix}1")
    run_ids = run_reads.request_run(app, admin, f"{prefix}job")
    window = BlackoutSpec(
        name="patch",
        reason="patch",
        job=f"{prefix}job",
        start="2030-01-01 00:00",
        end="2030-01-02 00:00",
    )
    blackout = add_blackout(app, admin, window).id
    return {
        "job": f"{prefix}job",
        "target": f"{prefix}1",
        "run": str(run_ids[0]),
        "blackout": str(blackout),
    }


#: the objects the lists and the search are checked for
LISTED = ("job", "target", "run")


@pytest.fixture
def world(app: App) -> Iterator[World]:
    for name in (OWN, OTHER):
        projects.add_project(app, ADMIN, name)
    objects = {OWN: _fill(app, OWN, "a"), OTHER: _fill(app, OTHER, "b")}
    tokens = {}
    for role, name in MEMBERS.items():
        users.add_user(app, ADMIN, name, f"{name}-password", "none")
        projects.grant(app, ADMIN, OWN, name, role)
        tokens[role], _ = users.create_token(app, ADMIN, name, "isolation")
    tokens["global viewer"], _ = users.create_token(app, ADMIN, "victor", "isolation")
    with new_client(app) as client:
        yield World(client, tokens, objects)


def member(role: str) -> Actor:
    return Actor(MEMBERS[role], "none", project_roles=roles_of({OWN: role}))


#: allowed: done, or refused by the object's state (a run already queued), which is
#: checked only once the role has been
ALLOWED = {200, 202, 409}


def expected_own(role: str, case: Case) -> set[int]:
    return ALLOWED if may(member(role), case.action, OWN) else {403}


def missing(role: str, case: Case) -> set[int]:
    """The answer in the own project for a name or id it does not hold."""
    return {404} if may(member(role), case.action, OWN) else {403}


def violations(world: World, role: str) -> list[str]:
    """Every case whose answer differs from the table (own objects), is not 404 (the other
    project's objects named in it) or differs from a missing object's (named in the own
    project)."""
    found = []
    headers = bearer(world.tokens[role])
    for case in CASES:
        asks = [
            (world.objects[OWN], OWN, expected_own(role, case)),
            (world.objects[OTHER], OTHER, {404}),
            (world.objects[OTHER], OWN, missing(role, case)),
        ]
        for objects, project, wanted in asks:
            url = case.url(objects, project)
            answer = world.client.request(case.method, url, headers=headers, json=case.body)
            if answer.status_code not in wanted:
                found.append(f"{case.method} {url}: {answer.status_code}, wanted {wanted}")
    return found


def listed(world: World, who: str, project: str) -> set[str]:
    """The job, target and run names and ids ``who`` finds in the lists and the search."""
    headers = bearer(world.tokens[who])
    seen: set[str] = set()
    for path, key in (("/jobs", "name"), ("/targets", "name"), ("/runs", "id")):
        answer = world.client.get(f"{API}{path}?project={project}", headers=headers)
        if answer.status_code != 200:
            seen.add(f"{path}: {answer.status_code}")
            continue
        rows = answer.json()
        rows = rows["items"] if isinstance(rows, dict) else rows
        seen |= {str(row[key]) for row in rows}
    return seen


@pytest.mark.parametrize("role", list(MEMBERS))
def test_a_member_of_one_project_gets_what_the_table_allows_there_and_nothing_else(
    world: World, role: str
) -> None:
    assert violations(world, role) == []


@pytest.mark.parametrize("role", list(MEMBERS))
def test_lists_and_search_show_the_own_project_only(world: World, role: str) -> None:
    own = {world.objects[OWN][kind] for kind in LISTED}
    other = {world.objects[OTHER][kind] for kind in LISTED}
    seen = listed(world, role, OWN)
    assert own <= seen
    assert not seen & other
    # The other project does not exist for the member: its lists are a 404.
    assert listed(world, role, OTHER) == {"/jobs: 404", "/targets: 404", "/runs: 404"}


def test_blackout_windows_incidents_and_silences_are_listed_in_their_project_only(
    world: World,
) -> None:
    headers = bearer(world.tokens["viewer"])

    def ids(project: str) -> set[str] | int:
        answer = world.client.get(f"{API}/blackouts?project={project}", headers=headers)
        if answer.status_code != 200:
            return int(answer.status_code)
        return {str(row["id"]) for row in answer.json()}

    assert ids(OWN) == {world.objects[OWN]["blackout"]}
    assert ids(OTHER) == 404
    # The incidents and silences of the other project do not exist either.
    for path in ("/incidents", "/silences"):
        own = world.client.get(f"{API}{path}?project={OWN}", headers=headers)
        other = world.client.get(f"{API}{path}?project={OTHER}", headers=headers)
        assert (own.status_code, other.status_code) == (200, 404), path


def test_a_global_viewer_still_sees_every_project(world: World) -> None:
    """Its rights are what they were: it reads both projects, and changes neither."""
    for project in (OWN, OTHER):
        found = listed(world, "global viewer", project)
        assert {world.objects[project][kind] for kind in LISTED} <= found
    headers = bearer(world.tokens["global viewer"])
    url = Case("job.run", "POST", "/jobs/{job}/run").url(world.objects[OTHER], OTHER)
    assert world.client.post(url, headers=headers, json={}).status_code == 403


def test_a_token_narrowed_to_a_project_and_a_role_acts_only_there(app: App, world: World) -> None:
    """An admin's token limited to ``web`` as a viewer: reads there, changes nothing, and
    the default project does not exist for it."""
    token, _ = users.create_token(app, ADMIN, "admin", "narrow", project=OTHER, role="viewer")
    headers = bearer(token)
    job = world.objects[OTHER]["job"]
    assert world.client.get(f"{API}/jobs/{job}", headers=headers).status_code == 200
    run = world.client.post(f"{API}/jobs/{job}/run", headers=headers, json={})
    assert run.status_code == 403
    assert world.client.get(f"{API}/jobs?project=default", headers=headers).status_code == 404
    assert world.client.get(f"{API}/users", headers=headers).status_code == 403


def test_negative_control_a_run_read_without_its_scope_check_is_caught(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the run reads' project check taken out (the role alone decides), the checker
    finds the other project's runs answered instead of 404."""

    def role_only(
        _session: object, actor: Actor, action: str, *, job_id: int, kind: str, ident: object
    ) -> None:
        actor.authorize_in(action)

    monkeypatch.setattr(run_reads, "authorize_job_object", role_only)
    leaks = violations(world, "viewer")
    assert leaks
    assert all("/runs/" in leak for leak in leaks)


def test_negative_control_a_blackout_read_without_its_project_check_is_caught(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the windows' project check taken out, the checker finds the other project's
    window answered instead of 404."""

    def any_project(session: Session, _actor: Actor, blackout_id: int) -> Blackout:
        return session.get_one(Blackout, blackout_id)

    monkeypatch.setattr(blackout_windows, "_own_row", any_project)
    leaks = violations(world, "viewer")
    assert leaks
    assert all("/blackouts/" in leak for leak in leaks)


def test_a_member_without_a_global_role_gets_pages_without_a_server_error(world: World) -> None:
    """For a member of ``pbx`` only the pages open in ``pbx`` and answer, never with a
    500 nor with ``web``'s names (``test_project_pages.py`` checks them route by route)."""
    client = world.client
    answer = client.post("/login", data={"username": "amy", "password": "amy-password"})
    assert answer.status_code == 303, answer.text
    for path in ("/", "/jobs", "/targets", "/runs", f"/runs/{world.objects[OTHER]['run']}"):
        page = client.get(path)
        assert page.status_code < 500, (path, page.status_code)
        assert "bjob" not in page.text and ">b1<" not in page.text, path


#: the CLI's side of the matrix: (action, argv with the object's name or id)
CLI_CASES = (
    ("job.read", ("job", "show", "{job}")),
    ("job.disable", ("job", "disable", "{job}")),
    ("job.enable", ("job", "enable", "{job}")),
    ("target.read", ("target", "show", "{target}")),
    ("target.pause", ("target", "pause", "{target}")),
    ("target.pause", ("target", "resume", "{target}")),
    ("run.read", ("runs", "show", "{run}")),
    ("blackout.read", ("blackout", "show", "{blackout}")),
)


def cli_violations(app: App, world: World, role: str, cli: Callable[..., Any]) -> list[str]:
    """As :func:`violations`, through the CLI acting as the member: an allowed command exits
    0; a refused one exits 2 saying who may not; another project's object exits 2 saying it
    does not exist (in its project: the project; in the own one: as a missing name)."""
    found = []
    for action, argv in CLI_CASES:
        allowed_here = may(member(role), action, OWN)
        asks = [
            (world.objects[OWN], OWN, (0, "") if allowed_here else (2, "may not")),
            (world.objects[OTHER], OTHER, (2, f"project {OTHER} does not exist")),
            (world.objects[OTHER], OWN, (2, "does not exist" if allowed_here else "may not")),
        ]
        for objects, project, (code, says) in asks:
            args = [a.format(**objects) for a in argv]
            done = cli(*args, "--project", project, "--as", MEMBERS[role])
            if done.returncode != code or says not in done.stderr:
                found.append(
                    f"{' '.join(args)} --project {project}: {done.returncode} {done.stderr}"
                )
    return found


@pytest.mark.parametrize("role", list(MEMBERS))
def test_the_cli_gives_a_member_what_the_table_allows_and_hides_the_other_project(
    app: App,
    world: World,
    role: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_in_process(app, monkeypatch, capsys, *args)

    assert cli_violations(app, world, role, cli) == []
    listed_jobs = cli("job", "list", "--json", "--project", OWN, "--as", MEMBERS[role])
    assert "ajob" in listed_jobs.stdout and "bjob" not in listed_jobs.stdout


def test_negative_control_a_target_read_that_ignores_the_project_is_caught(
    app: App,
    world: World,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With ``target show``'s lookup by name alone (the project left out), the CLI checker
    finds the other project's target shown."""

    def by_name_only(session: Session, name: str, _pid: int, *, shared: bool = False) -> Target:
        return session.scalars(select(Target).where(Target.name == name)).one()

    monkeypatch.setattr(target_reads, "get_target", by_name_only)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_in_process(app, monkeypatch, capsys, *args)

    leaks = cli_violations(app, world, "operator", cli)
    assert leaks
    assert all(leak.startswith("target show b1") for leak in leaks)
