"""The OIDC settings: the client secret is a secret (masked, never in an error), the
issuer needs its client and callback, and the role mapping is checked at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcron.config import load_settings
from fleetcron.config_sources import SECRET_FIELDS
from fleetcron.config_view import effective_configuration
from fleetcron.errors import ConfigError

OIDC = {
    "oidc_issuer": "https://id.example.org",
    "oidc_client_id": "fleetcron",
    "oidc_redirect_uri": "https://cron.example.org/login/oidc/callback",
}
SECRET = "very-secret-client-secret-value"


def test_the_client_secret_is_a_secret_masked_where_settings_are_shown() -> None:
    assert "oidc_client_secret" in SECRET_FIELDS
    shown = {
        s.name: s.value for s in effective_configuration(**OIDC, oidc_client_secret=SECRET)
    }
    assert shown["oidc_client_secret"] == "**********"
    assert SECRET not in repr(load_settings(**OIDC, oidc_client_secret=SECRET))


def test_the_client_secret_can_come_from_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    monkeypatch.setenv("FLEETCRON_OIDC_CLIENT_SECRET_FILE", str(path))
    secret = load_settings(**OIDC).oidc_client_secret
    assert secret is not None and secret.get_secret_value() == SECRET


def test_an_issuer_without_its_client_id_stops_the_start() -> None:
    with pytest.raises(ConfigError, match="set FLEETCRON_OIDC_CLIENT_ID too"):
        load_settings(oidc_issuer="https://id.example.org", oidc_redirect_uri="https://x/cb")


def test_a_bad_mapping_entry_stops_the_start_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"oidc_role_mapping\[1\]\.role"):
        load_settings(
            **OIDC,
            oidc_role_mapping=[{"group": "ops", "role": "operator"}, {"group": "x", "role": "god"}],
        )


def test_the_mapping_reads_from_a_toml_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "fleetcron.toml"
    path.write_text(
        'oidc_issuer = "https://id.example.org"\n'
        'oidc_client_id = "fleetcron"\n'
        'oidc_redirect_uri = "https://cron.example.org/login/oidc/callback"\n'
        "oidc_role_mapping = [\n"
        '  {group = "ops", role = "operator"},\n'
        '  {group = "fleet-admins", role = "admin"},\n'
        "]\n"
    )
    monkeypatch.setenv("FLEETCRON_CONFIG", str(path))
    settings = load_settings()
    assert settings.oidc_role_mapping[1] == {"group": "fleet-admins", "role": "admin"}
