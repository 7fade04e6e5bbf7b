"""The dashboard's health (*Needs attention*, hosts down, the day's runs) and the job page's
incidents act in the page's project, on SQLite and PostgreSQL.

Projects ``pbx`` and ``web`` each have a local target ``db1``, a job ``backup`` on it (the
same names) and an SSH target ``gw``. One slot of both jobs is recorded through the store's
write path: ``web``'s fails, ``pbx``'s succeeds; the probe found ``web``'s ``gw`` refusing
connections, ``pbx``'s reachable. ``amy`` is a viewer of ``pbx``, ``bea`` of ``web`` (no
global role). The negative control takes the project out of the health statements and
shows ``web``'s failure and host in ``pbx``'s dashboard.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import ColumnElement, SQLColumnExpression, select, true

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.permissions import may
from fleetcron.core.reach import Reach
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import NotFound
from fleetcron.executors.base import EMPTY_OUTPUT, ExecResult
from fleetcron.executors.ssh_probe import ProbeResult
from fleetcron.services.accounts import users
from fleetcron.services.health import report as health
from fleetcron.services.health.scope import Scope
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.projects import admin as projects
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.reach import record_probes
from fleetcron.services.targets.shares import share_target
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Incident, Job, Project
from fleetcron.web.pages import job_page
from integration.test_backup import ssh_private_key
from integration.web.test_project_pages import ADMIN, logged_in
from integration.web.test_target_reach_pages import HOST_KEY

OWN, OTHER = "pbx", "web"
VIEWERS = {OWN: "amy", OTHER: "bea"}
REFUSED = "connection refused: 192.0.2.10:22"


def add_ssh(app: App, project: str, name: str, reach: Reach) -> None:
    spec = TargetSpec(
        name, host="192.0.2.10", user="ops", private_key=ssh_private_key(), host_key=HOST_KEY
    )
    added = targets.add_target(app, ADMIN.within(project), spec, verify=False, allow_same_host=True)
    error = None if reach == Reach.REACHABLE else REFUSED
    record_probes(app, [ProbeResult(added.target.id, reach, error, 0.01)], app.now())


def job_ids(app: App, project: str) -> set[int]:
    with app.db.read() as session:
        return set(
            session.scalars(
                select(Job.id)
                .join(Project, Project.id == Job.project_id)
                .where(Project.name == project)
            )
        )


def record_slot(app: App, clock: FakeClock, failing: set[int]) -> None:
    """Claim the slots due now and finish each run: failed for the jobs in ``failing``."""
    store = RunStore(app.db, node=app.node_name, clock=clock)
    results = []
    for d in store.claim_due(clock.now).dispatches:
        failed = d.job_id in failing
        done = clock.now + timedelta(milliseconds=5)
        outcome = ExecResult(
            "failed" if failed else "succeeded",
            1 if failed else 0,
            EMPTY_OUTPUT,
            EMPTY_OUTPUT,
            clock.now,
            done,
            5,
            None,
        )
        results.append((d.run_id, outcome))
    assert len(results) == 2
    assert store.finish(results) == []


@pytest.fixture
def teams(app: App, clock: FakeClock) -> None:
    for project in (OWN, OTHER):
        admin = ADMIN.within(project)
        projects.add_project(app, ADMIN, project)
        targets.add_target(app, admin, TargetSpec("db1", TargetKind.LOCAL))
        jobs.add_job(app, admin, "backup", JobSpec("* * * * *", "backup"), target="db1")
        add_ssh(app, project, "gw", Reach.REFUSED if project == OTHER else Reach.REACHABLE)
        users.add_user(app, ADMIN, VIEWERS[project], f"{VIEWERS[project]}-password", "none")
        projects.grant(app, ADMIN, project, VIEWERS[project], "viewer")
    clock.advance(seconds=31)  # 09:01:01: both jobs' first slot is due
    record_slot(app, clock, job_ids(app, OTHER))


def health_of(text: str) -> dict[str, object]:
    """What the dashboard says of health: the lines of *Needs attention*, the hosts down,
    and the day's runs by status."""
    attention = text.split('id="needs-attention"', 1)[1] if 'id="needs-attention"' in text else ""
    lines = re.findall(
        r'<span class="badge badge-\w+">(\w+)</span>', attention.split("</table>")[0]
    )
    hosts = re.findall(r'<tr data-host="([^"]+)"', text)
    card = text.split("runs in 24 h", 1)[1].split("</a>", 1)[0] if "runs in 24 h" in text else ""
    runs = re.findall(r'<span class="badge badge-\w+">([^<]+)</span>&nbsp;(\d+)', card)
    return {"attention": lines, "hosts": hosts, "runs": dict(runs)}


def test_the_service_counts_one_projects_health_and_every_projects(app: App, teams: None) -> None:
    own = health.summary(app, ADMIN, project=OWN)
    other = health.summary(app, ADMIN, project=OTHER)
    every = health.summary(app, ADMIN)

    assert (own.ok, own.grouped, own.hosts_down, own.runs_24h) == (
        True,
        [],
        0,
        {"succeeded": 1},
    )
    assert [(g.kind, g.project, g.job, g.target) for g in other.grouped] == [
        ("failing", OTHER, "backup", "db1")
    ]
    assert (other.hosts_down, [h.target for h in other.hosts]) == (1, ["gw"])
    assert (other.runs_24h, other.failures_24h) == ({"failed": 1}, 1)
    assert (every.line_count, every.hosts_down, every.runs_24h) == (
        1,
        1,
        {"failed": 1, "succeeded": 1},
    )


