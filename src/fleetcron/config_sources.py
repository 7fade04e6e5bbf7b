"""Where settings come from besides arguments and the defaults: the environment's
secrets (kept out of ``/proc/<pid>/environ``), ``FLEETCRON_<NAME>_FILE`` secret files and
the TOML file, as pydantic-settings sources that :class:`fleetcron.config.Settings` asks
in order; and the names a user finds a value under again.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import sys
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, TomlConfigSettingsSource

from fleetcron.errors import ConfigError
from fleetcron.masking import MASK

__all__ = [
    "CONNECTION_FIELDS",
    "ENV_PREFIX",
    "MASK",
    "SECRETS_FD_VARIABLE",
    "SECRET_FIELDS",
    "InheritedSecretSource",
    "SecretFileSource",
    "TomlFileSource",
    "env_variable",
    "file_variable",
    "hide_secret_environment",
    "origin_name",
    "pass_secrets_to_child",
]

ENV_PREFIX = "FLEETCRON_"
SECRET_FIELDS = (
    "database_url",
    "master_key",
    "replication_peer_dsn",
    "oidc_client_secret",
    "ldap_bind_password",
)
"""Settings that are secrets: masked wherever settings are shown, kept out of the process
environment (:func:`hide_secret_environment`), and readable from a file named by
``FLEETCRON_<NAME>_FILE`` (unless the setting has a ``<name>_file`` field of its own, as
``master_key`` has: its key file is read when the key is needed)."""
CONNECTION_FIELDS = ("database_url", "replication_peer_dsn")
"""The secret settings that are connection strings: shown with only their passwords masked
(:func:`fleetcron.masking.mask_dsn`)."""
SECRETS_FD_VARIABLE = ENV_PREFIX + "SECRETS_FD"
"""Set by :func:`hide_secret_environment` on its re-exec: the inherited pipe with the
secrets that were in the environment."""
_inherited_secrets: dict[str, str] = {}


def env_variable(field: str) -> str:
    return ENV_PREFIX + field.upper()


def file_variable(field: str) -> str:
    return env_variable(field) + "_FILE"


def origin_name(field: str, origin: str) -> str:
    """How a user finds the value again: the variable, or the key in the TOML file."""
    kind, _, where = origin.partition(":")
    if kind in ("env", "file"):
        return where
    if kind == "toml":
        return f"{field} in {where}"
    if kind == "argument":
        return field
    return env_variable(field)


def _file_fields(settings_cls: type[BaseSettings]) -> tuple[str, ...]:
    fields = settings_cls.model_fields
    return tuple(name for name in SECRET_FIELDS if f"{name}_file" not in fields)


def hide_secret_environment() -> None:
    """Keep secrets out of this process's environment (``/proc/<pid>/environ``).

    Removing a variable from ``os.environ`` does not remove it from the environment block
    the kernel shows in ``/proc/<pid>/environ``. So when a secret setting
    (``FLEETCRON_MASTER_KEY``, ``FLEETCRON_DATABASE_URL``,
    ``FLEETCRON_REPLICATION_PEER_DSN``, ``FLEETCRON_OIDC_CLIENT_SECRET``,
    ``FLEETCRON_LDAP_BIND_PASSWORD``) is in the environment, the
    process re-executes itself once without it and reads it from an inherited pipe
    (:data:`SECRETS_FD_VARIABLE`); the settings take it from there as if it came from
    the environment. Called first by the long-running commands (``serve``,
    ``scheduler``). ``FLEETCRON_MASTER_KEY_FILE`` avoids the re-exec altogether.
    """
    inherited = os.environ.pop(SECRETS_FD_VARIABLE, None)
    if inherited is not None:
        with contextlib.suppress(ValueError, OSError), os.fdopen(int(inherited), "rb") as pipe:
            _inherited_secrets.update(json.loads(pipe.read() or b"{}"))
    present = {
        env_variable(name): os.environ[env_variable(name)]
        for name in SECRET_FIELDS
        if os.environ.get(env_variable(name))
    }
    if not present:
        return
    payload = json.dumps(present).encode()
    read_end, write_end = os.pipe()
    if len(payload) > 60_000:  # a pipe buffer holds 64 KiB; secrets are far smaller
        raise ConfigError("the secret settings in the environment are too large to pass on")
    os.write(write_end, payload)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {name: value for name, value in os.environ.items() if name not in present}
    env[SECRETS_FD_VARIABLE] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def pass_secrets_to_child() -> tuple[dict[str, str], int | None]:
    """For a child process of this one (a worker of ``fleetcron scheduler --workers``):
    the environment entry and the descriptor (to pass with ``pass_fds``, then close) of a
    fresh pipe holding the secrets :func:`hide_secret_environment` took from this
    process's environment; nothing when there were none."""
    if not _inherited_secrets:
        return {}, None
    payload = json.dumps(_inherited_secrets).encode()
    read_end, write_end = os.pipe()
    os.write(write_end, payload)
    os.close(write_end)
    return {SECRETS_FD_VARIABLE: str(read_end)}, read_end


class InheritedSecretSource(PydanticBaseSettingsSource):
    """The secrets :func:`hide_secret_environment` took out of the environment, with the
    environment's priority."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in SECRET_FIELDS:
            value = _inherited_secrets.get(env_variable(name))
            if value:
                values[name] = value
        return values


class SecretFileSource(PydanticBaseSettingsSource):
    """``FLEETCRON_<NAME>_FILE`` for each secret: the value is the file's content, stripped.

    A file shadowed by an argument or by a non-empty ``FLEETCRON_<NAME>`` is not read, so
    a stale path there does not stop a start that would not use it.
    """

    def __init__(self, settings_cls: type[BaseSettings], given: Collection[str] = ()) -> None:
        super().__init__(settings_cls)
        self._given = set(given)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        # Unused: __call__ reads every file at once.
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        environ = {name.upper(): value for name, value in os.environ.items()}
        values: dict[str, Any] = {}
        for field in _file_fields(self.settings_cls):
            variable = file_variable(field)
            path = environ.get(variable)
            if not path or field in self._given or environ.get(env_variable(field)):
                continue
            try:
                content = Path(path).read_text().strip()
            except OSError as exc:
                raise ConfigError(
                    f"{variable}: cannot read {path}: {exc.strerror or exc}"
                ) from None
            if not content:
                raise ConfigError(f"{variable}: {path} is empty")
            values[field] = content
        return values


class TomlFileSource(TomlConfigSettingsSource):
    """The TOML config file; an unknown key stops the start (it is a typo, not a no-op)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        self.path = path
        super().__init__(settings_cls, toml_file=path)
        known = settings_cls.model_fields
        for key in self.toml_data:
            if key.lower() not in known:
                hint = difflib.get_close_matches(key.lower(), known, n=1)
                raise ConfigError(
                    f"{path}: unknown setting {key!r}"
                    + (f" (did you mean {hint[0]!r}?)" if hint else "")
                    + "; the keys are the setting names, see `fleetcron config show`"
                )

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        try:
            return super()._read_file(file_path)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{self.path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
