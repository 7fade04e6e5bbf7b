"""The pages' side of the isolation matrix of projects (``test_project_isolation.py`` is
the API's and the CLI's), against the web application on SQLite and PostgreSQL.

A viewer, an operator and an admin of project ``pbx`` (no global role) log in with the
form. For every page route on one job, target, run, incident or blackout window, the case
names its action of the
permission table: on ``pbx``'s own objects the answer is what the table allows (the page,
or a redirect after a form, else 403); on project ``web``'s objects it is 404; ``web``'s
objects named in ``pbx`` get what a name ``pbx`` does not hold gets (the same status, the
same redirect and message but for the name): names cannot be probed. The dashboard (its
counts, grid and recent failures), the lists, the runs search and Upcoming show ``pbx``'s
objects and never ``web``'s. Negative controls take a scope out of a run read and of the
grid and show each checker finds the leak. The project switcher: shown to a user who sees
two projects or more, absent for one; choosing a project changes what the job list shows,
and is kept; a form acts in the project its page was shown in.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, true

from fleetcron.app import Actor, App
from fleetcron.core.permissions import is_project_action, may, roles_of
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.alerts.incidents import Member, StateChange, record_changes
from fleetcron.services.blackouts.windows import BlackoutSpec, add_blackout
from fleetcron.services.fleet import grid
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.runs import reads as run_reads
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import shares
from fleetcron.store.schema import Assignment, Incident, Job, Project
from fleetcron.web.deps import PROJECT_COOKIE
from fleetcron.web.pages.forms import FLASH_COOKIE
from integration.web.conftest import csrf_token_of, new_client, web_app
from integration.web.test_job_forms import form_fields
from integration.web.test_route_permissions import endpoints

ADMIN = Actor("admin", "admin")
OWN, OTHER = "pbx", "web"
MEMBERS = {"viewer": "amy", "operator": "oscar", "admin": "adam"}
#: a name neither project holds, the control every other project's object is compared to
MISSING = {
    "job": "nosuchjob",
    "target": "nosuch1",
    "run": "999999",
    "incident": "999998",
    "blackout": "999997",
}


@dataclass(frozen=True)
class PageCase:
    action: str
    method: str
    path: str

    def url(self, objects: dict[str, str], project: str) -> str:
        # a page's link names no project (the session's choice does); a form posts it
        path = self.path.format(**objects)
        joiner = "&" if "?" in path else "?"
        return path if self.method == "POST" else f"{path}{joiner}project={project}"


#: every page route on one job, target or run, with its action in the table (checked by
#: :func:`test_every_page_route_on_an_object_of_a_project_is_in_the_matrix`); the ones
#: that remove come last. Forms are posted empty but for the CSRF token and the project:
#: the own project's may answer 422 (the fields), the question is whose object answers.
PAGE_CASES = (
    PageCase("job.read", "GET", "/jobs/{job}"),
    PageCase("job.read", "GET", "/jobs/{job}/plan"),
    PageCase("job.read", "GET", "/jobs/{job}/versions"),
    PageCase("job.revert", "GET", "/jobs/{job}/revert?to=1"),
    PageCase("job.edit", "GET", "/jobs/{job}/edit"),
    PageCase("job.remove", "GET", "/jobs/{job}/delete"),
    PageCase("job.edit", "POST", "/jobs/{job}/edit"),
    PageCase("job.run", "POST", "/jobs/{job}/run"),
    PageCase("job.run", "POST", "/jobs/{job}/rerun-failed"),
    PageCase("job.run", "POST", "/jobs/{job}/run-selected"),
    PageCase("job.disable", "POST", "/jobs/{job}/pause-selected"),
    PageCase("job.enable", "POST", "/jobs/{job}/resume-selected"),
    PageCase("job.run", "POST", "/jobs/{job}/run-plan"),
    PageCase("job.revert", "POST", "/jobs/{job}/revert"),
    PageCase("target.read", "GET", "/targets/{target}"),
    PageCase("target.edit", "GET", "/targets/{target}/edit"),
    PageCase("target.unpair", "GET", "/targets/{target}/unpair"),
    PageCase("target.remove", "GET", "/targets/{target}/delete"),
    PageCase("target.edit", "POST", "/targets/{target}/edit"),
    PageCase("target.pair", "POST", "/targets/{target}/pair"),
    PageCase("target.repin", "POST", "/targets/{target}/repin/check"),
    PageCase("target.repin", "POST", "/targets/{target}/repin"),
    PageCase("target.pause", "POST", "/targets/{target}/pause"),
    PageCase("target.pause", "POST", "/targets/{target}/resume"),
    PageCase("job.add", "POST", "/targets/{target}/jobs"),
    PageCase("job.disable", "POST", "/targets/{target}/jobs/{job}/disable"),
    PageCase("job.enable", "POST", "/targets/{target}/jobs/{job}/enable"),
    PageCase("job.run", "POST", "/targets/{target}/jobs/{job}/run"),
    PageCase("run.read", "GET", "/runs/{run}"),
    PageCase("run.stop", "GET", "/runs/{run}/stop"),
    PageCase("run.stop", "POST", "/runs/{run}/stop"),
    PageCase("incident.read", "GET", "/incidents/{incident}"),
    PageCase("incident.ack", "POST", "/incidents/{incident}/ack"),
    PageCase("blackout.lift", "POST", "/blackouts/{blackout}/lift"),
    PageCase("target.unpair", "POST", "/targets/{target}/unpair"),
    PageCase("job.remove", "POST", "/jobs/{job}/delete"),
    PageCase("target.remove", "POST", "/targets/{target}/delete"),
)
#: the pages that list a project's objects
LIST_PAGES = ("/", "/jobs", "/targets", "/runs", "/upcoming")


def _fill(app: App, project: str, prefix: str) -> dict[str, str]:
    """A target, a bulk job over it (the grid's column), a run, an incident of the job and
    a blackout window over it, in ``project``."""
    admin = ADMIN.within(project)
    targets.add_target(app, admin, TargetSpec(f"{prefix}1", TargetKind.LOCAL, labels=["g=x"]))
    spec = JobSpec(schedule="0 3 * * *", command=f"echo {prefix}")
    jobs.add_job(app, admin, f"{prefix}job", spec, bulk=True, selector="g=x")
    run_ids = run_reads.request_run(app, admin, f"{prefix}job")
    window = BlackoutSpec(
        name=f"{prefix}patch",
        reason="kernel patch",
        job=f"{prefix}job",
        target=f"{prefix}1",
        zone="UTC",
        start="2026-03-03 09:00",
        end="2026-03-03 10:00",
    )
    return {
        "job": f"{prefix}job",
        "target": f"{prefix}1",
        "run": str(run_ids[0]),
        "incident": str(_incident(app, project, prefix)),
        "blackout": str(add_blackout(app, admin, window).id),
    }


def _incident(app: App, project: str, prefix: str) -> int:
    """The incident the job's target failing opens (as an evaluation round records it)."""
    with app.db.session() as session:
        row = session.execute(
            select(Assignment.id, Assignment.job_id, Assignment.target_id)
            .join(Job, Job.id == Assignment.job_id)
            .join(Project, Project.id == Job.project_id)
            .where(Job.name == f"{prefix}job", Project.name == project)
        ).one()
        member = Member(row.id, row.job_id, f"{prefix}job", row.target_id, f"{prefix}1")
        change = StateChange(member, "failing", app.now(), "ok", "exit status 1", None)
        record_changes(session, [change])
        return session.scalars(select(Incident.id).where(Incident.job_id == row.job_id)).one()


@pytest.fixture
def objects(app: App) -> dict[str, dict[str, str]]:
    for name in (OWN, OTHER):
        projects.add_project(app, ADMIN, name)
    found = {OWN: _fill(app, OWN, "a"), OTHER: _fill(app, OTHER, "b")}
    for role, name in MEMBERS.items():
        users.add_user(app, ADMIN, name, f"{name}-password", "none")
        projects.grant(app, ADMIN, OWN, name, role)
    return found


def logged_in(app: App, name: str) -> Iterator[TestClient]:
    with new_client(app) as client:
        answer = client.post("/login", data={"username": name, "password": f"{name}-password"})
        assert answer.status_code == 303, answer.text
        yield client


def with_csrf(client: TestClient) -> None:
    """Keep the session's CSRF token on the client, for the forms :func:`ask` posts (a
    header the server ignores)."""
    client.headers["x-test-csrf"] = csrf_token_of(client)


def member(role: str) -> Actor:
    return Actor(MEMBERS[role], "none", project_roles=roles_of({OWN: role}))


def flash_of(answer: httpx.Response) -> str:
    """The one-line message a redirect carries to the next page (signed, read unsigned)."""
    value = answer.cookies.get(FLASH_COOKIE)
    if not value:
        return ""
    payload = value.rpartition(".")[0]
    kind, message = json.loads(base64.urlsafe_b64decode(payload.encode()))
    return f"{kind}: {message}"


def ask(client: TestClient, case: PageCase, objects: dict[str, str], project: str) -> str:
    """The answer as the checker compares it: status, where it redirects, its message,
    with the object's name or id written as ``X``."""
    url = case.url(objects, project)
    if case.method == "GET":
        answer = client.get(url)
    else:
        form = {"csrf_token": client.headers["x-test-csrf"], "project": project}
        answer = client.post(url, data=form)
    said = f"{answer.headers.get('location', '')} {flash_of(answer)}"
    for value in objects.values():
        said = said.replace(value, "X")
    return f"{answer.status_code} {said}"


def page_violations(
    client: TestClient,
    role: str,
    objects: dict[str, dict[str, str]],
    cases: tuple[PageCase, ...] = PAGE_CASES,
) -> list[str]:
    """Every case whose answer differs from the table (own objects), is not 404 (the other
    project's objects, in it) or differs from a missing name's (the other project's objects
    named in the own project)."""
    found = []
    for case in cases:
        allowed = may(member(role), case.action, OWN)
        own = ask(client, case, objects[OWN], OWN)
        if int(own[:3]) not in ({200, 303, 409, 422} if allowed else {403}):
            found.append(f"{case.path} own: {own}")
        other = ask(client, case, objects[OTHER], OTHER)
        if not other.startswith("404"):
            found.append(f"{case.path} in {OTHER}: {other}")
        crossed, missing = ask(client, case, objects[OTHER], OWN), ask(client, case, MISSING, OWN)
        if crossed != missing:
            found.append(f"{case.path} {OTHER}'s in {OWN}: {crossed}, a missing one: {missing}")
    return found


def list_leaks(client: TestClient, objects: dict[str, dict[str, str]]) -> list[str]:
    """What the list pages show of the other project, and what they miss of the own."""
    found = []
    for path in LIST_PAGES:
        page = client.get(f"{path}?project={OWN}")
        if page.status_code != 200:
            found.append(f"{path}: {page.status_code}")
            continue
        found += [f"{path} shows {name}" for name in shown(page.text, objects[OTHER])]
        if path in ("/", "/jobs", "/upcoming") and objects[OWN]["job"] not in page.text:
            found.append(f"{path} misses {objects[OWN]['job']}")
    return found


def shown(text: str, objects: dict[str, str]) -> list[str]:
    links = (f"/jobs/{objects['job']}", f"/targets/{objects['target']}", f"/runs/{objects['run']}")
    return [link for link in links if link in text] + (
        [objects["job"]] if objects["job"] in text else []
    )


@pytest.fixture
def member_client(app: App, request: pytest.FixtureRequest) -> Iterator[TestClient]:
    for client in logged_in(app, MEMBERS[request.param]):
        with_csrf(client)
        yield client


@pytest.mark.parametrize("member_client", list(MEMBERS), indirect=True)
def test_a_member_gets_the_pages_the_table_allows_in_its_project_and_nothing_else(
    objects: dict[str, dict[str, str]], member_client: TestClient, request: pytest.FixtureRequest
) -> None:
    role = request.node.callspec.params["member_client"]
    assert list_leaks(member_client, objects) == []
    assert page_violations(member_client, role, objects) == []


def test_negative_control_a_run_page_without_its_scope_check_is_caught(
    app: App, objects: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the run reads' project check taken out, the run pages of ``web`` answer."""

    def role_only(
        _session: object, actor: Actor, action: str, *, job_id: int, kind: str, ident: object
    ) -> None:
        actor.authorize_in(action)

    monkeypatch.setattr(run_reads, "authorize_job_object", role_only)
    for client in logged_in(app, MEMBERS["viewer"]):
        with_csrf(client)
        # the run pages, and one of a job for the control's control
        cases = tuple(c for c in PAGE_CASES if c.path.startswith(("/runs/", "/jobs/{job}/plan")))
        leaks = page_violations(client, "viewer", objects, cases)
    assert leaks
    assert all(leak.startswith("/runs/") for leak in leaks)


def test_negative_control_a_grid_without_its_project_is_caught(
    app: App, objects: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the grid's targets not confined to the project, the dashboard shows ``web``'s."""
    monkeypatch.setattr(grid, "target_reaches", lambda _pid: true())
    for client in logged_in(app, MEMBERS["viewer"]):
        assert list_leaks(client, objects) == [f"/ shows /targets/{objects[OTHER]['target']}"]


def switcher(text: str) -> list[str]:
    """The projects the header's switcher offers, the active one marked ``*``."""
    if 'id="project-switch"' not in text:
        return []
    box = text.split('id="project-switch"', 1)[1].split("</select>", 1)[0]
    found = []
    for option in box.split("<option ")[1:]:
        name = option.split('value="', 1)[1].split('"', 1)[0]
        found.append(name + ("*" if " selected" in option.split(">", 1)[0] else ""))
    return found


def test_the_switcher_shows_the_projects_seen_and_keeps_the_one_chosen(
    app: App, objects: dict[str, dict[str, str]]
) -> None:
    projects.grant(app, ADMIN, OTHER, "oscar", "viewer")
    for client in logged_in(app, "amy"):  # one project: no switcher, and she lands in it
        page = client.get("/jobs")
        assert switcher(page.text) == [] and "ajob" in page.text
        assert '<span class="role">viewer</span>' in page.text  # her role there
    for client in logged_in(app, "oscar"):
        jobs_page = client.get("/jobs")
        assert switcher(jobs_page.text) == [f"{OWN}*", OTHER]
        assert "ajob" in jobs_page.text and "bjob" not in jobs_page.text
        switched = client.get(f"/jobs?project={OTHER}")
        assert switcher(switched.text) == [OWN, f"{OTHER}*"]
        assert "bjob" in switched.text and "ajob" not in switched.text
        assert client.cookies.get(PROJECT_COOKIE) == OTHER
        kept = client.get("/jobs")  # no ?project=: the choice is kept
        assert "bjob" in kept.text and switcher(kept.text) == [OWN, f"{OTHER}*"]
        # A form of a page shown in pbx (a tab left open) acts in pbx, and the session
        # follows it there; without the page's project it acts in web (a viewer there).
        csrf = csrf_token_of(client)
        assert client.post("/targets/a1/pause", data={"csrf_token": csrf}).status_code == 403
        paused = client.post("/targets/a1/pause", data={"csrf_token": csrf, "project": OWN})
        assert flash_of(paused).startswith("ok: Paused target a1"), flash_of(paused)
        assert client.cookies.get(PROJECT_COOKIE) == OWN


def test_a_new_job_is_made_in_the_project_its_form_was_shown_in(
    app: App, objects: dict[str, dict[str, str]]
) -> None:
    projects.grant(app, ADMIN, OTHER, "oscar", "viewer")
    for client in logged_in(app, "oscar"):
        form = {**form_fields(), "name": "nightly", "selector": "g=none"}
        client.get(f"/jobs?project={OTHER}")  # chosen since, in another tab
        assert client.cookies.get(PROJECT_COOKIE) == OTHER
        csrf = csrf_token_of(client)
        made = client.post("/jobs/new", data={**form, "csrf_token": csrf, "project": OWN})
        assert made.status_code == 303, re.findall(
            r'class="(?:field-error|flash[^"]*)"[^>]*>([^<]*)', made.text
        )
    assert jobs.show_job(app, ADMIN.within(OWN), "nightly").name == "nightly"
    assert "nightly" not in jobs.job_names(app, ADMIN.within(OTHER))


def test_a_global_admin_switches_between_every_project(
    app: App, objects: dict[str, dict[str, str]]
) -> None:
    for client in logged_in(app, "admin"):
        assert switcher(client.get("/").text) == ["default*", OWN, OTHER]
        assert "/targets/b1" in client.get(f"/?project={OTHER}").text  # the grid's row
        # a name no project has: one 404 page, and the choice before it is kept
        assert client.get("/jobs?project=nosuch").status_code == 404
        assert client.cookies.get(PROJECT_COOKIE) == OTHER


def test_a_shared_target_says_where_it_is_shared(
    app: App, objects: dict[str, dict[str, str]]
) -> None:
    shares.share_target(app, ADMIN.within(OTHER), "b1", OWN)
    for client in logged_in(app, "admin"):
        owner = client.get(f"/targets/b1?project={OTHER}")
        assert 'id="target-sharing"' in owner.text and f">{OWN}<" in owner.text
    for client in logged_in(app, "amy"):
        seen = client.get("/targets/b1")
        assert seen.status_code == 200
        assert f"{OTHER} <span" in seen.text.split('id="target-sharing"', 1)[1]
        assert "bjob" not in seen.text


def test_every_page_route_on_an_object_of_a_project_is_in_the_matrix(app: App) -> None:
    """The routes are enumerated from the application, so a page added later is missed
    by the matrix only if this fails."""

    def shape(method: str, path: str) -> str:
        return method + " " + re.sub(r"\{[a-z_]+\}", "{}", path.partition("?")[0])

    routes = {
        shape(e.method, e.path)
        for e in endpoints(web_app(app))
        if not e.is_api and "{" in e.path and e.action and is_project_action(e.action)
    }
    assert routes == {shape(case.method, case.path) for case in PAGE_CASES}
