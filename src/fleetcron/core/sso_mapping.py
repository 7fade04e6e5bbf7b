"""Which roles a directory's groups give: the one decision single sign-on takes.

An identity provider (OIDC or LDAP) says which groups a person is in; the configuration
lists mapping entries, each ``{group = "...", role = "..."}`` (a global role) or
``{group = "...", project = "...", role = "..."}`` (a role in that project). A person gets
the highest global role any of their groups maps to (:func:`role_for`) and, in each
project, the highest role their groups map to there (:func:`project_roles_for`). Neither:
no access. Project roles only: the global role ``none``, and only those projects.

Each entry is a table of keys; an unknown key is refused with a message naming it, so a
configuration never means more than fleetcron does. Whether a named project exists is the
database's to say, at start and at each log-in (``services/identity/provision.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetcron.core.permissions import NO_ROLE, ROLE_RANK
from fleetcron.core.validation import NAME_RULE, validate_name
from fleetcron.errors import InvalidInput

#: The keys an entry may have.
ENTRY_KEYS = ("group", "project", "role")
#: The longest group name compared (an LDAP DN can be long; anything longer is not a group).
GROUP_MAX_CHARS = 1024


@dataclass(frozen=True)
class GroupRole:
    """One mapping entry: members of ``group`` get at least ``role``, in ``project`` or
    (None) globally."""

    group: str
    role: str
    project: str | None = None


def parse_mapping(entries: Sequence[Mapping[str, Any]], *, field: str) -> tuple[GroupRole, ...]:
    """The entries of a ``*_role_mapping`` setting, each checked; errors name the entry."""
    return tuple(_parse_entry(entry, f"{field}[{index}]") for index, entry in enumerate(entries))


def _parse_entry(entry: Mapping[str, Any], where: str) -> GroupRole:
    if not isinstance(entry, Mapping):
        raise _bad(
            where,
            entry,
            'a table {group = "...", role = "viewer|operator|admin"} (and optionally '
            'project = "...")',
        )
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise _bad(where, entry, f"only the keys {', '.join(ENTRY_KEYS)}", unknown[0])
    group, role = entry.get("group"), entry.get("role")
    if not isinstance(group, str) or not group.strip() or len(group) > GROUP_MAX_CHARS:
        raise _bad(f"{where}.group", group, f"a group name of 1 to {GROUP_MAX_CHARS} characters")
    if role not in ROLE_RANK:
        raise _bad(f"{where}.role", role, ", ".join(ROLE_RANK))
    return GroupRole(group.strip(), str(role), _project(entry, where))


def _project(entry: Mapping[str, Any], where: str) -> str | None:
    """The entry's ``project`` (None: a global role), a project name."""
    if "project" not in entry:
        return None
    project = entry["project"]
    if not isinstance(project, str):
        raise _bad(f"{where}.project", project, f"a project name: {NAME_RULE}")
    try:
        return validate_name(project, field=f"{where}.project")
    except InvalidInput:
        raise _bad(f"{where}.project", project, f"a project name: {NAME_RULE}") from None


def _bad(where: str, value: Any, allowed: str, key: str | None = None) -> InvalidInput:
    named = f"{where}: unknown key {key!r}" if key else f"{where}: {value!r} is not allowed"
    return InvalidInput(f"{named}; allowed: {allowed}", field=where, value=value, allowed=allowed)


def role_for(groups: Iterable[str], mapping: Sequence[GroupRole]) -> str | None:
    """The highest global role that any of ``groups`` maps to, or None when none maps.

    Group names are compared exactly, except that LDAP distinguished names are compared
    without regard to case (``cn=Ops,ou=groups`` and ``CN=ops,OU=Groups`` are one group),
    as directories do.
    """
    roles = [entry.role for entry in _matching(groups, mapping) if entry.project is None]
    return max(roles, key=ROLE_RANK.__getitem__, default=None)


def project_roles_for(groups: Iterable[str], mapping: Sequence[GroupRole]) -> dict[str, str]:
    """Project -> the highest role any of ``groups`` maps to there (compared as
    :func:`role_for` compares)."""
    roles: dict[str, str] = {}
    for entry in _matching(groups, mapping):
        if entry.project is not None:
            held = roles.get(entry.project)
            if held is None or ROLE_RANK[entry.role] > ROLE_RANK[held]:
                roles[entry.project] = entry.role
    return roles


@dataclass(frozen=True)
class Grants:
    """What a person's groups give at a log-in, against the projects that exist."""

    #: the global role to log in with: the mapped one, ``none`` when only roles in
    #: projects are given, None when nothing is (no access)
    role: str | None
    #: project -> role, for the projects that exist
    projects: dict[str, str]
    #: the projects the groups name that do not exist (the entries are ignored)
    unknown: tuple[str, ...]


def grants_for(
    groups: Iterable[str], mapping: Sequence[GroupRole], known: Collection[str]
) -> Grants:
    """The global role and the roles in the ``known`` projects ``groups`` map to."""
    groups = tuple(groups)
    wanted = project_roles_for(groups, mapping)
    projects = {project: role for project, role in wanted.items() if project in known}
    role = role_for(groups, mapping)
    if role is None and projects:
        role = NO_ROLE
    return Grants(role, projects, tuple(sorted(set(wanted) - set(projects))))


def projects_named(mapping: Sequence[GroupRole]) -> tuple[str, ...]:
    """The projects the entries name, sorted."""
    return tuple(sorted({entry.project for entry in mapping if entry.project is not None}))


def _matching(groups: Iterable[str], mapping: Sequence[GroupRole]) -> list[GroupRole]:
    held = {_key(group) for group in groups if isinstance(group, str)}
    return [entry for entry in mapping if _key(entry.group) in held]


def _key(group: str) -> str:
    group = group.strip()
    return group.lower() if "=" in group else group
