"""Groups to a global role (core/sso_mapping.py): the highest mapped role wins, no mapped
group gives no role, and a configuration entry is checked key by key."""

from __future__ import annotations

import pytest

from fleetcron.core.sso_mapping import GroupRole, parse_mapping, role_for
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


def test_a_project_key_is_refused_until_projects_exist() -> None:
    """Projects will add an optional ``project`` key to an entry; until then it is refused
    with a message that says so, not ignored (a configuration never means more than
    fleetcron does)."""
    with pytest.raises(InvalidInput, match="groups do not give roles in projects yet"):
        parse_mapping([{"group": "ops", "role": "operator", "project": "pbx"}], field="m")
