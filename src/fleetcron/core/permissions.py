"""Who may do what: the permission matrix, in one place.

Roles are ordered: ``viewer`` < ``operator`` < ``admin``; each action names the least
role allowed to perform it. The CLI, the API and the web pages all ask :func:`authorize`
(one role) or :func:`may` (an actor, in a project).

**Projects.** A user has a global role (``users.role``; ``none``: no global role) and may
have a role in some projects. An action on a project's objects (:func:`is_project_action`:
targets, jobs, runs, incidents, silences, blackout windows, and reading the audit events
about them) is allowed by the higher of the two in that project; every other action (users,
cluster, settings, projects, calendars, local targets) needs the global role. A project the
actor has no role in, globally or there, is invisible (:func:`sees`): the services answer
"not found" for its objects, so names cannot be probed. One's own account and tokens are
open to anyone with a role anywhere.

An API token also has a scope, ordered ``read`` < ``run`` < ``write``; each action names
the least scope it needs (:data:`SCOPE_NEEDED`). A scope only narrows: a token may do what
its owner's role allows *and* its scope allows. Sessions and the CLI act with ``write``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from fleetcron.errors import NotFound, PermissionDenied

ROLE_RANK = {"viewer": 0, "operator": 1, "admin": 2}
#: the project every object of an install starts in (migration 0035); never removed
DEFAULT_PROJECT = "default"
#: the global role of a user who has roles in projects only
NO_ROLE = "none"
#: every value of ``users.role``
GLOBAL_ROLES = (NO_ROLE, *ROLE_RANK)

#: action -> least role allowed
MATRIX: dict[str, str] = {
    "target.read": "viewer",
    "target.add": "operator",
    "target.pair": "operator",
    "target.unpair": "operator",
    "target.label": "operator",
    "target.remove": "operator",
    "target.edit": "operator",
    "target.repin": "operator",
    "target.pause": "operator",
    # A local target runs commands as the scheduler's own user, next to the database and
    # the master key: creating one (or turning a target into one) is for admins only.
    "target.local": "admin",
    # Why pairing failed (connection refused, timed out, key refused): for others a coarse
    # answer, so pairing is no port scanner of the scheduler's network.
    "target.diagnose": "admin",
    "job.read": "viewer",
    "job.add": "operator",
    "job.edit": "operator",
    "job.enable": "operator",
    "job.disable": "operator",
    "job.remove": "operator",
    "job.revert": "operator",
    "job.run": "operator",
    "run.read": "viewer",
    "run.stop": "operator",
    "audit.read": "viewer",
    # Incidents and silences (services/alerts): anyone reads them; operators acknowledge
    # and mute, as they run and stop jobs.
    "incident.read": "viewer",
    "incident.ack": "operator",
    "silence.read": "viewer",
    "silence.add": "operator",
    "silence.expire": "operator",
    # Blackout windows (services/blackouts): anyone reads them; operators, who run and
    # stop every job, may also hold them back for maintenance.
    "blackout.read": "viewer",
    "blackout.add": "operator",
    "blackout.change": "operator",
    "blackout.lift": "operator",
    # Calendars (services/calendars): named dates jobs run only on, or never on.
    "calendar.read": "viewer",
    "calendar.add": "operator",
    "calendar.remove": "operator",
    "user.read": "admin",
    "user.add": "admin",
    "user.edit": "admin",
    "user.remove": "admin",
    "token.manage_own": "viewer",
    "token.manage_any": "admin",
    # One's own account: change one's own password (with the current one).
    "account.manage_own": "viewer",
    "cluster.read": "viewer",
    "cluster.manage": "admin",
    "settings.manage": "admin",
    # Projects (services/projects): who is in which project, and targets shared between
    # them. Everyone reads the projects they see; only global admins change them.
    "project.read": "viewer",
    "project.add": "admin",
    "project.grant": "admin",
    "project.share": "admin",
}

#: the nouns of the actions on a project's objects: a project role grants them there.
#: Incidents, silences and blackout windows belong to a project and apply to its jobs and
#: targets only (services/alerts, core/blackouts); calendars, channels and the rules'
#: changes stay install-wide (the global role). The audit log is read per project too: a
#: project's events to its people (the events of the whole install, and every event, to
#: global roles).
PROJECT_NOUNS = frozenset({"target", "job", "run", "incident", "silence", "blackout", "audit"})
#: actions on a project's objects that still need the global role: a local target runs
#: commands next to the database and the master key; a pairing's diagnosis scans the
#: scheduler's network
GLOBAL_ONLY = frozenset({"target.local", "target.diagnose"})
#: actions about one's own account, and the list of the projects one sees: open to anyone
#: with a role anywhere (the projects listed are filtered by :func:`sees`)
PERSONAL = frozenset({"token.manage_own", "account.manage_own", "project.read"})


SCOPE_RANK = {"read": 0, "run": 1, "write": 2}
SCOPES = tuple(SCOPE_RANK)
#: the scope of a browser session, of the CLI and of a token made before scopes existed
FULL_SCOPE = "write"

#: action -> least token scope needed: ``read`` reads, ``run`` also runs and stops jobs,
#: ``write`` is everything else (minting tokens and changing one's password included).
SCOPE_NEEDED: dict[str, str] = {
    action: (
        "read"
        if action.endswith(".read")
        else "run"
        if action in ("job.run", "run.stop")
        else "write"
    )
    for action in MATRIX
}

#: How a refusal names an action where "VERB NOUNs" (``user.add``: "add users") does not
#: read well.
PHRASES: dict[str, str] = {
    "target.repin": "re-pin targets' host keys",
    "target.local": "add or edit local targets",
    "target.diagnose": "see why pairing a target failed",
    "audit.read": "read the audit log",
    "incident.ack": "acknowledge incidents",
    "blackout.read": "read blackout windows",
    "blackout.add": "add blackout windows",
    "blackout.change": "change blackout windows",
    "blackout.lift": "lift blackout windows",
    "token.manage_own": "manage their own API tokens",
    "token.manage_any": "manage other users' API tokens",
    "account.manage_own": "manage their own account",
    "cluster.read": "read the cluster's state",
    "cluster.manage": "manage the cluster",
    "settings.manage": "manage the settings",
    "project.grant": "grant roles in projects",
    "project.share": "share targets between projects",
}


def action_phrase(action: str) -> str:
    """``action`` as words for a refusal: ``user.add`` -> "add users"."""
    if action in PHRASES:
        return PHRASES[action]
    noun, _, verb = action.partition(".")
    return f"{verb} {noun}s"


def allowed(role: str, action: str, scope: str = FULL_SCOPE) -> bool:
    least = MATRIX[action]
    if ROLE_RANK.get(role, -1) < ROLE_RANK[least]:
        return False
    return SCOPE_RANK.get(scope, -1) >= SCOPE_RANK[SCOPE_NEEDED[action]]


def authorize(actor_name: str, role: str, action: str, scope: str = FULL_SCOPE) -> None:
    """Raise PermissionDenied unless ``role`` (and, for a token, ``scope``) may perform
    ``action``."""
    if not allowed(role, action):
        raise PermissionDenied(
            f"{actor_name} ({role}) may not {action_phrase(action)}; "
            f"it needs the {MATRIX[action]} role"
        )
    if not allowed(role, action, scope):
        raise PermissionDenied(
            f"this API token of {actor_name} has the {scope} scope and may not "
            f"{action_phrase(action)}; it needs a token with the {SCOPE_NEEDED[action]} scope"
        )


class Holder(Protocol):
    """Who acts, as the decisions read it (``fleetcron.app.Actor``)."""

    @property
    def name(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def scope(self) -> str: ...
    @property
    def project_roles(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def token_project(self) -> str | None: ...


def is_project_action(action: str) -> bool:
    """Whether a project role grants ``action`` on that project's objects."""
    return action.partition(".")[0] in PROJECT_NOUNS and action not in GLOBAL_ONLY


