"""Where settings come from: arguments, FLEETCRON_* variables, *_FILE secrets, a TOML file,
defaults, in that order; `fleetcron config show` tells which, with secrets masked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest

from fleetcron import config
from fleetcron.cli.ops_cmd import config as config_group
from fleetcron.cli.output import run_cli
from fleetcron.config import load_settings, setting_origins
from fleetcron.config_view import mask_url
from fleetcron.crypto import generate_key
from fleetcron.errors import ConfigError

PG_URL = "postgresql+psycopg://fleetcron:s3cret-pw@db.internal:5432/fleetcron"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No FLEETCRON_* setting of the calling shell, no /etc/fleetcron/fleetcron.toml of this
    machine, and a data dir of the test's own."""
    for name in list(os.environ):
        if name.startswith("FLEETCRON_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(config, "DEFAULT_CONFIG_FILE", tmp_path / "etc" / "fleetcron.toml")
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(tmp_path / "data"))


def toml_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str) -> Path:
    path = tmp_path / "fleetcron.toml"
    path.write_text(content)
    monkeypatch.setenv("FLEETCRON_CONFIG", str(path))
    return path


def secret_file(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content)
    return path


# -- the TOML file ------------------------------------------------------------------------


def test_the_toml_file_sets_values_by_field_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml_file(monkeypatch, tmp_path, 'timezone = "Europe/Berlin"\ntick_s = 0.5\ncluster = false\n')

    settings = load_settings()

    assert (settings.timezone, settings.tick_s) == ("Europe/Berlin", 0.5)


def test_the_default_toml_file_is_read_when_it_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    default = tmp_path / "etc" / "fleetcron.toml"
    default.parent.mkdir()
    default.write_text("retention_days = 30\n")

    assert load_settings().retention_days == 30
    assert setting_origins()["retention_days"] == f"toml:{default}"


def test_without_a_toml_file_the_defaults_apply() -> None:
    assert config.config_file() is None
    assert load_settings().retention_days == 90


def test_a_named_toml_file_that_does_not_exist_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETCRON_CONFIG", str(tmp_path / "missing.toml"))

    with pytest.raises(ConfigError, match=r"^FLEETCRON_CONFIG: .*missing\.toml does not exist"):
        load_settings()


def test_an_unknown_key_in_the_toml_file_names_the_key_and_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = toml_file(monkeypatch, tmp_path, 'timezon = "Europe/Berlin"\n')

    with pytest.raises(ConfigError) as info:
        load_settings()

    assert str(info.value).startswith(f"{path}: unknown setting 'timezon'")
    assert "did you mean 'timezone'?" in str(info.value)


def test_a_table_in_the_toml_file_is_an_unknown_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml_file(monkeypatch, tmp_path, '[fleetcron]\ntimezone = "UTC"\n')

    with pytest.raises(ConfigError, match="unknown setting 'fleetcron'"):
        load_settings()


def test_a_toml_syntax_error_names_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = toml_file(monkeypatch, tmp_path, "timezone = Europe/Berlin\n")

    with pytest.raises(ConfigError, match=rf"^{path}: not valid TOML: "):
        load_settings()


def test_a_bad_value_in_the_toml_file_names_the_key_and_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = toml_file(monkeypatch, tmp_path, "command_max_length = 0\n")

    with pytest.raises(ConfigError) as info:
        load_settings()

    assert str(info.value) == (
        f"invalid configuration: command_max_length in {path}: "
        "Input should be greater than or equal to 1 (got 0)"
    )


# -- precedence ---------------------------------------------------------------------------


def test_the_environment_wins_over_the_toml_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml_file(monkeypatch, tmp_path, 'timezone = "Europe/Berlin"\n')
    monkeypatch.setenv("FLEETCRON_TIMEZONE", "Asia/Tokyo")

    assert load_settings().timezone == "Asia/Tokyo"
    assert setting_origins()["timezone"] == "env:FLEETCRON_TIMEZONE"


def test_an_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETCRON_TIMEZONE", "Asia/Tokyo")

    assert load_settings(timezone="America/Chicago").timezone == "America/Chicago"
    assert setting_origins(timezone="America/Chicago")["timezone"] == "argument"


