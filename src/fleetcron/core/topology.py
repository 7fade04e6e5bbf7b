"""How the nodes of a cluster share their data: :class:`Topology`, the ``topology``
setting (``FLEETCRON_TOPOLOGY``)."""

from __future__ import annotations

from enum import StrEnum


class Topology(StrEnum):
    """The value is what the setting is written as."""

    #: Every node on one PostgreSQL database (the default; also a standalone installation's).
    SHARED_DATABASE = "shared-database"
    #: Two nodes, each on its own PostgreSQL 16+, kept in sync by logical replication.
    REPLICATED_PAIR = "replicated-pair"
