"""How many worker processes ``fleetcron scheduler`` starts when ``--workers`` is left
unset: one per core on a cluster sharing PostgreSQL, at most the shard count; one where
there is nothing to split."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from fixtures.cluster import MakeNode
from fleetcron.app import App
from fleetcron.core.topology import Topology
from fleetcron.services.cluster.workers import default_count, usable_cores

pytestmark = pytest.mark.postgres


def test_a_postgresql_cluster_runs_one_worker_per_core_up_to_its_shard_count(
    make_node: MakeNode,
) -> None:
    app = make_node("alpha", shards=4).app
    assert default_count(app, 2) == 2
    assert default_count(app, 1) == 1
    assert default_count(app, 16) == 4  # never more workers than shards


def test_a_replicated_pair_or_a_node_outside_a_cluster_runs_one(make_node: MakeNode) -> None:
    app = make_node("alpha", shards=4).app
    pair = replace(
        app, settings=app.settings.model_copy(update={"topology": Topology.REPLICATED_PAIR})
    )
    alone = replace(app, settings=app.settings.model_copy(update={"cluster": False}))
    assert default_count(pair, 8) == 1
    assert default_count(alone, 8) == 1


def test_a_standalone_installation_runs_one(app: App) -> None:
    """SQLite, or PostgreSQL without ``FLEETCRON_CLUSTER``: one scheduler process."""
    assert not app.settings.cluster
    assert default_count(app, 8) == 1


def test_the_cores_are_those_this_process_may_use() -> None:
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)