def test_a_secret_file_wins_over_the_toml_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml_file(monkeypatch, tmp_path, 'database_url = "postgresql+psycopg://from-toml/fc"\n')
    url_file = secret_file(tmp_path, "url", "postgresql+psycopg://from-file/fc\n")
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(url_file))

    assert load_settings().database_url == "postgresql+psycopg://from-file/fc"
    assert setting_origins()["database_url"] == "file:FLEETCRON_DATABASE_URL_FILE"


def test_every_source_is_named_in_the_origins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = toml_file(monkeypatch, tmp_path, "retention_days = 30\n")
    monkeypatch.setenv("FLEETCRON_TICK_S", "2")
    url_file = secret_file(tmp_path, "url", PG_URL)
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(url_file))

    origins = setting_origins(node_name="n1")

    assert origins["retention_days"] == f"toml:{path}"
    assert origins["tick_s"] == "env:FLEETCRON_TICK_S"
    assert origins["database_url"] == "file:FLEETCRON_DATABASE_URL_FILE"
    assert origins["node_name"] == "argument"
    assert origins["claim_batch"] == "default"


# -- *_FILE secrets -----------------------------------------------------------------------


def test_an_empty_secret_file_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(secret_file(tmp_path, "url", "\n")))

    with pytest.raises(ConfigError, match=r"^FLEETCRON_DATABASE_URL_FILE: .*url is empty"):
        load_settings()


def test_a_secret_file_shadowed_by_its_variable_is_not_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(tmp_path / "gone"))
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", PG_URL)

    assert load_settings().database_url == PG_URL


def test_an_empty_variable_counts_as_unset_so_its_secret_file_applies(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", "")
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(secret_file(tmp_path, "url", PG_URL)))
    monkeypatch.setenv("FLEETCRON_LEASE_S", "")

    settings = load_settings()

    assert (settings.database_url, settings.lease_s) == (PG_URL, None)
    assert setting_origins()["lease_s"] == "default"


def test_a_secret_file_shadowed_by_an_argument_is_not_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(tmp_path / "gone"))

    assert load_settings(database_url=PG_URL).database_url == PG_URL


def test_the_master_key_file_variable_stays_a_path_to_the_key_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key_file = secret_file(tmp_path, "master.key", generate_key().decode())
    monkeypatch.setenv("FLEETCRON_MASTER_KEY_FILE", str(key_file))

    settings = load_settings()

    assert settings.master_key is None
    assert settings.effective_master_key_file == key_file


# -- errors -------------------------------------------------------------------------------


def test_each_bad_value_gets_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = toml_file(monkeypatch, tmp_path, "retention_days = 0\n")
    monkeypatch.setenv("FLEETCRON_TIMEZONE", "Mars/Olympus")
    monkeypatch.setenv("FLEETCRON_COMMAND_MAX_LENGTH", "many")

    with pytest.raises(ConfigError) as info:
        load_settings()

    lines = str(info.value).splitlines()
    assert lines[0] == "invalid configuration:"
    assert lines[1].startswith("  FLEETCRON_TIMEZONE: 'Mars/Olympus' is not an IANA time zone")
    assert lines[2].startswith("  FLEETCRON_COMMAND_MAX_LENGTH: Input should be a valid integer")
    assert lines[3].startswith(f"  retention_days in {path}: Input should be greater than")
    assert len(lines) == 4


def test_a_broken_invariant_is_one_message_naming_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETCRON_LEASE_S", "5")
    monkeypatch.setenv("FLEETCRON_LEASE_RENEW_S", "10")

    with pytest.raises(ConfigError) as info:
        load_settings()

    assert str(info.value) == (
        "invalid configuration: FLEETCRON_LEASE_RENEW_S (10) must be shorter than "
        "FLEETCRON_LEASE_S (5)"
    )


def test_a_bad_secret_never_shows_in_the_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml_file(monkeypatch, tmp_path, "master_key = 123456789\n")

    with pytest.raises(ConfigError) as info:
        load_settings()

    assert "master_key in" in str(info.value)
    assert "123456789" not in str(info.value)
    assert "(got **********)" in str(info.value)


