"""Which global role a directory's groups give: the one decision single sign-on takes.

An identity provider (OIDC or LDAP) says which groups a person is in; the configuration
lists mapping entries, each ``{group = "...", role = "..."}``. A person gets the highest
role any of their groups maps to, or none (and is then refused): no entry, no access.

Each entry is a table of keys so that a key can be added later without breaking a
configuration: when projects come, an entry will take an optional ``project`` key, and an
entry without one keeps meaning what it means today, a global role. Until then an unknown
key (``project`` included) is refused with a message naming it, so a configuration never
means more than fleetcron does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetcron.core.permissions import ROLE_RANK
from fleetcron.errors import InvalidInput

#: The keys an entry may have today.
ENTRY_KEYS = ("group", "role")
#: The longest group name compared (an LDAP DN can be long; anything longer is not a group).
GROUP_MAX_CHARS = 1024


@dataclass(frozen=True)
class GroupRole:
    """One mapping entry: members of ``group`` get at least ``role``."""

    group: str
    role: str


def parse_mapping(entries: Sequence[Mapping[str, Any]], *, field: str) -> tuple[GroupRole, ...]:
    """The entries of a ``*_role_mapping`` setting, each checked; errors name the entry."""
    return tuple(_parse_entry(entry, f"{field}[{index}]") for index, entry in enumerate(entries))


def _parse_entry(entry: Mapping[str, Any], where: str) -> GroupRole:
    if not isinstance(entry, Mapping):
        raise _bad(where, entry, 'a table {group = "...", role = "viewer|operator|admin"}')
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        hint = (
            " (groups do not give roles in projects yet: an entry maps a group to a global"
            " role; give a role in a project with `fleetcron project grant`)"
            if "project" in unknown
            else ""
        )
        raise _bad(where, entry, f"only the keys {', '.join(ENTRY_KEYS)}{hint}", unknown[0])
    group, role = entry.get("group"), entry.get("role")
    if not isinstance(group, str) or not group.strip() or len(group) > GROUP_MAX_CHARS:
        raise _bad(f"{where}.group", group, f"a group name of 1 to {GROUP_MAX_CHARS} characters")
    if role not in ROLE_RANK:
        raise _bad(f"{where}.role", role, ", ".join(ROLE_RANK))
    return GroupRole(group.strip(), str(role))


def _bad(where: str, value: Any, allowed: str, key: str | None = None) -> InvalidInput:
    named = f"{where}: unknown key {key!r}" if key else f"{where}: {value!r} is not allowed"
    return InvalidInput(f"{named}; allowed: {allowed}", field=where, value=value, allowed=allowed)


def role_for(groups: Iterable[str], mapping: Sequence[GroupRole]) -> str | None:
    """The highest role that any of ``groups`` maps to, or None when none maps.

    Group names are compared exactly, except that LDAP distinguished names are compared
    without regard to case (``cn=Ops,ou=groups`` and ``CN=ops,OU=Groups`` are one group),
    as directories do.
    """
    held = {_key(group) for group in groups if isinstance(group, str)}
    roles = [entry.role for entry in mapping if _key(entry.group) in held]
    return max(roles, key=ROLE_RANK.__getitem__, default=None)


def _key(group: str) -> str:
    group = group.strip()
    return group.lower() if "=" in group else group
