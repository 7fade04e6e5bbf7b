"""Fixtures every fault scenario shares: a lab of real scheduler processes on a migrated
PostgreSQL database, and a cuttable link to that server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Lab, namespaced_sshd
from netfault import CuttableLink
from node_forks import NodeForks

from fixtures.postgres import PostgresServer
from fixtures.sshd import ClientKey, SshServer
from fleetcron.crypto import generate_key


@pytest.fixture(scope="session")
def node_forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeForks]:
    """This pytest process's node fork server (node_forks.py)."""
    forks = NodeForks(tmp_path_factory.mktemp("node-forks") / "server.log")
    yield forks
    forks.close()


@pytest.fixture
def lab(migrated: str, tmp_path: Path, node_forks: NodeForks) -> Iterator[Lab]:
    the_lab = Lab(migrated, tmp_path, master_key=generate_key().decode(), forks=node_forks)
    yield the_lab
    the_lab.stop_all()


@pytest.fixture
def link(postgres_server: PostgresServer) -> Iterator[CuttableLink]:
    proxy = CuttableLink(postgres_server.host, postgres_server.port)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def isolated_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    """A real sshd in a PID namespace of its own: the commands it runs are told apart from
    every other process here (:func:`harness.namespace_resolver`)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    with namespaced_sshd(tmp_path_factory.mktemp("cleanup-sshd"), sshd_client_key) as server:
        yield server