# -- masking ------------------------------------------------------------------------------


def test_a_database_url_shows_without_its_password() -> None:
    assert mask_url(PG_URL) == (
        "postgresql+psycopg://fleetcron:**********@db.internal:5432/fleetcron"
    )


def test_a_password_in_the_query_of_a_database_url_is_masked() -> None:
    masked = mask_url("postgresql+psycopg://fc@db/fc?password=hunter22&sslmode=require")

    assert "hunter22" not in masked
    assert "sslmode=require" in masked


def test_a_database_url_that_does_not_parse_is_masked_whole() -> None:
    assert mask_url("not a url with hunter22") == "**********"


# -- fleetcron config show ----------------------------------------------------------------


@pytest.fixture
def commands() -> click.Group:
    group = click.Group("fleetcron")
    group.add_command(config_group)
    return group


def test_config_show_prints_every_setting_its_value_and_its_source_as_json(
    commands: click.Group,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = toml_file(monkeypatch, tmp_path, 'timezone = "Europe/Berlin"\n')
    key = generate_key().decode()
    monkeypatch.setenv("FLEETCRON_MASTER_KEY", key)
    monkeypatch.setenv("FLEETCRON_DATABASE_URL_FILE", str(secret_file(tmp_path, "url", PG_URL)))

    assert run_cli(commands, ["config", "show", "--json"]) == 0

    out = capsys.readouterr().out
    shown = json.loads(out)
    by_name = {s["name"]: s for s in shown["settings"]}
    assert shown["config_file"] == str(path)
    assert set(by_name) == set(config.Settings.model_fields)
    assert by_name["timezone"] | {"description": ""} == {
        "name": "timezone",
        "variable": "FLEETCRON_TIMEZONE",
        "value": "Europe/Berlin",
        "source": f"toml:{path}",
        "description": "",
    }
    assert (by_name["master_key"]["value"], by_name["master_key"]["source"]) == (
        "**********",
        "env:FLEETCRON_MASTER_KEY",
    )
    assert by_name["database_url"]["value"] == mask_url(PG_URL)
    assert by_name["database_url"]["source"] == "file:FLEETCRON_DATABASE_URL_FILE"
    assert by_name["data_dir"] == by_name["data_dir"] | {
        "value": str(tmp_path / "data"),
        "source": "env:FLEETCRON_DATA_DIR",
    }
    assert (by_name["tick_s"]["value"], by_name["tick_s"]["source"]) == (1.0, "default")
    assert key not in out
    assert "s3cret-pw" not in out


def test_config_show_resolves_defaults_that_depend_on_the_data_dir(
    commands: click.Group, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(commands, ["config", "show", "--json"]) == 0

    shown = json.loads(capsys.readouterr().out)
    by_name = {s["name"]: s for s in shown["settings"]}
    assert shown["config_file"] is None
    assert by_name["database_url"]["value"] == f"sqlite:///{tmp_path / 'data' / 'fleetcron.db'}"
    assert by_name["master_key_file"]["value"] == str(tmp_path / "data" / "master.key")
    assert by_name["master_key"]["value"] is None


def test_config_show_prints_a_table_for_humans_without_secrets(
    commands: click.Group,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("FLEETCRON_DATABASE_URL", PG_URL)

    assert run_cli(commands, ["config", "show"]) == 0

    out = capsys.readouterr().out
    assert out.startswith("config file: (none)\n")
    assert "env:FLEETCRON_DATABASE_URL" in out
    assert "fleetcron:**********@db.internal" in out
    assert "s3cret-pw" not in out


def test_config_show_with_a_bad_value_prints_the_one_message_and_fails(
    commands: click.Group, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLEETCRON_TICK_S", "-1")

    assert run_cli(commands, ["config", "show"]) == 1

    captured = capsys.readouterr()
    assert captured.err == (
        "error: invalid configuration: FLEETCRON_TICK_S: Input should be greater than 0 "
        "(got '-1')\n"
    )
    assert captured.out == ""
