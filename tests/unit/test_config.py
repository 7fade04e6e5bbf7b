"""Settings from FLEETCRON_* environment variables: typed, defaulted, loud when wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetcron.config import load_settings
from fleetcron.crypto import generate_key
from fleetcron.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No FLEETCRON_* setting of the calling shell; a data dir of the test's own."""
    for name in list(os.environ):
        if name.startswith("FLEETCRON_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(tmp_path / "data"))


def test_it_uses_sqlite_in_the_data_dir_by_default(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.effective_database_url == f"sqlite:///{tmp_path / 'data' / 'fleetcron.db'}"
    assert settings.is_sqlite


def test_it_keeps_the_master_key_file_in_the_data_dir_by_default(tmp_path: Path) -> None:
    assert load_settings().effective_master_key_file == tmp_path / "data" / "master.key"


def test_it_defaults_to_utc_and_512_character_commands() -> None:
    settings = load_settings()
    assert (settings.timezone, settings.command_max_length) == ("UTC", 512)


def test_it_reads_typed_values_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETCRON_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("FLEETCRON_COMMAND_MAX_LENGTH", "2048")
    settings = load_settings()
    assert (settings.timezone, settings.command_max_length) == ("Europe/Berlin", 2048)


def test_it_rejects_an_unknown_time_zone_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_TIMEZONE", "Mars/Olympus")
    with pytest.raises(ConfigError, match=r"FLEETCRON_TIMEZONE: .*'Mars/Olympus'"):
        load_settings()


def test_it_rejects_a_zero_command_length_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_COMMAND_MAX_LENGTH", "0")
    with pytest.raises(ConfigError, match=r"FLEETCRON_COMMAND_MAX_LENGTH: .*greater than or equal"):
        load_settings()


def test_it_names_every_bad_variable_in_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETCRON_TIMEZONE", "Mars/Olympus")
    monkeypatch.setenv("FLEETCRON_COMMAND_MAX_LENGTH", "many")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "FLEETCRON_TIMEZONE" in str(info.value)
    assert "FLEETCRON_COMMAND_MAX_LENGTH" in str(info.value)


def test_it_reads_the_database_url_from_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url_file = tmp_path / "database_url"
    url_file.write_text("postgresql+psycopg://fleetcron:s3cret@db.internal/fleetcron\n")
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(url_file))
    settings = load_settings()
    assert settings.database_url == "postgresql+psycopg://fleetcron:s3cret@db.internal/fleetcron"
    assert not settings.is_sqlite


def test_the_database_url_variable_wins_over_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url_file = tmp_path / "database_url"
    url_file.write_text("postgresql+psycopg://from-file/fleetcron\n")
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(url_file))
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", "postgresql+psycopg://from-env/fleetcron")
    assert load_settings().database_url == "postgresql+psycopg://from-env/fleetcron"


def test_an_unreadable_database_url_file_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=r"^FLEETCRON_DATABASE_URL_FILE: cannot read .*missing"):
        load_settings()


def test_the_master_key_from_the_environment_never_shows_in_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = generate_key().decode()
    monkeypatch.setenv("FLEETCRON_MASTER_KEY", key)
    settings = load_settings()
    assert settings.master_key is not None
    assert settings.master_key.get_secret_value() == key
    assert key not in f"{settings!r} {settings}"


def test_the_lease_renewal_must_come_before_the_self_fencing_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_LEASE_S", "30")
    monkeypatch.setenv("FLEETCRON_LEASE_RENEW_S", "25")
    with pytest.raises(ConfigError, match=r"LEASE_RENEW_S \(25\) must be shorter than 24 s"):
        load_settings()
    monkeypatch.setenv("FLEETCRON_LEASE_RENEW_S", "10")
    assert load_settings().lease_renew_s == 10
