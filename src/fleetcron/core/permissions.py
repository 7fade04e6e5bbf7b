"""Who may do what: the permission matrix, in one place.

Roles are ordered: ``viewer`` < ``operator`` < ``admin``; each action names the least
role allowed to perform it. The CLI, the API and the web pages all ask :func:`authorize`.

An API token also has a scope, ordered ``read`` < ``run`` < ``write``; each action names
the least scope it needs (:data:`SCOPE_NEEDED`). A scope only narrows: a token may do what
its owner's role allows *and* its scope allows. Sessions and the CLI act with ``write``.
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
}


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
