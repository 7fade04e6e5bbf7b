"""The configuration as a user sees it: ``fleetcron config show`` (every setting with its
effective value, secrets masked, and where it came from), a connection string with its
passwords masked (:func:`fleetcron.masking.mask_dsn`), and how the data dir was chosen, in words."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetcron.config import Settings, load_settings, setting_origins
from fleetcron.config_sources import CONNECTION_FIELDS, MASK, SECRET_FIELDS, env_variable
from fleetcron.masking import mask_dsn


def data_dir_origin() -> str:
    """How the data dir was chosen, in words a user can act on: the variable, the config
    file, or the default (and what the default is made of)."""
    origin = setting_origins().get("data_dir", "default")
    kind, _, where = origin.partition(":")
    if kind == "env":
        return f"from {where}"
    if kind == "toml":
        return f"from data_dir in {where}"
    base = (
        "$XDG_DATA_HOME/fleetcron"
        if os.environ.get("XDG_DATA_HOME")
        else ("~/.local/share/fleetcron")
    )
    return f"the default {base}, as {env_variable('data_dir')} is not set"


@dataclass(frozen=True)
class EffectiveSetting:
    """One line of ``fleetcron config show``."""

    name: str
    variable: str
    value: Any
    source: str
    description: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "variable": self.variable,
            "value": self.value,
            "source": self.source,
            "description": self.description,
        }


def effective_configuration(**overrides: Any) -> list[EffectiveSetting]:
    """Every setting with its effective value (secrets masked) and its source."""
    settings = load_settings(**overrides)
    origins = setting_origins(**overrides)
    return [
        EffectiveSetting(
            name,
            env_variable(name),
            shown_value(settings, name),
            origins[name],
            info.description or "",
        )
        for name, info in Settings.model_fields.items()
    ]


def shown_value(settings: Settings, name: str) -> Any:
    """A setting's value as it may be shown: secrets masked, paths as text, and the
    defaults that depend on the data dir resolved."""
    if name == "database_url":
        return mask_dsn(settings.effective_database_url)
    if name == "master_key_file":
        return str(settings.effective_master_key_file)
    value = getattr(settings, name)
    if name in CONNECTION_FIELDS and isinstance(value, str):
        return mask_dsn(value)
    if name in SECRET_FIELDS:
        return None if value is None else MASK
    if isinstance(value, Path):
        return str(value)
    return value


mask_url = mask_dsn
"""The one masking function, under the name its first callers use."""
