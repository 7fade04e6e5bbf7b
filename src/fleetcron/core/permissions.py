"""Who may do what: the permission matrix, in one place.

Roles are ordered: ``viewer`` < ``operator`` < ``admin``; each action names the least
role allowed to perform it. The CLI, the API and the web pages all ask :func:`authorize`.
"""

from __future__ import annotations

from fleetcron.errors import PermissionDenied

ROLE_RANK = {"viewer": 0, "operator": 1, "admin": 2}

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
}


#: How a refusal names an action where "VERB NOUNs" (``user.add``: "add users") does not
#: read well.
PHRASES: dict[str, str] = {
    "target.repin": "re-pin targets' host keys",
    "target.local": "add or edit local targets",
    "audit.read": "read the audit log",
    "token.manage_own": "manage their own API tokens",
    "token.manage_any": "manage other users' API tokens",
    "account.manage_own": "manage their own account",
    "cluster.read": "read the cluster's state",
    "cluster.manage": "manage the cluster",
    "settings.manage": "manage the settings",
}


def action_phrase(action: str) -> str:
    """``action`` as words for a refusal: ``user.add`` -> "add users"."""
    if action in PHRASES:
        return PHRASES[action]
    noun, _, verb = action.partition(".")
    return f"{verb} {noun}s"


def allowed(role: str, action: str) -> bool:
    least = MATRIX[action]
    return ROLE_RANK.get(role, -1) >= ROLE_RANK[least]


def authorize(actor_name: str, role: str, action: str) -> None:
    """Raise PermissionDenied unless ``role`` may perform ``action``."""
    if not allowed(role, action):
        raise PermissionDenied(
            f"{actor_name} ({role}) may not {action_phrase(action)}; "
            f"it needs the {MATRIX[action]} role"
        )
