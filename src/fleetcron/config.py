"""The one settings object of fleetcron.

Every value comes from an environment variable ``FLEETCRON_<NAME>``; secrets may come
from a file named by ``FLEETCRON_<NAME>_FILE`` instead. Every default lives here, each
with its description, so there is one place to read what can be configured.
Invalid values stop the start with one clear message naming the variable.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from fleetcron.errors import ConfigError
from fleetcron.executors.base import DEFAULT_KILL_GRACE_S

ENV_PREFIX = "FLEETCRON_"


def default_data_dir() -> Path:
    """Per-user data directory: ``$XDG_DATA_HOME/fleetcron`` or ``~/.local/share/fleetcron``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "fleetcron"


class Settings(BaseSettings):
    """Effective configuration of one fleetcron process."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the SQLite database and the master key file live.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; unset means SQLite in the data dir. "
        "PostgreSQL: postgresql+psycopg://user@host/db",
    )
    timezone: str = Field(default="UTC", description="Default time zone of new jobs.")
    master_key: SecretStr | None = Field(
        default=None, description="Key that encrypts secrets at rest (base64, 32 bytes)."
    )
    master_key_file: Path | None = Field(
        default=None, description="File holding the master key; default <data_dir>/master.key."
    )
    command_max_length: int = Field(
        default=512, ge=1, le=65536, description="Longest command a job may hold, in characters."
    )
    job_timeout_s: int = Field(
        default=300, ge=1, le=7 * 24 * 3600, description="Default per-run timeout of new jobs."
    )
    ssh_connect_timeout_s: float = Field(
        default=15.0, gt=0, le=300, description="Timeout to connect and verify an SSH target."
    )
    output_limit_bytes: int = Field(
        default=4096,
        ge=0,
        le=1 << 20,
        description="Bytes kept from the head and from the tail of each run's stdout and stderr.",
    )
    misfire_grace_s: int = Field(
        default=60,
        ge=1,
        le=24 * 3600,
        description="A slot still fires this many seconds after its minute; later it is missed.",
    )
    catchup_window_s: int = Field(
        default=24 * 3600,
        ge=1,
        le=366 * 24 * 3600,
        description="Jobs with catchup=latest run their newest missed slot if it is this recent.",
    )
    max_missed_records: int = Field(
        default=10,
        ge=1,
        le=10_000,
        description="Missed slots recorded one by one per assignment before a summary record.",
    )
    tick_s: float = Field(
        default=1.0, gt=0, le=30, description="How often the scheduler looks for due work."
    )
    claim_batch: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Due assignments decided per transaction; a tick repeats until none is due.",
    )
    shutdown_grace_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="On SIGTERM, running runs get this long to finish before being interrupted.",
    )
    ssh_max_concurrency: int = Field(
        default=64, ge=1, le=10_000, description="SSH runs in flight across all targets."
    )
    ssh_per_target_concurrency: int = Field(
        default=4, ge=1, le=1000, description="SSH runs in flight on one target."
    )
    local_max_concurrency: int = Field(
        default=64, ge=1, le=10_000, description="Local runs in flight at once."
    )
    log_format: str = Field(
        default="text", pattern="^(text|json)$", description="Log lines as text or as JSON."
    )
    retention_days: int = Field(
        default=90, ge=1, le=100 * 365, description="Runs older than this many days are pruned."
    )
    retention_max_runs: int = Field(
        default=1000,
        ge=1,
        le=10_000_000,
        description="At most this many runs are kept per assignment (the newest).",
    )
    audit_retention_days: int | None = Field(
        default=None, ge=1, description="Audit events older than this are pruned; unset: forever."
    )
    prune_batch: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="Rows deleted per transaction, so no single delete locks the table for long.",
    )
    metrics_require_auth: bool = Field(
        default=False, description="Require a viewer's API token for /metrics."
    )
    notify_max_attempts: int = Field(
        default=5, ge=1, le=100, description="Delivery attempts per notification before giving up."
    )
    notify_backoff_s: float = Field(
        default=30.0,
        gt=0,
        le=86400,
        description="First retry delay of a failed delivery (doubles).",
    )
    notify_timeout_s: float = Field(
        default=10.0, gt=0, le=300, description="Timeout of one webhook or SMTP delivery."
    )
    cluster: bool = Field(
        default=False,
        description="Run as one node of a cluster sharing PostgreSQL: jobs run only on the "
        "approved owner node (see docs/high-availability.md).",
    )
    endpoint: str | None = Field(
        default=None,
        description="This node's base URL as other nodes reach it, e.g. http://10.0.0.5:8080.",
    )
    machine_id_file: Path = Field(
        default=Path("/etc/machine-id"), description="Source of this host's node identity."
    )
    claim_margin_s: float = Field(
        default=60.0,
        ge=1,
        le=3600,
        description="A run's claim deadline is its timeout plus this margin (time to connect, "
        "to kill on timeout and to record the outcome).",
    )
    maintenance_interval_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How often expired claims are closed and pending transfers progressed.",
    )
    lease_s: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="Opt-in automatic failover: the owner's lease; unset means no failover.",
    )
    lease_renew_s: float = Field(
        default=10.0, gt=0, le=3600, description="How often the owner renews its lease."
    )
    unsafe_disable_guard: bool = Field(
        default=False,
        description="TEST ONLY: switch the ownership guard off to show that the fault tests "
        "catch duplicate runs. Never set this in production.",
    )
    node_name: str | None = Field(
        default=None, description="Name this node records on runs; default: the hostname."
    )

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"{value!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)"
            ) from exc
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Invariants between settings, each broken one named with what to change."""
        if self.cluster:
            if self.is_sqlite:
                raise ValueError(
                    "cluster mode needs PostgreSQL shared by every node: set "
                    "FLEETCRON_DATABASE_URL=postgresql+psycopg://..."
                )
            if not self.endpoint:
                raise ValueError("cluster mode needs FLEETCRON_ENDPOINT (this node's base URL)")
        if self.lease_s is not None and self.lease_renew_s >= self.lease_s:
            raise ValueError(
                f"FLEETCRON_LEASE_RENEW_S ({self.lease_renew_s:g}) must be shorter than "
                f"FLEETCRON_LEASE_S ({self.lease_s:g})"
            )
        if self.claim_margin_s <= DEFAULT_KILL_GRACE_S:
            raise ValueError(
                f"FLEETCRON_CLAIM_MARGIN_S ({self.claim_margin_s:g}) must be longer than the "
                f"{DEFAULT_KILL_GRACE_S:g} s between SIGTERM and SIGKILL at a run's timeout"
            )
        return self

    @cached_property
    def effective_database_url(self) -> str:

        return self.database_url or f"sqlite:///{self.data_dir / 'fleetcron.db'}"

    @property
    def is_sqlite(self) -> bool:
        return self.effective_database_url.startswith("sqlite")

    @property
    def effective_master_key_file(self) -> Path:
        return self.master_key_file or self.data_dir / "master.key"


def load_settings(**overrides: Any) -> Settings:
    """Read the settings from the environment; raise ConfigError naming each bad variable."""
    url_file = os.environ.get(ENV_PREFIX + "DATABASE_URL_FILE")
    if (
        url_file
        and "database_url" not in overrides
        and not os.environ.get(ENV_PREFIX + "DATABASE_URL")
    ):
        try:
            overrides["database_url"] = Path(url_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(
                f"FLEETCRON_DATABASE_URL_FILE: cannot read {url_file}: {exc.strerror}"
            ) from None
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = ENV_PREFIX + "_".join(str(part) for part in error["loc"]).upper()
            problems.append(f"{name}: {error['msg']} (got {error.get('input')!r})")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
