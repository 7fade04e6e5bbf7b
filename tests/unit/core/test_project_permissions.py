"""The decision with projects: a global role, roles per project, a token's project and role."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetcron.app import Actor
from fleetcron.core.permissions import (
    GLOBAL_ROLES,
    MATRIX,
    NO_ROLE,
    ROLE_RANK,
    allowed,
    capped,
    is_project_action,
    may,
    opening_project,
    roles_of,
    sees,
    visible_projects,
)
from fleetcron.errors import NotFound, PermissionDenied

PROJECTS = ("default", "pbx", "web")
ROLES = tuple(ROLE_RANK)


def actor(role: str = NO_ROLE, token_project: str | None = None, **grants: str) -> Actor:
    return Actor("alice", role, project_roles=roles_of(grants), token_project=token_project)


project_actions = st.sampled_from(sorted(a for a in MATRIX if is_project_action(a)))
global_actions = st.sampled_from(sorted(a for a in MATRIX if not is_project_action(a)))
grants = st.dictionaries(st.sampled_from(PROJECTS), st.sampled_from(ROLES), max_size=3)


@given(role=st.sampled_from(ROLES), action=st.sampled_from(sorted(MATRIX)))
def test_a_global_role_decides_as_before_in_every_project(role: str, action: str) -> None:
    """Every existing user keeps exactly its rights: a global role, no project roles."""
    subject = actor(role)
    assert may(subject, action) == allowed(role, action)
    for project in PROJECTS:
        assert may(subject, action, project) == allowed(role, action)
        assert sees(subject, project)
    assert visible_projects(subject) is None


@given(grant=grants, action=project_actions, project=st.sampled_from(PROJECTS))
def test_a_project_role_grants_only_in_its_project(
    grant: dict[str, str], action: str, project: str
) -> None:
    subject = actor(**grant)
    expected = project in grant and allowed(grant[project], action)
    assert may(subject, action, project) == expected
    assert sees(subject, project) == (project in grant)
    assert visible_projects(subject) == frozenset(grant)


@given(grant=grants, action=global_actions, project=st.sampled_from(PROJECTS))
def test_a_project_role_never_grants_a_global_action(
    grant: dict[str, str], action: str, project: str
) -> None:
    """Users, the cluster, settings, projects, audit, calendars and local targets need the
    global role, whatever the roles in projects (one's own account aside)."""
    subject = actor(**grant)
    personal = action in ("token.manage_own", "account.manage_own", "project.read")
    assert may(subject, action, project) == (personal and bool(grant))


@given(
    role=st.sampled_from(GLOBAL_ROLES),
    grant=grants,
    action=project_actions,
    project=st.sampled_from(PROJECTS),
)
def test_the_higher_of_the_global_and_the_project_role_counts(
    role: str, grant: dict[str, str], action: str, project: str
) -> None:
    subject = actor(role, **grant)
    expected = allowed(role, action) or (project in grant and allowed(grant[project], action))
    assert may(subject, action, project) == expected


def test_without_a_project_a_project_action_needs_the_global_role() -> None:
    """Fail closed: a check that names no project weighs the global role only."""
    subject = actor(pbx="admin")
    assert may(subject, "job.add", "pbx")
    assert not may(subject, "job.add")
    with pytest.raises(PermissionDenied, match=r"alice \(none\) may not add jobs"):
        subject.authorize("job.add")
    subject.authorize_in("job.add", "pbx")
    subject.within("pbx").authorize_in("job.add")
    with pytest.raises(NotFound, match="project web does not exist"):
        subject.within("web").authorize_in("job.read")


def test_a_refusal_names_the_project() -> None:
    with pytest.raises(PermissionDenied, match=r"viewer in project pbx.*operator role in project"):
        actor(pbx="viewer").authorize_in("job.run", "pbx")


@given(role=st.sampled_from(GLOBAL_ROLES), grant=grants, action=project_actions)
def test_a_token_acts_in_its_project_only(role: str, grant: dict[str, str], action: str) -> None:
    subject = actor(role, token_project="pbx", **grant)
    for project in PROJECTS:
        if project != "pbx":
            assert not may(subject, action, project)
            assert not sees(subject, project)
    assert not may(subject, "cluster.read")
    in_pbx = allowed(role, action) or ("pbx" in grant and allowed(grant["pbx"], action))
    assert may(subject, action, "pbx") == in_pbx
    assert visible_projects(subject) == (frozenset({"pbx"}) if sees(subject, "pbx") else set())


@given(role=st.sampled_from(GLOBAL_ROLES), cap=st.sampled_from((None, *ROLES)))
def test_a_token_role_is_never_above_its_owner(role: str, cap: str | None) -> None:
    got = capped(role, cap)
    assert ROLE_RANK.get(got, -1) <= ROLE_RANK.get(role, -1)
    if cap is not None:
        assert ROLE_RANK.get(got, -1) <= ROLE_RANK[cap]


def test_local_targets_and_diagnosis_stay_global() -> None:
    subject = actor(pbx="admin")
    assert not may(subject, "target.local", "pbx")
    assert not may(subject, "target.diagnose", "pbx")
    assert may(actor("admin"), "target.local", "pbx")


def test_negative_control_a_decision_that_ignored_the_project_is_caught() -> None:
    """The checks above fail for a decision that reads any project role as global: a viewer
    of pbx would then see web."""

    def careless_sees(subject: Actor, project: str) -> bool:
        return subject.role in ROLE_RANK or bool(subject.project_roles)

    subject = actor(pbx="viewer")
    assert careless_sees(subject, "web") != sees(subject, "web")


@given(role=st.sampled_from(GLOBAL_ROLES), grants=grants, kept=st.sampled_from((None, *PROJECTS)))
def test_a_session_opens_in_a_project_it_sees_whenever_it_sees_one(
    role: str, grants: dict[str, str], kept: str | None
) -> None:
    """The kept choice while it is seen, else ``default``, else the first seen by name."""
    who = actor(role, **grants)
    opened = opening_project(who, kept)
    seen = [p for p in PROJECTS if sees(who, p)]
    if kept is not None and kept in seen:
        assert opened == kept
    elif seen:
        assert opened == ("default" if "default" in seen else seen[0])
    else:
        assert opened == "default"  # nothing seen: where every page then answers 404


@pytest.mark.parametrize(
    ("who", "kept", "opened"),
    [
        (actor("viewer"), "web", "web"),
        (actor(pbx="operator"), None, "pbx"),
        (actor(pbx="operator"), "web", "pbx"),
        (actor(web="viewer", pbx="admin"), None, "pbx"),
        (actor(default="viewer", pbx="admin"), None, "default"),
    ],
)
def test_where_a_session_opens(who: Actor, kept: str | None, opened: str) -> None:
    assert opening_project(who, kept) == opened
