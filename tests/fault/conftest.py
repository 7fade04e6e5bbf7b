"""Fixtures every fault scenario shares: a lab of real scheduler processes on a migrated
PostgreSQL database, and a cuttable link to that server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Lab
from netfault import CuttableLink

from fixtures.postgres import PostgresServer
from fleetcron.crypto import generate_key


@pytest.fixture
def lab(migrated: str, tmp_path: Path) -> Iterator[Lab]:
    the_lab = Lab(migrated, tmp_path, master_key=generate_key().decode())
    yield the_lab
    the_lab.stop_all()


@pytest.fixture
def link(postgres_server: PostgresServer) -> Iterator[CuttableLink]:
    proxy = CuttableLink(postgres_server.host, postgres_server.port)
    yield proxy
    proxy.close()
