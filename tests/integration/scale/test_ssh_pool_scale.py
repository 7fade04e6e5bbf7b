"""The SSH executor's pool and connect retries at fleet scale, against the fleet simulator
(bench/fleet_sim.py): least-recently-used eviction, expiry on a timer, handshakes dropped
at a MaxStartups-like limit retried within the run's budget and counted, and a run that
ends ``connect_error`` only once its budget is spent.

Correctness only, no timing. The negative controls show that the same burst does drop
handshakes (without retries runs fail) and that eviction order is observable.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import pytest

from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from fleetcron.metrics import Metrics, SshPoolReading
from waiting import eventually_async

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from fleet_sim import FleetSim, SimTarget

pytestmark = [pytest.mark.slow]


def ssh_target(t: SimTarget) -> SshTarget:
    return SshTarget(t.name, t.host, t.port, t.user, t.client_key, t.host_key)


async def test_a_full_pool_closes_the_least_recently_used_idle_connection(
    tmp_path: Path,
) -> None:
    with FleetSim(3, work_dir=tmp_path) as sim:
        a, b, c = (ssh_target(t) for t in sim.targets)
        executor = SshExecutor(max_concurrency=1, max_connections=2)
        opened: list[int] = []
        try:
            # a, b open; a is used again (b is now the least recently used); c evicts b.
            for target in (a, b, a, c, a, b):
                result = await executor.run(target, ExecRequest("true"))
                assert result.status == "succeeded", result.error
                assert executor.pooled_connections <= 2
                opened.append(executor.connections_opened)
        finally:
            await executor.close()
        # a reused after c came in (a was not evicted); b reopened (it was).
        assert opened == [1, 2, 2, 3, 3, 4]
        assert sim.stats()["connections"] == 4


async def test_idle_connections_expire_on_a_timer_without_another_run(tmp_path: Path) -> None:
    with FleetSim(2, work_dir=tmp_path) as sim:
        executor = SshExecutor(idle_timeout_s=0.2)
        try:
            for t in sim.targets:
                assert (await executor.run(ssh_target(t), ExecRequest("true"))).status == (
                    "succeeded"
                )
            assert executor.pooled_connections == 2
            await eventually_async(
                lambda: executor.pooled_connections == 0,
                5,
                "the idle connections to expire",
                interval=0.1,
            )
            assert executor.pooled_connections == 0
        finally:
            await executor.close()
        sim.wait_idle(timeout_s=10)


BURST = 40


async def _burst(executor: SshExecutor, sim: FleetSim, request: ExecRequest) -> list[str]:
    try:
        results = await asyncio.gather(*(executor.run(ssh_target(t), request) for t in sim.targets))
    finally:
        await executor.close()
    return [r.status if r.status == "succeeded" else f"{r.status}: {r.error}" for r in results]


async def test_handshakes_dropped_at_max_startups_are_retried_until_every_run_succeeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fleetcron.executors.ssh")
    with FleetSim(BURST, rtt_ms=20, max_startups=3, work_dir=tmp_path) as sim:
        executor = SshExecutor(
            max_concurrency=BURST,
            max_connecting=BURST,
            connect_backoff_s=0.05,
            connect_backoff_max_s=0.4,
        )
        statuses = await _burst(executor, sim, ExecRequest("sleep 0.2", timeout_s=120))
        stats = sim.stats()
    assert statuses == ["succeeded"] * BURST
    assert executor.connections_opened == BURST
    # The limit did bite, every refusal was retried, and each retry was counted.
    assert stats["refused_startups"] > 0
    logged = [r for r in caplog.records if getattr(r, "action", "") == "ssh.connect_retry"]
    assert executor.connect_retries == len(logged) == stats["refused_startups"]
    # The counter is what /metrics exports.
    metrics = Metrics()
    metrics.watch_ssh_pool(
        lambda: SshPoolReading(executor.connections_opened, executor.connect_retries, 0)
    )
    text = metrics.exposition().decode()
    assert f"fleetcron_ssh_connect_retries_total {float(executor.connect_retries)}" in text
    assert f"fleetcron_ssh_connections_opened_total {float(BURST)}" in text


async def test_negative_control_without_retries_the_same_burst_loses_runs(tmp_path: Path) -> None:
    with FleetSim(BURST, rtt_ms=20, max_startups=3, work_dir=tmp_path) as sim:
        executor = SshExecutor(max_concurrency=BURST, max_connecting=BURST, connect_attempts=1)
        statuses = await _burst(executor, sim, ExecRequest("sleep 0.2", timeout_s=120))
    lost = [s for s in statuses if s != "succeeded"]
    assert lost, "the simulator refused nothing: the burst does not exercise the retries"
    assert all("dropped during the handshake 1 times" in s for s in lost), lost
    assert executor.connect_retries == 0


#: The longest wait between two handshakes in the test of the budget.
BACKOFF_MAX_S = 0.2


async def test_a_run_ends_connect_error_only_when_its_budget_is_spent(tmp_path: Path) -> None:
    """A target whose sshd refuses every handshake: the executor keeps retrying until the
    run's watchdog budget would pass, then records connect_error naming the reason."""
    with FleetSim(1, max_startups=0, work_dir=tmp_path) as sim:
        executor = SshExecutor(connect_backoff_s=0.05, connect_backoff_max_s=BACKOFF_MAX_S)
        budget = 1.5
        request = ExecRequest("true", timeout_s=1, watchdog_s=budget)
        called = time.monotonic()
        try:
            result = await executor.run(ssh_target(sim.targets[0]), request)
        finally:
            took = time.monotonic() - called
            await executor.close()
        refused = sim.stats()["refused_startups"]
    assert result.status == "connect_error"
    # The budget ended it, not a fixed number of attempts (four, of old).
    assert "the run's time budget is spent" in (result.error or ""), result.error
    # It kept trying until the budget less one backoff was gone: a lower bound, which a
    # loaded machine (slower handshakes, fewer of them) only makes longer.
    assert took >= budget - BACKOFF_MAX_S, took
    # Every attempt but the last was a counted retry.
    assert executor.connect_retries >= 1
    assert refused == executor.connect_retries + 1
