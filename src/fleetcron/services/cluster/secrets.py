"""Creating and rotating the cluster's coordination secret: authorized, audited actions.

The secret itself (storage, encryption at rest, which secrets are accepted) is kept by
:mod:`fleetcron.coordination.secrets`. The audit log names a secret by its key id only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from fleetcron.app import Actor, App
from fleetcron.coordination.secrets import add_secret, has_secret, lock_secrets, newest_key_id
from fleetcron.coordination.signing import ROTATION_GRACE
from fleetcron.errors import FleetcronError
from fleetcron.services.audit import AuditNote, audited, record, record_failure

__all__ = ["SecretRotation", "ensure_secret", "rotate_secret"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SecretRotation:
    """What a rotation did, by key id only."""

    key_id: str
    """The key id of the new secret, which signs from now on."""
    previous_key_id: str | None
    """The key id of the secret it replaced, or None if there was none."""
    previous_accepted_until: datetime | None
    """Until when messages signed with the previous secret are still accepted."""


def ensure_secret(app: App, actor: Actor) -> bool:
    """Create the cluster's first coordination secret unless one exists; True if created.

    Needs ``cluster.manage`` (the system actor has it); audited as
    ``cluster.create_secret`` when it creates one. Two nodes calling this at once create
    one secret between them.
    """
    note = AuditNote("cluster.create_secret")
    try:
        actor.authorize("cluster.manage")
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    # The common case (a secret exists) should not take the table lock on every call.
    with app.db.read() as session:
        if has_secret(session):
            return False
    with app.db.session() as session:
        lock_secrets(session)
        # Checked again under the lock: another node may have created it meanwhile.
        if has_secret(session):
            return False
        note.detail["key_id"] = add_secret(session, app, actor)
        record(session, app, actor, note, success=True)
    log.info(
        "cluster: coordination secret %s created by %s",
        note.detail["key_id"],
        actor.name,
        extra={"action": "cluster.create_secret"},
    )
    return True


def rotate_secret(app: App, actor: Actor) -> SecretRotation:
    """Add a new coordination secret; the previous one stays accepted for 24 hours.

    Admin only (``cluster.manage``); audited as ``cluster.rotate_secret`` with the key ids.
    Rotate after replacing or retiring a node. Raises
    :class:`~fleetcron.errors.PermissionDenied` for another role.
    """
    note = AuditNote("cluster.rotate_secret")
    with audited(app, actor, note) as session:
        actor.authorize("cluster.manage")
        lock_secrets(session)
        previous_id = newest_key_id(session, app.master_key)
        new_id = add_secret(session, app, actor)
        until = app.now() + ROTATION_GRACE if previous_id is not None else None
        note.detail.update(
            {
                "key_id": new_id,
                "previous_key_id": previous_id,
                "previous_accepted_until": until.isoformat() if until else None,
            }
        )
    log.info(
        "cluster: coordination secret rotated from %s to %s by %s",
        previous_id,
        new_id,
        actor.name,
        extra={"action": "cluster.rotate_secret"},
    )
    return SecretRotation(new_id, previous_id, until)
