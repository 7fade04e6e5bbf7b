"""Cluster nodes sharing one real PostgreSQL, each with its own machine id and endpoint."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr

from fixtures.app import FakeClock, make_settings
from fixtures.postgres import PostgresServer
from fleetcron.coordination.identity import NodeIdentity
from fleetcron.crypto import generate_key
from fleetcron.services import cluster
from fleetcron.services.cluster import Node
from fleetcron.services.context import SYSTEM, App


@dataclass
class ClusterNode:
    app: App
    node: Node

    @property
    def identity(self) -> NodeIdentity:
        return self.node.identity

    @property
    def node_id(self) -> str:
        return self.node.identity.node_id


@pytest.fixture
def master_key() -> str:
    return generate_key().decode()


@pytest.fixture
def make_node(
    migrated: str, tmp_path: Path, clock: FakeClock, master_key: str
) -> Iterator[Callable[[str], ClusterNode]]:
    """Start a node (announced as a candidate) named ``name`` on the shared database."""
    opened: list[App] = []

    def make(name: str) -> ClusterNode:
        machine_id = tmp_path / f"{name}.machine-id"
        if not machine_id.exists():
            machine_id.write_text(secrets.token_hex(16) + "\n")
        settings = make_settings(
            tmp_path / name,
            migrated,
            cluster=True,
            endpoint=f"http://{name}.example:8080",
            machine_id_file=machine_id,
            master_key=SecretStr(master_key),
        )
        app = App.open(settings, clock=clock)
        opened.append(app)
        node = Node(app)
        cluster.announce(app, node)
        return ClusterNode(app, node)

    yield make
    for app in opened:
        app.close()


@pytest.fixture
def migrated(postgres_server: PostgresServer, postgres_template: str) -> Iterator[str]:
    """A fresh database copied from the migrated, seeded template."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name, template=postgres_template)
    yield url
    postgres_server.drop_database(name)


def approve(node: ClusterNode) -> None:
    cluster.approve(node.app, SYSTEM, node.identity)
