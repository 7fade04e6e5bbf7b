"""This process's view of itself in a cluster: its node identity (machine id, the
database system, hostname, version and endpoint, :mod:`fleetcron.coordination.identity`)
and the ownership guard it runs under (:class:`~fleetcron.coordination.guard.CoordinatedGuard`).
Used by the registry, the lease, replication and the composition root."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from sqlalchemy import text

from fleetcron import __version__
from fleetcron.app import App
from fleetcron.coordination.guard import CoordinatedGuard
from fleetcron.coordination.identity import NodeIdentity, node_identity, read_machine_id
from fleetcron.core.topology import Topology
from fleetcron.errors import CoordinationError


@dataclass(frozen=True)
class GuardPolicy:
    """How strictly a node's ownership guard checks its run writes.

    Every node in production runs under :data:`GUARDED`; no setting, environment variable
    or config key reaches this. The fault tests' negative controls compose a weaker policy
    into their own scheduler process (``tests/fault/node_process.py``) to show that their
    checkers catch the duplicate runs the guard and the claim wait prevent."""

    #: Off: every write is allowed, as if this node were always the owner.
    guarded: bool = True
    #: Off: a new owner starts without waiting for the previous owners' claims.
    wait_for_old_claims: bool = True
    #: Off: with the members placement, a shard is handed over at once, without waiting
    #: for its runs to end (:mod:`fleetcron.coordination.shard_moves`).
    drain_before_move: bool = True


GUARDED = GuardPolicy()


@dataclass
class Node:
    """This process's view of itself in the cluster."""

    app: App
    policy: GuardPolicy = GUARDED

    @cached_property
    def identity(self) -> NodeIdentity:
        settings = self.app.settings
        if not settings.endpoint:
            raise CoordinationError("this node has no FLEETCRON_ENDPOINT")
        with self.app.db.read() as session:
            system_id = str(
                session.scalar(text("SELECT system_identifier FROM pg_control_system()"))
            )
        return node_identity(
            read_machine_id(settings.machine_id_file),
            system_id,
            socket.gethostname(),
            __version__,
            settings.endpoint,
        )

    def guard(self, *, lease_holds: Callable[[], bool] | None = None) -> CoordinatedGuard:
        return CoordinatedGuard(
            self.identity.node_id,
            self.identity.fingerprint,
            unguarded=not self.policy.guarded,
            wait_for_old_claims=self.policy.wait_for_old_claims,
            lease_holds=lease_holds,
            replicated_pair=self.app.settings.topology is Topology.REPLICATED_PAIR,
            shared=self.app.settings.shard_placement == "members",
        )
