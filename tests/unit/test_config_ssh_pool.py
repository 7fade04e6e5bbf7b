"""The SSH pool settings: sized for the fleet by default, handed to the executor the
scheduler builds, and refused (naming the variables) when they contradict each other."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from fleetcron.config import load_settings
from fleetcron.errors import ConfigError
from fleetcron.executors.base import utc_now
from fleetcron.executors.kinds import SshKind, standard_executors
from fleetcron.executors.ssh import FD_HEADROOM


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("FLEETCRON_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(tmp_path / "data"))


def test_the_pool_holds_a_5000_target_fleet_by_default() -> None:
    settings = load_settings()
    assert settings.ssh_max_connections >= 5000
    assert settings.ssh_max_connecting >= 32


def test_the_scheduler_builds_its_ssh_executor_from_the_pool_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_SSH_MAX_CONNECTIONS", "1234")
    monkeypatch.setenv("FLEETCRON_SSH_MAX_CONNECTING", "48")
    monkeypatch.setenv("FLEETCRON_SSH_CONNECT_BACKOFF_S", "0.5")
    monkeypatch.setenv("FLEETCRON_SSH_CONNECT_BACKOFF_MAX_S", "7")
    monkeypatch.setenv("FLEETCRON_SSH_IDLE_TIMEOUT_S", "90")
    monkeypatch.setenv("FLEETCRON_SSH_KEEPALIVE_S", "120")
    ssh = standard_executors(load_settings(), utc_now, lambda b: b)["ssh"]
    assert isinstance(ssh, SshKind)
    executor = ssh.executor
    assert executor.pool.max_connections == 1234
    assert executor.pool.connecting._value == 48
    assert (executor.pool.connect_backoff_s, executor.pool.connect_backoff_max_s) == (0.5, 7.0)
    assert executor.pool.idle_timeout_s == 90.0
    assert executor.pool.keepalive_s == executor.pool.jumps.keepalive_s == 120.0
    assert executor.pool.connect_attempts is None  # retried for as long as the run's budget
    # The soft open-file limit now holds the pool (up to what the hard limit allows).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1234 + FD_HEADROOM
    assert executor.open_file_limit == soft
    assert soft >= (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard))


def test_a_pool_smaller_than_the_runs_in_flight_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_SSH_MAX_CONCURRENCY", "100")
    monkeypatch.setenv("FLEETCRON_SSH_MAX_CONNECTIONS", "99")
    with pytest.raises(
        ConfigError, match=r"FLEETCRON_SSH_MAX_CONNECTIONS \(99\) must be at least .*\(100\)"
    ):
        load_settings()


def test_a_backoff_cap_below_the_first_backoff_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_SSH_CONNECT_BACKOFF_S", "2")
    monkeypatch.setenv("FLEETCRON_SSH_CONNECT_BACKOFF_MAX_S", "1")
    with pytest.raises(ConfigError, match=r"FLEETCRON_SSH_CONNECT_BACKOFF_MAX_S \(1\)"):
        load_settings()


def test_a_zero_handshake_cap_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_SSH_MAX_CONNECTING", "0")
    with pytest.raises(ConfigError, match=r"FLEETCRON_SSH_MAX_CONNECTING: .*greater than or equal"):
        load_settings()


def test_a_negative_keepalive_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_SSH_KEEPALIVE_S", "-1")
    with pytest.raises(ConfigError, match=r"FLEETCRON_SSH_KEEPALIVE_S: .*greater than or equal"):
        load_settings()
