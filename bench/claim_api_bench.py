"""What it costs a manager to answer a running command's question about its claim over the
API (``GET /api/v1/claims/<fencing token>``), on a real PostgreSQL.

One cluster node (owner, generation 1) claims a run; then the question is asked ``N``
times, in this process:

* through the service (:func:`fleetcron.services.cluster.claims.claim_status`): the HMAC
  check of the run's secret and one read transaction (the claim, the generation, the
  database clock);
* through the web application's route, over ASGI in process (FastAPI's routing, the
  dependency, the JSON answer; no network, no server loop);
* the refusal of a wrong secret, through the route: the HMAC only, the database untouched.

Reported per question, the median of 10 rounds in which the cases take turns: CPU time
(user + sys) of this process (for the route: the in-process client's share included),
CPU time of the PostgreSQL server's processes (read from /proc), and wall time, on this
machine (the wall time of a shared machine says little).

Run by hand: ``.venv/bin/python bench/claim_api_bench.py [N]``.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from _common import (
    loadavg,
    make_app,
    median,
    own_cpu,
    running_postgres,
    server_cpu,
    table,
    work_dir,
)
from fixtures.app import FakeClock
from fleetcron.app import SYSTEM, App

ENDPOINT = "http://bench.example:8080"
ROUNDS = 10


def claimed_run(app: App, clock: FakeClock) -> dict[str, str]:
    """Make ``app``'s node the owner, claim one run on a local target: its environment."""
    from fleetcron.coordination.node import Node
    from fleetcron.core.targets import TargetKind, TargetSpec
    from fleetcron.scheduler.run_request import ClaimAsking, run_environment
    from fleetcron.services.cluster import status as cluster
    from fleetcron.services.cluster.claims import secrets_key
    from fleetcron.services.jobs import edit as jobs
    from fleetcron.services.jobs.edit import JobSpec
    from fleetcron.services.targets import edit as target_edit
    from fleetcron.store.runs import RunStore

    node = Node(app)
    cluster.announce(app, node)
    cluster.approve(app, SYSTEM, node.identity)
    target_edit.add_target(app, SYSTEM, TargetSpec("busy", TargetKind.LOCAL))
    jobs.add_job(app, SYSTEM, "tick", JobSpec("* * * * *", "true"), bulk=True)
    cluster.request_transfer(app, SYSTEM, node.identity.node_id)
    store = RunStore(app.db, node=node.identity.node_id, guard=node.guard())
    dispatches = store.claim_due(clock.advance(seconds=31)).dispatches
    assert len(dispatches) == 1, dispatches
    return run_environment(dispatches[0], "bench", ClaimAsking(secrets_key(app), ENDPOINT))


def measure(n: int, postmaster: int, ask: Callable[[], None]) -> tuple[float, float, float]:
    """CPU of this process, CPU of the server and wall time per question, over ``n``."""
    cpu0, db0, wall0 = own_cpu(), server_cpu(postmaster), time.perf_counter()
    for _ in range(n):
        ask()
    cpu, db, wall = own_cpu() - cpu0, server_cpu(postmaster) - db0, time.perf_counter() - wall0
    return cpu / n, db / n, wall / n


def rounds(
    n: int, postmaster: int, cases: dict[str, Callable[[], None]], count: int = ROUNDS
) -> dict[str, list[tuple[float, float, float]]]:
    """Each case ``n`` times per round, the cases interleaved (one load for all), after a
    warm-up call each (the pool's connection, the route's first call)."""
    for ask in cases.values():
        ask()
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
    for _ in range(count):
        for name, ask in cases.items():
            seen[name].append(measure(n // count, postmaster, ask))
    return seen


def route_asker(app: App, path: str, secret: str, expected: int) -> Callable[[], None]:
    import httpx

    from fleetcron.web.api.claims import SECRET_HEADER
    from fleetcron.web.app import create_app

    transport = httpx.ASGITransport(app=create_app(app))
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=transport, base_url="http://bench")

    def ask() -> None:
        response = loop.run_until_complete(client.get(path, headers={SECRET_HEADER: secret}))
        assert response.status_code == expected, response.text

    return ask


def main() -> None:
    from urllib.parse import urlsplit

    from fleetcron.services.cluster.claims import claim_status

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with running_postgres() as server:
        if server is None:
            print("PostgreSQL binaries not found")
            return
        url = server.create_database("bench")  # type: ignore[attr-defined]
        directory = work_dir("claim-api-")
        clock = FakeClock(datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC))
        machine_id = directory / "machine-id"
        machine_id.write_text(secrets.token_hex(16) + "\n")
        app = make_app(
            url,
            directory,
            clock,
            cluster=True,
            endpoint=ENDPOINT,
            machine_id_file=machine_id,
        )
        env = claimed_run(app, clock)
        token, secret = env["FLEETCRON_FENCING_TOKEN"], env["FLEETCRON_CLAIM_SECRET"]
        path = urlsplit(env["FLEETCRON_CLAIM_URL"]).path
        postmaster = int(
            (server.data_dir / "postmaster.pid").read_text().split()[0]  # type: ignore[attr-defined]
        )

        def service() -> None:
            assert claim_status(app, token, secret).live

        cases: dict[str, Callable[[], None]] = {
            "service: secret checked, one read transaction": service,
            "route over ASGI, live (200)": route_asker(app, path, secret, 200),
            "route over ASGI, wrong secret (401, no database)": route_asker(
                app, path, "0" * 64, 401
            ),
        }
        rows: list[list[Any]] = []
        for name, per_round in rounds(n, postmaster, cases).items():
            cpu, db, wall = (median([r[i] for r in per_round]) for i in range(3))
            rows.append([name, f"{cpu * 1e3:.2f} ms", f"{db * 1e3:.2f} ms", f"{wall * 1e3:.2f} ms"])
        print(f"{n} questions each, {ROUNDS} rounds (median); load average {loadavg()}")
        print(table(["question", "CPU (fleetcron)", "CPU (PostgreSQL)", "wall"], rows))
        app.close()


if __name__ == "__main__":
    main()
