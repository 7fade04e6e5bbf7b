"""`fleetcron cluster shard move|unpin` run as the installed console script against a
members cluster on a real PostgreSQL (two approved nodes, 8 shards): what it cannot do is
refused with exit 2 naming the field, what it does is shown by `cluster shards` and found
in `audit list`. The moves a pin makes are tests/integration/cluster/test_shard_pins.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.conftest import Result, Zygote, assert_refused, succeeded
from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.app import SYSTEM
from fleetcron.services.accounts.users import add_user

pytestmark = pytest.mark.postgres

SHARDS = 8
MEMBERS = {"shard_placement": "members", "lease_s": 30.0, "lease_renew_s": 5.0}


def cluster_env(node: ClusterNode) -> dict[str, str]:
    """The environment of an operator on ``node``: its database, key and machine id, a
    members cluster."""
    settings = node.app.settings
    assert settings.master_key is not None
    return {
        "FLEETCRON_DATABASE_URL": settings.effective_database_url,
        "FLEETCRON_MASTER_KEY": settings.master_key.get_secret_value(),
        "FLEETCRON_MACHINE_ID_FILE": str(settings.machine_id_file),
        "FLEETCRON_ENDPOINT": str(settings.endpoint),
        "FLEETCRON_CLUSTER": "true",
        "FLEETCRON_SHARD_PLACEMENT": "members",
        "FLEETCRON_LEASE_S": "30",
        "FLEETCRON_LEASE_RENEW_S": "5",
    }


def test_shard_move_and_unpin_from_the_console_script(
    make_node: MakeNode, zygote: Zygote, tmp_path: Path
) -> None:
    alpha, beta = (make_node(n, shards=SHARDS, **MEMBERS) for n in ("alpha", "beta"))
    approve(alpha)
    approve(beta)
    candidate = make_node("gamma", shards=SHARDS, **MEMBERS)
    add_user(alpha.app, SYSTEM, "ops", "ops-password-1234", "admin")
    env = cluster_env(alpha)

    def run(*args: str, **extra: str) -> Result:
        return zygote.run(*args, workdir=tmp_path, env={**env, **extra})

    move = ("cluster", "shard", "move")
    assert_refused(run(*move, "8", "--to", beta.node_id), "shard: 8", "(0 to 7)")
    assert_refused(run(*move, "2", "--to", "nosuchnode"), "to: no node 'nosuchnode'")
    assert_refused(run(*move, "2", "--to", candidate.node_id), "to: node", "is candidate")
    assert_refused(
        run(*move, "2", "--to", beta.node_id, FLEETCRON_SHARD_PLACEMENT="owner"),
        "shard_placement:",
        "FLEETCRON_SHARD_PLACEMENT=members",
    )
    assert_refused(run("cluster", "shard", "unpin", "8"), "shard: 8")

    out = succeeded(run(*move, "2", "--to", beta.node_id))
    assert f"shard 2 pinned to {beta.node_id}" in out
    shards = json.loads(succeeded(run("cluster", "shards", "--json")))["shards"]
    assert [s["shard"] for s in shards if s["pinned_to"] == beta.node_id] == [2]
    # beta's scheduler is not running: the pin is kept, and ignored until it is.
    assert "not a live member" in shards[2]["pin_ignored"]
    assert "(ignored: the node is not a live member" in succeeded(run("cluster", "shards"))
    unpinned = json.loads(succeeded(run("cluster", "shard", "unpin", "2", "--json")))
    assert (unpinned["node"], unpinned["changed"]) == (None, True)

    events = json.loads(succeeded(run("audit", "list", "--action", "shard.", "--json")))
    seen = [(e["action"], e["success"], e["detail"].get("shard")) for e in reversed(events)]
    assert seen == [
        ("shard.pin", False, 8),
        ("shard.pin", False, 2),
        ("shard.pin", False, 2),
        ("shard.pin", False, 2),
        ("shard.unpin", False, 8),
        ("shard.pin", True, 2),
        ("shard.unpin", True, 2),
    ]
    assert events[1]["detail"]["node"] == beta.node_id