def test_a_member_sees_its_projects_health_on_the_dashboard_and_nothing_of_another(
    app: App, teams: None
) -> None:
    for client in logged_in(app, VIEWERS[OWN]):
        page = client.get("/")
        assert page.status_code == 200
        assert health_of(page.text) == {"attention": [], "hosts": [], "runs": {"succeeded": "1"}}
        assert 'aria-label="Needs attention"' not in page.text
    for client in logged_in(app, VIEWERS[OTHER]):
        page = client.get("/")
        assert health_of(page.text) == {
            "attention": ["failing"],
            "hosts": ["gw"],
            "runs": {"failed": "1"},
        }


def test_a_global_admin_sees_the_health_of_the_project_it_switches_to(
    app: App, teams: None
) -> None:
    for client in logged_in(app, "admin"):
        own = health_of(client.get(f"/?project={OWN}").text)
        other = health_of(client.get(f"/?project={OTHER}").text)
        default = health_of(client.get("/?project=default").text)
    assert own == {"attention": [], "hosts": [], "runs": {"succeeded": "1"}}
    assert other == {"attention": ["failing"], "hosts": ["gw"], "runs": {"failed": "1"}}
    assert default == {"attention": [], "hosts": [], "runs": {}}


def test_a_host_shared_into_a_project_is_among_its_hosts_down(app: App, teams: None) -> None:
    add_ssh(app, OTHER, "edge", Reach.TIMEOUT)
    share_target(app, ADMIN.within(OTHER), "edge", OWN)
    for client in logged_in(app, VIEWERS[OWN]):
        assert health_of(client.get("/").text)["hosts"] == ["edge"]
    assert [h.target for h in health.summary(app, ADMIN, project=OTHER).hosts] == ["gw", "edge"]


def test_negative_control_health_without_the_project_shows_anothers_failure_and_host(
    app: App, teams: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the project's condition taken out of the statements, ``pbx``'s dashboard shows
    ``web``'s failing ``backup`` and its host ``gw``: the checks above would see it."""

    def every(
        _self: Scope, _column: SQLColumnExpression[int] | None = None, *, drives: bool = False
    ) -> ColumnElement[bool]:
        return true()

    monkeypatch.setattr(Scope, "jobs", every)
    monkeypatch.setattr(Scope, "targets", every)
    for client in logged_in(app, VIEWERS[OWN]):
        leaked = health_of(client.get("/").text)
    assert leaked == {
        "attention": ["failing"],
        "hosts": ["gw"],
        "runs": {"failed": "1", "succeeded": "1"},
    }


def open_incident(app: App, clock: FakeClock, project: str, reason: str) -> int:
    [job_id] = job_ids(app, project)
    with app.db.session() as session:
        pid = session.scalar(select(Project.id).where(Project.name == project))
        assert pid is not None
        incident = Incident(
            project_id=pid,
            job_id=job_id,
            job_name="backup",
            cause="failing",
            status="open",
            opened_at=clock.now,
            previous_state="ok",
            reason=reason,
        )
        session.add(incident)
        session.flush()
        return incident.id


def incidents_shown(text: str) -> list[str]:
    return re.findall(r'data-incident="(\d+)"', text)


def test_the_job_page_lists_its_projects_incidents_to_a_member(
    app: App, clock: FakeClock, teams: None
) -> None:
    own = open_incident(app, clock, OWN, "exit 1")
    other = open_incident(app, clock, OTHER, "exit 1")
    for client in logged_in(app, VIEWERS[OWN]):
        page = client.get("/jobs/backup")
        assert incidents_shown(page.text) == [str(own)]
        assert 'id="job-incidents"' in page.text and "1 open;" in page.text
    for client in logged_in(app, "admin"):
        assert incidents_shown(client.get(f"/jobs/backup?project={OTHER}").text) == [str(other)]


def test_negative_control_incidents_read_with_the_global_role_are_not_listed_to_a_member(
    app: App, clock: FakeClock, teams: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the page weighing ``incident.read`` by the global role alone (as before), the
    member's job page lists no incident: the check above sees the difference."""
    open_incident(app, clock, OWN, "exit 1")
    monkeypatch.setattr(job_page, "may", lambda actor, action, _project=None: may(actor, action))
    for client in logged_in(app, VIEWERS[OWN]):
        page = client.get("/jobs/backup")
        assert page.status_code == 200 and incidents_shown(page.text) == []


def test_the_members_actor_reads_health_in_its_project_only(app: App, teams: None) -> None:
    amy = Actor(VIEWERS[OWN], "none", project_roles=((OWN, "viewer"),))
    assert health.summary(app, amy, project=OWN).ok
    with pytest.raises(NotFound):
        health.summary(app, amy, project=OTHER)
