"""Groups that give roles in projects, through a real OpenID Connect provider
(``fixtures.oidc_provider``, driven over HTTP as in ``test_oidc_login.py``) and a real
LDAP directory (``fixtures.slapd``): at each log-in the roles from the directory become
what the groups map to now (granted, raised, lowered, removed, each audited naming the
provider), a role granted by hand stays, someone with roles in projects only has the
global role ``none`` and sees those projects only, and a mapping naming a project that
does not exist is a warning for the admin and a message for the user, never a 500."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import make_settings
from fixtures.oidc_provider import MAPPING as OIDC_MAPPING
from fixtures.oidc_provider import (
    OidcProvider,
    sign_in_at_provider,
    start_provider,
    stop_provider,
    user,
)
from fixtures.slapd import GROUPS_BASE, PEOPLE, Slapd, person_dn, start_slapd, stop_slapd
from fleetcron.app import Actor, App
from fleetcron.services.audit import AuditFilter, list_event_views
from fleetcron.services.identity.oidc import forget_provider
from fleetcron.services.projects import admin as projects
from fleetcron.store.schema import Project, ProjectRole, User
from integration.web.conftest import API, new_client, sqlite_only

pytestmark = sqlite_only
ADMIN = Actor("admin", "admin")
FLEET = "http://testserver"
CALLBACK = FLEET + "/login/oidc/callback"
#: the global entries of the provider's tests, and entries giving roles in projects; the
#: last names a project that is never added
OIDC_PROJECTS = [
    *OIDC_MAPPING,
    {"group": "pbx-ops", "project": "pbx", "role": "operator"},
    {"group": "pbx-leads", "project": "pbx", "role": "admin"},
    {"group": "lab", "project": "lab", "role": "viewer"},
    {"group": "marketing", "project": "gone", "role": "admin"},
]
LDAP_PROJECTS = [
    {"group": "ops", "role": "operator"},
    {"group": "marketing", "project": "pbx", "role": "admin"},
    {"group": f"cn=ops,{GROUPS_BASE}", "project": "lab", "role": "viewer"},
]


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    started = start_provider([CALLBACK], [FLEET + "/login"], tmp_path_factory.mktemp("oidc"))
    yield started
    stop_provider(started)
    forget_provider(started.issuer)


@pytest.fixture(scope="module")
def slapd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slapd]:
    server = start_slapd(tmp_path_factory.mktemp("slapd"))
    yield server
    stop_slapd(server)


def with_projects(app: App) -> App:
    for name in ("pbx", "lab", "web"):
        projects.add_project(app, ADMIN, name)
    return app


@pytest.fixture
def oidc_app(database_url: str, tmp_path: Path, provider: OidcProvider) -> Iterator[App]:
    extra = provider.settings(CALLBACK, oidc_role_mapping=OIDC_PROJECTS)
    the_app = App.open(make_settings(tmp_path / "data", database_url, **extra))
    yield with_projects(the_app)
    the_app.close()


@pytest.fixture
def ldap_app(database_url: str, tmp_path: Path, slapd: Slapd) -> Iterator[App]:
    extra = slapd.settings(slapd.starttls_url, ldap_role_mapping=LDAP_PROJECTS)
    the_app = App.open(make_settings(tmp_path / "data", database_url, **extra))
    yield with_projects(the_app)
    the_app.close()


def sso(app: App, login: str) -> tuple[TestClient, httpx.Response]:
    """A new browser logging ``login`` in through the provider; fleetcron's answer."""
    fleet = new_client(app)
    with httpx.Client(follow_redirects=False, timeout=10) as idp:
        started = fleet.get("/login/oidc")
        assert started.status_code == 303, started.text
        back = sign_in_at_provider(idp, started.headers["location"], user(login), back_to=FLEET)
    return fleet, fleet.get(back)


def roles(app: App, name: str) -> tuple[str, set[tuple[str, str, str]]]:
    """``name``'s global role and its (project, role, source) rows."""
    with app.db.read() as session:
        account = session.scalars(select(User).where(User.name == name)).one()
        rows = session.execute(
            select(Project.name, ProjectRole.role, ProjectRole.source)
            .join(Project, Project.id == ProjectRole.project_id)
            .where(ProjectRole.user_id == account.id)
        )
        return account.role, {(p, r, s) for p, r, s in rows}


def role_changes(app: App, name: str) -> list[tuple[str, dict[str, object]]]:
    """The audited changes of ``name``'s roles in projects, oldest first."""
    events, _ = list_event_views(app, ADMIN, AuditFilter(action="project."))
    found = [(e.action, e.detail) for e in events if e.detail.get("user") == name]
    return found[::-1]