def higher(first: str, second: str) -> str:
    """The higher of two roles (``none`` is below every role)."""
    return first if ROLE_RANK.get(first, -1) >= ROLE_RANK.get(second, -1) else second


def capped(role: str, cap: str | None) -> str:
    """``role`` lowered to ``cap`` (an API token's role; None: no cap)."""
    if cap is None or ROLE_RANK.get(role, -1) <= ROLE_RANK.get(cap, -1):
        return role
    return cap


def role_in(holder: Holder, project: str | None) -> str:
    """The role ``holder`` acts with in ``project`` (None: globally). A token narrowed to a
    project acts nowhere else, and has no global role."""
    if holder.token_project is not None and project != holder.token_project:
        return NO_ROLE
    if project is None:
        return holder.role
    return higher(holder.role, dict(holder.project_roles).get(project, NO_ROLE))


def best_role(holder: Holder) -> str:
    """The highest role ``holder`` has anywhere: globally or in any project."""
    best = role_in(holder, holder.token_project)
    for project, role in holder.project_roles:
        if holder.token_project in (None, project):
            best = higher(best, role)
    return best


def acting_role(holder: Holder, action: str, project: str | None) -> str:
    """The role :func:`may` weighs for ``action`` in ``project``."""
    if action in PERSONAL:
        return best_role(holder)
    return role_in(holder, project if is_project_action(action) else None)


