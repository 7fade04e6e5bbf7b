"""No setting can switch off the ownership guard or the claim wait.

The fault tests' negative controls weaken the guard by composition (a ``GuardPolicy`` passed
to ``build_scheduler`` in their own node process). Here the environment asks for the old
switches: the settings know no such field, and the scheduler built from them is guarded and
waits for old claims; a TOML file that asks for them is refused, naming the key. The
negative control passes a weak policy the way the harness does and shows the inspection
sees the difference.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from fleetcron.app import App
from fleetcron.config import Settings, load_settings
from fleetcron.coordination.guard import CoordinatedGuard
from fleetcron.coordination.node import GuardPolicy
from fleetcron.crypto import generate_key
from fleetcron.errors import ConfigError
from fleetcron.scheduler.assembly import build_scheduler

pytestmark = pytest.mark.postgres

SWITCHES = ("unsafe_disable_guard", "unsafe_disable_claim_wait")


@pytest.fixture
def asking_settings(migrated: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Cluster settings read from an environment and a TOML file that set the old switches."""
    machine_id = tmp_path / "machine-id"
    machine_id.write_text(secrets.token_hex(16) + "\n")
    environment = {
        "FLEETCRON_DATABASE_URL": migrated,
        "FLEETCRON_CLUSTER": "true",
        "FLEETCRON_ENDPOINT": "http://alpha.example:8080",
        "FLEETCRON_MACHINE_ID_FILE": str(machine_id),
        "FLEETCRON_MASTER_KEY": generate_key().decode(),
        "FLEETCRON_DATA_DIR": str(tmp_path / "data"),
        **{f"FLEETCRON_{name.upper()}": "true" for name in SWITCHES},
    }
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    return load_settings()


def _guard(settings: Settings, policy: GuardPolicy | None = None) -> CoordinatedGuard:
    app = App.open(settings)
    try:
        scheduler = (
            build_scheduler(app) if policy is None else build_scheduler(app, guard_policy=policy)
        )
    finally:
        app.close()
    assert isinstance(scheduler.guard, CoordinatedGuard)
    return scheduler.guard


def test_the_settings_know_no_switch_for_the_guard_or_the_claim_wait(
    asking_settings: Settings,
) -> None:
    assert asking_settings.cluster
    unsafe = [name for name in Settings.model_fields if "unsafe" in name or "disable" in name]
    assert unsafe == []
    for name in SWITCHES:
        assert not hasattr(asking_settings, name)


def test_a_scheduler_built_from_settings_that_ask_for_the_switches_is_guarded(
    asking_settings: Settings,
) -> None:
    guard = _guard(asking_settings)
    assert guard.unguarded is False
    assert guard.wait_for_old_claims is True


@pytest.mark.parametrize(
    ("policy", "unguarded", "waits"),
    [
        (GuardPolicy(guarded=False), True, True),
        (GuardPolicy(wait_for_old_claims=False), False, False),
    ],
)
def test_negative_control_a_composed_policy_is_seen_in_the_built_guard(
    asking_settings: Settings, policy: GuardPolicy, unguarded: bool, waits: bool
) -> None:
    guard = _guard(asking_settings, policy)
    assert (guard.unguarded, guard.wait_for_old_claims) == (unguarded, waits)


@pytest.mark.parametrize("name", SWITCHES)
def test_a_config_file_that_asks_for_a_switch_is_refused_naming_the_key(
    asking_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    config = tmp_path / "fleetcron.toml"
    config.write_text(f"{name} = true\n")
    monkeypatch.setenv("FLEETCRON_CONFIG", str(config))
    with pytest.raises(ConfigError, match=f"unknown setting '{name}'"):
        load_settings()
