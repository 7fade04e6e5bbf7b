"""Groups to roles (core/sso_mapping.py): the highest mapped role wins, globally and in
each project; no mapped group gives no role; roles in projects only give the global role
``none``; a configuration entry is checked key by key."""

from __future__ import annotations

import pytest

from fleetcron.core.sso_mapping import (
    Grants,
    GroupRole,
    grants_for,
    parse_mapping,
    project_roles_for,
    projects_named,
    role_for,
)
from fleetcron.errors import InvalidInput

MAPPING = parse_mapping(
    [
        {"group": "viewers", "role": "viewer"},
        {"group": "ops", "role": "operator"},
        {"group": "cn=Fleet Admins,ou=Groups,dc=example,dc=org", "role": "admin"},
    ],
    field="oidc_role_mapping",
)


def test_the_highest_role_of_the_groups_counts() -> None:
    assert role_for(["viewers", "ops"], MAPPING) == "operator"
    assert role_for(["ops", "viewers"], MAPPING) == "operator"
    assert role_for(["viewers"], MAPPING) == "viewer"


def test_no_mapped_group_gives_no_role() -> None:
    assert role_for([], MAPPING) is None
    assert role_for(["marketing", "Ops"], MAPPING) is None  # plain names match exactly


def test_distinguished_names_match_without_regard_to_case() -> None:
    held = ["CN=fleet admins,OU=groups,DC=example,DC=org"]
    assert role_for(held, MAPPING) == "admin"


def test_entries_parse_into_group_and_role() -> None:
    assert MAPPING[1] == GroupRole("ops", "operator")


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"group": "ops", "role": "root"}, "oidc_role_mapping[0].role"),
        ({"group": "", "role": "viewer"}, "oidc_role_mapping[0].group"),
        ({"role": "viewer"}, "oidc_role_mapping[0].group"),
        ({"group": "ops", "role": "viewer", "projects": "a"}, "unknown key 'projects'"),
        ("ops=viewer", "oidc_role_mapping[0]"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(entry: object, named: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_mapping([entry], field="oidc_role_mapping")  # type: ignore[list-item]
    assert named in refused.value.message


PROJECTS = parse_mapping(
    [
        {"group": "pbx-ops", "project": "pbx", "role": "operator"},
        {"group": "pbx-leads", "project": "pbx", "role": "admin"},
        {"group": "web-ops", "project": "web", "role": "viewer"},
        {"group": "ops", "role": "operator"},
        {"group": "lab", "project": "lab", "role": "admin"},
    ],
    field="oidc_role_mapping",
)


def test_an_entry_with_a_project_gives_a_role_there_not_globally() -> None:
    assert PROJECTS[0] == GroupRole("pbx-ops", "operator", "pbx")
    assert role_for(["pbx-ops"], PROJECTS) is None
    assert project_roles_for(["pbx-ops"], PROJECTS) == {"pbx": "operator"}
    # Negative control: an entry without a project still gives a global role.
    assert role_for(["ops"], PROJECTS) == "operator"
    assert project_roles_for(["ops"], PROJECTS) == {}


def test_the_highest_role_in_each_project_counts() -> None:
    roles = project_roles_for(["pbx-leads", "pbx-ops", "web-ops"], PROJECTS)
    assert roles == {"pbx": "admin", "web": "viewer"}


def test_roles_in_projects_only_log_in_with_no_global_role() -> None:
    known = {"pbx", "web"}
    assert grants_for(["pbx-ops"], PROJECTS, known) == Grants("none", {"pbx": "operator"}, ())
    assert grants_for(["ops", "web-ops"], PROJECTS, known).role == "operator"
    assert grants_for(["marketing"], PROJECTS, known) == Grants(None, {}, ())


def test_a_project_that_does_not_exist_is_left_out_and_named() -> None:
    """The entry is ignored (the project may be added later); alone it gives no access."""
    assert grants_for(["lab"], PROJECTS, {"pbx"}) == Grants(None, {}, ("lab",))
    assert grants_for(["lab", "pbx-ops"], PROJECTS, {"pbx"}) == Grants(
        "none", {"pbx": "operator"}, ("lab",)
    )
    assert projects_named(PROJECTS) == ("lab", "pbx", "web")


@pytest.mark.parametrize(
    ("project", "allowed"),
    [("", "a project name"), ("pbx ops", "a project name"), (7, "a project name")],
)
def test_a_bad_project_is_refused_naming_field_value_and_what_is_allowed(
    project: object, allowed: str
) -> None:
    entry = {"group": "ops", "project": project, "role": "operator"}
    with pytest.raises(InvalidInput) as refused:
        parse_mapping([{"group": "a", "role": "viewer"}, entry], field="ldap_role_mapping")
    assert refused.value.field == "ldap_role_mapping[1].project"
    assert repr(project) in refused.value.message
    assert allowed in refused.value.message


def test_an_unknown_key_names_the_keys_allowed() -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_mapping([{"group": "ops", "role": "viewer", "team": "pbx"}], field="m")
    assert "unknown key 'team'" in refused.value.message
    assert "group, project, role" in refused.value.message
