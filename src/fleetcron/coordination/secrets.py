"""The cluster's coordination secret, kept in the shared database and encrypted at rest.

Every node of a cluster reads the same ``cluster_secrets`` table and holds the same master
key, so a secret created or rotated on one node is in use on all of them at once. The
newest row signs; after a rotation the one before it is still accepted for
:data:`~fleetcron.coordination.signing.ROTATION_GRACE` (24 h) counted from the newest row's
``created_at``, so that a message signed just before the rotation is not refused.

Secrets leave this module only as the plain bytes :mod:`~fleetcron.coordination.signing`
needs. They are never logged, audited or returned by an API; the audit log and messages
name a secret by its key id (the first 8 hex characters of its SHA-256), which is sent in
every envelope anyway.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.coordination.signing import ROTATION_GRACE, accepted_secrets, key_id
from fleetcron.errors import CoordinationError, FleetcronError
from fleetcron.services.audit import AuditNote, audited, record, record_failure
from fleetcron.store.schema import ClusterSecret

__all__ = [
    "SECRET_BYTES",
    "SecretRotation",
    "current_and_accepted",
    "ensure_secret",
    "rotate_secret",
]

log = logging.getLogger(__name__)

SECRET_BYTES = 32
"""Length of a new coordination secret (256 random bits)."""


@dataclass(frozen=True)
class SecretRotation:
    """What a rotation did, by key id only."""

    key_id: str
    """The key id of the new secret, which signs from now on."""
    previous_key_id: str | None
    """The key id of the secret it replaced, or None if there was none."""
    previous_accepted_until: datetime | None
    """Until when messages signed with the previous secret are still accepted."""


def current_and_accepted(app: App) -> tuple[bytes, list[bytes]]:
    """The secret to sign with and the secrets to accept at ``app.now()``, current first.

    Raises :class:`CoordinationError` when the cluster has no coordination secret yet, and
    :class:`~fleetcron.errors.SecretError` when this node's master key cannot decrypt it.
    """
    with app.db.read() as session:
        rows = session.scalars(
            select(ClusterSecret)
            .order_by(ClusterSecret.created_at.desc(), ClusterSecret.id.desc())
            .limit(2)
        ).all()
    if not rows:
        raise CoordinationError(
            "the cluster has no coordination secret yet; approving a node creates it"
        )
    newest = rows[0]
    current = app.master_key.decrypt(newest.secret_enc).reveal()
    previous = app.master_key.decrypt(rows[1].secret_enc).reveal() if len(rows) > 1 else None
    return current, accepted_secrets(current, previous, newest.created_at, app.now())


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
        if session.scalar(select(func.count(ClusterSecret.id))):
            return False
    with app.db.session() as session:
        _lock_secrets(session)
        # Checked again under the lock: another node may have created it meanwhile.
        if session.scalar(select(func.count(ClusterSecret.id))):
            return False
        note.detail["key_id"] = _add_secret(session, app, actor)
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
        _lock_secrets(session)
        newest = session.scalar(
            select(ClusterSecret)
            .order_by(ClusterSecret.created_at.desc(), ClusterSecret.id.desc())
            .limit(1)
        )
        previous_id = key_id(app.master_key.decrypt(newest.secret_enc).reveal()) if newest else None
        new_id = _add_secret(session, app, actor)
        until = app.now() + ROTATION_GRACE if newest else None
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


def _lock_secrets(session: Session) -> None:
    """Serialize writers of the secrets table (reads go on)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE cluster_secrets IN SHARE ROW EXCLUSIVE MODE"))
    # SQLite: the transaction already holds the single writer lock (BEGIN IMMEDIATE).


def _add_secret(session: Session, app: App, actor: Actor) -> str:
    secret = secrets.token_bytes(SECRET_BYTES)
    session.add(
        ClusterSecret(
            secret_enc=app.master_key.encrypt(secret),
            created_at=app.now(),
            created_by=actor.name,
        )
    )
    session.flush()
    return key_id(secret)