def may(holder: Holder, action: str, project: str | None = None) -> bool:
    """Whether ``holder`` may perform ``action`` on an object of ``project`` (None: no
    project, or a global action): from its global role or its role in that project, and
    for a token its scope."""
    return allowed(acting_role(holder, action, project), action, holder.scope)


def sees(holder: Holder, project: str) -> bool:
    """Whether ``project`` exists for ``holder``: it has a role there or globally."""
    return role_in(holder, project) in ROLE_RANK


def visible_projects(holder: Holder) -> frozenset[str] | None:
    """The projects ``holder`` sees; None: every project (a global role)."""
    if holder.token_project is not None:
        seen = sees(holder, holder.token_project)
        return frozenset({holder.token_project}) if seen else frozenset()
    if holder.role in ROLE_RANK:
        return None
    return frozenset(project for project, role in holder.project_roles if role in ROLE_RANK)


def opening_project(holder: Holder, kept: str | None) -> str:
    """The project a browser session acts in when its request names none: the one it
    chose last (``kept``) while it still sees it, else ``default`` when it sees it, else
    the first it sees by name (a member of one project lands in it)."""
    for name in (kept, DEFAULT_PROJECT):
        if name and sees(holder, name):
            return name
    names = visible_projects(holder)
    return min(names) if names else DEFAULT_PROJECT


def demand(holder: Holder, action: str, project: str | None = None) -> None:
    """Raise PermissionDenied unless :func:`may` allows ``action``; for an action on the
    objects of a project ``holder`` does not see, NotFound, as for a missing project (the
    API's 404, never 403: names cannot be probed)."""
    if project is not None and is_project_action(action) and not sees(holder, project):
        raise NotFound("project", project, field="project")
    role = acting_role(holder, action, project)
    # A role that is the same everywhere is named as before projects: "alice (viewer)".
    scoped = bool(holder.project_roles) or holder.token_project is not None
    named = scoped and project is not None and is_project_action(action)
    where = f" in project {project}" if named else ""
    if not allowed(role, action):
        raise PermissionDenied(
            f"{holder.name} ({role}{where}) may not {action_phrase(action)}; "
            f"it needs the {MATRIX[action]} role{where}"
        )
    authorize(holder.name, role, action, holder.scope)


def roles_of(grants: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Project roles as an actor carries them: sorted pairs (hashable, comparable)."""
    return tuple(sorted(grants.items()))
