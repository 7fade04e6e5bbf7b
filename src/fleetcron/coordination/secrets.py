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

This module holds the mechanics only; creating and rotating a secret are authorized,
audited operator actions in :mod:`fleetcron.services.cluster.secrets`.
"""

from __future__ import annotations

import secrets

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.coordination.signing import accepted_secrets, key_id
from fleetcron.crypto import MasterKey
from fleetcron.errors import CoordinationError
from fleetcron.store.schema import ClusterSecret

__all__ = [
    "SECRET_BYTES",
    "add_secret",
    "current_and_accepted",
    "has_secret",
    "lock_secrets",
    "newest_key_id",
]

SECRET_BYTES = 32
"""Length of a new coordination secret (256 random bits)."""


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


def has_secret(session: Session) -> bool:
    """Whether the cluster has a coordination secret."""
    return bool(session.scalar(select(func.count(ClusterSecret.id))))


def newest_key_id(session: Session, master_key: MasterKey) -> str | None:
    """The key id of the secret that signs now; None when there is none."""
    newest = session.scalar(
        select(ClusterSecret)
        .order_by(ClusterSecret.created_at.desc(), ClusterSecret.id.desc())
        .limit(1)
    )
    return key_id(master_key.decrypt(newest.secret_enc).reveal()) if newest else None


def lock_secrets(session: Session) -> None:
    """Serialize writers of the secrets table (reads go on)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE cluster_secrets IN SHARE ROW EXCLUSIVE MODE"))
    # SQLite: the transaction already holds the single writer lock (BEGIN IMMEDIATE).


def add_secret(session: Session, app: App, actor: Actor) -> str:
    """Add a new random secret (it signs from now on); returns its key id."""
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