def test_oidc_groups_set_roles_in_projects_and_a_hand_grant_stays(
    oidc_app: App, provider: OidcProvider
) -> None:
    provider.set_groups("nina", ["pbx-leads", "lab"])
    fleet, answer = sso(oidc_app, "nina")
    with fleet:
        assert answer.status_code == 303, answer.text
        assert roles(oidc_app, "nina") == (
            "none",
            {("pbx", "admin", "sso"), ("lab", "viewer", "sso")},
        )
        # Roles in projects only: those projects, nothing else.
        assert fleet.get(f"{API}/jobs?project=pbx").status_code == 200
        assert fleet.get(f"{API}/jobs?project=web").status_code == 404
        assert fleet.get(f"{API}/jobs?project=default").status_code == 404
        # Naming no project, the session acts in one it sees (web/deps.py): not `default`.
        assert fleet.get(f"{API}/jobs").status_code == 200
    projects.grant(oidc_app, ADMIN, "web", "nina", "operator")

    provider.set_groups("nina", ["pbx-ops"])
    fleet, answer = sso(oidc_app, "nina")
    with fleet:
        assert answer.status_code == 303, answer.text
        assert fleet.get(f"{API}/jobs?project=lab").status_code == 404
        assert fleet.get(f"{API}/jobs?project=web").status_code == 200

    assert roles(oidc_app, "nina") == (
        "none",
        {("pbx", "operator", "sso"), ("web", "operator", "manual")},
    )
    changes = role_changes(oidc_app, "nina")
    assert [(action, detail["project"]) for action, detail in changes] == [
        ("project.grant", "lab"),
        ("project.grant", "pbx"),
        ("project.grant", "web"),
        ("project.grant", "pbx"),
        ("project.revoke", "lab"),
    ]
    lowered = changes[3][1]
    assert (lowered["role"], lowered["was"], lowered["provider"]) == (
        "operator",
        "admin",
        "Test IdP",
    )
    assert changes[4][1]["provider"] == "Test IdP"
    assert "provider" not in changes[2][1]  # negative control: the hand grant names none


def test_a_mapping_naming_a_missing_project_is_a_message_and_a_log_line(
    oidc_app: App, provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    new_client(oidc_app).close()  # the web server's start
    started = [
        r.getMessage() for r in caplog.records if getattr(r, "action", "") == "sso.unknown_project"
    ]
    assert started == [
        "oidc_role_mapping[5] (group 'marketing', role admin) names the project 'gone', which "
        "does not exist; the entry is ignored until it does (projects: default, lab, pbx, web)"
    ]
    caplog.clear()
    provider.set_groups("nina", ["marketing"])

    fleet, answer = sso(oidc_app, "nina")
    fleet.close()

    assert answer.status_code == 403
    assert "projects fleetcron does not have (gone)" in answer.text
    # The new browser's server starts (a warning), then the log-in (a warning, a refusal).
    assert [getattr(r, "action", "") for r in caplog.records if r.levelno >= logging.WARNING] == [
        "sso.unknown_project",
        "sso.unknown_project",
        "sso.no_role",
    ]
    with oidc_app.db.read() as session:
        assert session.scalar(select(User).where(User.name == "nina")) is None


def ldap_log_in(app: App, login: str) -> None:
    with new_client(app) as fleet:
        answer = fleet.post("/login", data={"username": login, "password": PEOPLE[login][0]})
        assert answer.status_code == 303, answer.text


def move_lisa_to_ops() -> str:
    """The LDIF that takes Lisa out of ``marketing`` (Luke stays in it: a group of names
    keeps a member) and into ``ops``."""
    lisa, luke = person_dn("lisa"), person_dn("luke")
    return (
        f"dn: cn=marketing,{GROUPS_BASE}\nchangetype: modify\nadd: member\nmember: {luke}\n-\n"
        f"delete: member\nmember: {lisa}\n\n"
        f"dn: cn=ops,{GROUPS_BASE}\nchangetype: modify\nadd: member\nmember: {lisa}\n"
    )


def test_ldap_groups_set_roles_in_projects_and_a_hand_grant_stays(
    ldap_app: App, slapd: Slapd
) -> None:
    ldap_log_in(ldap_app, "lisa")
    assert roles(ldap_app, "lisa") == ("none", {("pbx", "admin", "sso")})
    projects.grant(ldap_app, ADMIN, "web", "lisa", "viewer")

    slapd.modify(move_lisa_to_ops())
    ldap_log_in(ldap_app, "lisa")

    assert roles(ldap_app, "lisa") == (
        "operator",
        {("lab", "viewer", "sso"), ("web", "viewer", "manual")},
    )
    changes = role_changes(ldap_app, "lisa")
    assert [(action, detail["project"], detail.get("provider")) for action, detail in changes] == [
        ("project.grant", "pbx", "Test LDAP"),
        ("project.grant", "web", None),
        ("project.grant", "lab", "Test LDAP"),
        ("project.revoke", "pbx", "Test LDAP"),
    ]
