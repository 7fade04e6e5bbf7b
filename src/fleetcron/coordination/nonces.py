"""A :class:`~fleetcron.coordination.signing.NonceStore` in the shared database.

Every node of a cluster writes the nonces of the messages it accepts to ``cluster_nonces``,
so a message accepted by one node is refused by all of them: the table's primary key, not
a read before the write, decides that a nonce is new.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta

from sqlalchemy import delete

from fleetcron.app import App
from fleetcron.coordination.signing import DEFAULT_WINDOW
from fleetcron.errors import Conflict, InvalidInput
from fleetcron.store.schema import SeenNonce

__all__ = ["DbNonceStore"]

log = logging.getLogger(__name__)


class DbNonceStore:
    """Nonces in the ``cluster_nonces`` table, one short transaction per message.

    Rows are kept for ``2 * window`` after the message's timestamp (twice what
    :func:`~fleetcron.coordination.signing.verify` needs, so that nodes whose clocks differ
    a little still agree). Older rows are deleted at most once per ``window`` per store,
    during a call to :meth:`remember`. Raises :class:`~fleetcron.errors.StoreError` when
    the database cannot be reached: the message is then refused, never accepted.
    """

    def __init__(self, app: App, window: timedelta = DEFAULT_WINDOW) -> None:
        if window <= timedelta(0):
            raise InvalidInput(
                "window: must be positive", field="window", value=window, allowed="> 0"
            )
        self.app = app
        self.window = window
        self.retention = 2 * window
        self._next_prune: datetime | None = None

    def remember(self, nonce: str, ts: datetime, now: datetime) -> bool:
        """Record ``nonce`` of a message stamped ``ts``; False if any node already had it."""
        if self._next_prune is None or now >= self._next_prune:
            self._next_prune = now + self.window
            self.prune(now)
        try:
            with self.app.db.session() as session:
                session.add(SeenNonce(nonce=_key(nonce), seen_at=ts))
        except Conflict:
            return False
        return True

    def prune(self, now: datetime) -> int:
        """Delete the nonces of messages stamped more than ``2 * window`` before ``now``."""
        with self.app.db.session() as session:
            result = session.execute(
                delete(SeenNonce).where(SeenNonce.seen_at < now - self.retention)
            )
            deleted = int(getattr(result, "rowcount", 0) or 0)
        if deleted:
            log.debug(
                "cluster: pruned %d old nonce(s)", deleted, extra={"action": "cluster.nonces"}
            )
        return deleted


def _key(nonce: str) -> str:
    # Nonces may be up to 128 characters and the column holds 64: store their SHA-256.
    return hashlib.sha256(nonce.encode("utf-8")).hexdigest()
