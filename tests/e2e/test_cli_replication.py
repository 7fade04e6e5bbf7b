"""`fleetcron cluster replication setup|status` run as the installed console script, on two
real PostgreSQL 18 clusters (the replicated pair's fixture)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from e2e.conftest import Result, Zygote, assert_refused, describe, environment, succeeded
from fixtures.pg_pair import PgPair
from fleetcron.crypto import generate_key
from waiting import eventually

pytestmark = pytest.mark.postgres


def test_setup_and_status_from_the_command_line(
    pg_pair: PgPair, zygote: Zygote, tmp_path: Path
) -> None:
    machine_id = tmp_path / "machine-id"
    machine_id.write_text(secrets.token_hex(16) + "\n")
    env = environment(
        tmp_path,
        {
            "FLEETCRON_DATABASE_URL": pg_pair.left_url,
            "FLEETCRON_CLUSTER": "true",
            "FLEETCRON_TOPOLOGY": "replicated-pair",
            "FLEETCRON_ENDPOINT": "http://127.0.0.1:18080",
            "FLEETCRON_MACHINE_ID_FILE": str(machine_id),
            "FLEETCRON_MASTER_KEY": generate_key().decode(),
        },
    )

    def run(*args: str, **extra: str) -> Result:
        return zygote.run("cluster", "replication", *args, workdir=tmp_path, env={**env, **extra})

    before = run("status")
    assert before.returncode == 1, describe(before)
    assert "UNHEALTHY" in before.stdout and "no publication" in before.stdout

    # (from the environment: on the command line, a string that cannot be read to tell
    # whether it holds a password is warned about first)
    assert_refused(
        run("setup", FLEETCRON_REPLICATION_PEER_DATABASE_URL="not a url"),
        "peer_database_url",
        "not a database URL",
    )
    assert_refused(
        run(
            "setup", "--peer-database-url", pg_pair.right_url, FLEETCRON_TOPOLOGY="shared-database"
        ),
        "FLEETCRON_TOPOLOGY=replicated-pair",
        exit_code=1,  # a configuration error, as for every ConfigError
    )
    out = succeeded(run("setup", "--peer-database-url", pg_pair.right_url))
    assert "(copies the data)" in out and "ids odd here, even there" in out
    again = succeeded(run("setup", "--peer-database-url", pg_pair.right_url))
    assert "nothing to change" in again

    seen: list[Result] = []

    def healthy() -> bool:
        seen.append(run("status", "--json"))
        return seen[-1].returncode == 0

    eventually(healthy, 30, lambda: f"a healthy pair: {describe(seen[-1])}", interval=0.5)
    result = seen[-1]
    state = json.loads(result.stdout)
    assert result.returncode == 0 and state["healthy"], describe(result)
    assert state["sequences_ok"] and len(state["subscriptions"]) == len(state["slots"]) == 1
    table = succeeded(run("status"))
    assert "healthy" in table and "subscriptions (from the peer)" in table
