"""The one settings object of fleetcron.

Every setting is a field of :class:`Settings`, with its default and its description, so
there is one place to read what can be configured. A value comes from, highest first:

1. an argument (``load_settings(tick_s=0.1)``, tests and tools);
2. the environment variable ``FLEETCRON_<NAME>`` (an empty one counts as unset);
3. for a secret (:data:`SECRET_FIELDS`), the file named by ``FLEETCRON_<NAME>_FILE``;
4. the TOML file named by ``FLEETCRON_CONFIG``, else ``/etc/fleetcron/fleetcron.toml``
   when it exists; its keys are the field names (``timezone = "Europe/Berlin"``);
5. the default.

Invalid values and broken invariants stop the start with one clear message each, naming
where the value came from; secrets never show in those messages nor in ``config show``.
The sources behind 2. and 3. (and the secrets hidden from ``/proc``) are
:mod:`fleetcron.config_sources`.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from fleetcron.config_sources import ENV_PREFIX as ENV_PREFIX
from fleetcron.config_sources import MASK as MASK
from fleetcron.config_sources import SECRET_FIELDS as SECRET_FIELDS
from fleetcron.config_sources import SECRETS_FD_VARIABLE as SECRETS_FD_VARIABLE
from fleetcron.config_sources import InheritedSecretSource as InheritedSecretSource
from fleetcron.config_sources import SecretFileSource as SecretFileSource
from fleetcron.config_sources import TomlFileSource as TomlFileSource
from fleetcron.config_sources import env_variable as env_variable
from fleetcron.config_sources import file_variable as file_variable
from fleetcron.config_sources import hide_secret_environment as hide_secret_environment
from fleetcron.config_sources import origin_name as origin_name
from fleetcron.core.ownership import DEFAULT_KILL_GRACE_S, self_fence_after
from fleetcron.core.topology import Topology
from fleetcron.core.validation import COMMAND_MAX_CHARS
from fleetcron.errors import ConfigError

CONFIG_VARIABLE = ENV_PREFIX + "CONFIG"
DEFAULT_CONFIG_FILE = Path("/etc/fleetcron/fleetcron.toml")


def default_data_dir() -> Path:
    """Per-user data directory: ``$XDG_DATA_HOME/fleetcron`` or ``~/.local/share/fleetcron``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "fleetcron"


class Settings(BaseSettings):
    """Effective configuration of one fleetcron process."""

    # An empty variable counts as unset (systemd and compose files often leave VAR= lines).
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, env_ignore_empty=True
    )

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
        default=512,
        ge=1,
        le=COMMAND_MAX_CHARS,
        description="Longest command a job may hold, in characters.",
    )
    job_timeout_s: int = Field(
        default=300, ge=1, le=7 * 24 * 3600, description="Default per-run timeout of new jobs."
    )
    ssh_connect_timeout_s: float = Field(
        default=15.0, gt=0, le=300, description="Timeout to connect and verify an SSH target."
    )
    probe_interval_s: float = Field(
        default=300.0,
        ge=0,
        le=86400,
        description="Seconds between two host probes of one SSH target (a fresh connection: "
        "TCP, SSH handshake with the pinned host key, login; each target at a stable offset "
        "inside the interval); 0 turns the probe off.",
    )
    probe_timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Timeout of one host probe."
    )
    probe_concurrency: int = Field(
        default=50, ge=1, le=1000, description="Host probes open at once, at most."
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
        default=1000,
        ge=1,
        le=10_000,
        description="SSH runs in flight across all targets (an SSH run in flight is a session "
        "on a pooled connection: about 16 KB of bounded output at most; at 1,000 a `sleep 1` "
        "on 5,000 targets 100 ms away is recorded in about 9 s, see docs/benchmarks.md).",
    )
    ssh_per_target_concurrency: int = Field(
        default=4, ge=1, le=1000, description="SSH runs in flight on one target."
    )
    # SSH connection pool and handshakes (docs/benchmarks.md, "Fleet scale").
    ssh_max_connections: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="SSH connections the pool keeps open at most (one per target in use; "
        "when full, the least recently used idle one is closed). Keep it at or above the "
        "number of SSH targets, or every fire reopens connections; an idle connection "
        "costs about 30 KB. The open-file limit is raised to hold it.",
    )
    ssh_idle_timeout_s: float = Field(
        default=300.0,
        gt=0,
        le=24 * 3600,
        description="A pooled SSH connection unused this long is closed.",
    )
    ssh_keepalive_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="A pooled SSH connection (and a jump host's) that received nothing this "
        "long sends a keepalive, and is closed after 3 unanswered ones, so a silent peer is "
        "noticed; 0: none. A connection used every minute sends one between two runs at "
        "30 s: a longer interval saves that CPU on a large fleet, a shorter one keeps NAT "
        "mappings with short idle timeouts open.",
    )
    ssh_jump_max_connections: int = Field(
        default=8,
        ge=1,
        le=1000,
        description="SSH connections kept open at most to one jump host: every target behind "
        "it is reached over one of them (a channel each), so the bastion sees this many "
        "logins, not one per target (its MaxStartups); each is one sshd process there, "
        'which bounds its throughput (docs/benchmarks.md, "Jump hosts").',
    )
    ssh_jump_targets_per_connection: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="Targets one jump host connection carries before another one is opened "
        "(up to ssh_jump_max_connections; past it, the least loaded one takes more).",
    )
    ssh_max_connecting: int = Field(
        default=128,
        ge=1,
        le=10_000,
        description="SSH handshakes in flight at once across all targets (a handshake is "
        "about six round trips; each also holds one of the ssh_max_concurrency slots).",
    )
    ssh_connect_backoff_s: float = Field(
        default=0.2,
        gt=0,
        le=60,
        description="First wait before retrying a handshake the server dropped (sshd "
        "MaxStartups); doubled on each retry, with jitter, for as long as the run's budget "
        "lasts.",
    )
    ssh_connect_backoff_max_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Longest wait between two tries of a dropped SSH handshake.",
    )
    local_max_concurrency: int = Field(
        default=64, ge=1, le=10_000, description="Local runs in flight at once."
    )
    allow_local_targets: bool = Field(
        default=False,
        description="Allow targets of kind local (commands run on the scheduler host itself, "
        "which holds the database and the master key). Off: adding one is refused and the "
        "slots of existing ones are skipped. Only an admin may add or convert to one.",
    )
    local_run_as: str | None = Field(
        default=None,
        min_length=1,
        description="User that commands of local targets run as (privileges are dropped "
        "before the command starts; the scheduler must be root to switch users). Unset: the "
        "scheduler's own user, refused for root unless local_allow_root is set.",
    )
    local_allow_root: bool = Field(
        default=False,
        description="Let local commands run as root when the scheduler runs as root and "
        "local_run_as is unset. Off: such runs fail with an error naming these settings.",
    )
    local_job_role: str = Field(
        default="admin",
        pattern="^(operator|admin)$",
        description="Least role that may write a command onto a local target while local "
        "commands run with the scheduler's own privileges (local_run_as unset or the "
        "scheduler's user): such a command can read the database and the master key. With "
        "an unprivileged local_run_as, operators may schedule there as anywhere.",
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
    retention_success_days: int | None = Field(
        default=None,
        ge=1,
        le=100 * 365,
        description="Successful runs older than this many days are pruned; unset: "
        "retention_days. A job's keep_successes_days overrides it.",
    )
    retention_failure_days: int | None = Field(
        default=None,
        ge=1,
        le=100 * 365,
        description="Failed runs (failed, timed out, connect error, interrupted) older than "
        "this many days are pruned; unset: retention_days. A job's keep_failures_days "
        "overrides it.",
    )
    retention_keep_last: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="The newest this many runs of each job on each target are kept whatever "
        "their age; 0: none kept for that reason.",
    )
    audit_retention_days: int | None = Field(
        default=None, ge=1, description="Audit events older than this are pruned; unset: forever."
    )
    incident_retention_days: int = Field(
        default=90,
        ge=1,
        le=100 * 365,
        description="Incidents resolved longer ago than this many days are pruned, with "
        "their targets and what each channel was told of them.",
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
    max_body_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        le=1 << 30,
        description="Largest request body the web server reads; larger ones get 413.",
    )
    trusted_proxies: str = Field(
        default="",
        description="Addresses or CIDRs of reverse proxies whose X-Forwarded-For, "
        "X-Forwarded-Proto and Forwarded headers are believed, comma-separated "
        "(e.g. 127.0.0.1,10.0.0.0/8); unset: none.",
    )
    cookie_secure: bool | None = Field(
        default=None,
        description="Send the session cookie with Secure (and the __Host- prefix); unset: "
        "when the request came over https (as a trusted proxy reports it).",
    )
    login_hash_concurrency: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Password checks (argon2, 64 MiB each) running at once; more logins wait.",
    )
    ssh_refuse_private_hosts: bool = Field(
        default=False,
        description="Refuse SSH targets whose host is, or resolves to, a loopback, "
        "link-local (cloud metadata), private or other non-public address (checked when "
        "the target is paired, for every hop of its jump host chain too).",
    )
    webhook_refuse_private: bool = Field(
        default=False,
        description="Refuse webhook deliveries to loopback, link-local, private and other "
        "non-public addresses (checked when the message is sent).",
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
    topology: Topology = Field(
        default=Topology.SHARED_DATABASE,
        description="How the nodes of a cluster share their data: `shared-database` (every "
        "node on one PostgreSQL) or `replicated-pair` (two nodes, each on its own PostgreSQL "
        "16+, kept in sync by logical replication; see docs/high-availability.md).",
    )
    replication_peer_dsn: str | None = Field(
        default=None,
        description="replicated-pair: libpq connection string of the peer's database as this "
        "node's PostgreSQL server reaches it (used by its subscription).",
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
    shards: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="PostgreSQL: the number of shards the fleet's work is divided into, fixed "
        "when the installation is created (first `init` or start; default 64; see "
        "docs/high-availability.md#shards). A later start with another value is refused. "
        "SQLite and a replicated pair: always 1.",
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
    shard_placement: Literal["owner", "members"] = Field(
        default="owner",
        description="Shared PostgreSQL: `owner`, one node owns every shard and the others "
        "stand by (failover with FLEETCRON_LEASE_S); `members`, every live approved node "
        "takes its share of the shards (weighted by its --workers), moved between nodes by "
        "draining handoffs (needs FLEETCRON_LEASE_S; docs/high-availability.md#shards).",
    )
    active_cleanup: bool = Field(
        default=True,
        description="After a failover or forced takeover, the new owner raises the "
        "highest-generation mark on the SSH targets whose assignments wait for the previous "
        "owner's claims, kills the older generations' commands there, and starts those "
        "assignments without waiting for the claim deadlines. Off: always wait.",
    )
    node_name: str | None = Field(
        default=None, description="Name this node records on runs; default: the hostname."
    )
    # Single sign-on (docs/access.md). Each *_role_mapping is a list of entries
    # {group = "...", role = "viewer|operator|admin"} (core/sso_mapping.py).
    oidc_issuer: str | None = Field(
        default=None,
        description="OpenID Connect issuer URL (its /.well-known/openid-configuration is "
        "read); unset: no OIDC log-in. https, or http on a loopback address only.",
    )
    oidc_client_id: str | None = Field(
        default=None, description="The client id fleetcron is registered under at the issuer."
    )
    oidc_client_secret: SecretStr | None = Field(
        default=None,
        description="The client's secret (client_secret_basic); unset: a public client "
        "(PKCE only).",
    )
    oidc_redirect_uri: str | None = Field(
        default=None,
        description="The callback URL registered at the issuer, as browsers reach fleetcron: "
        "https://<host>/login/oidc/callback.",
    )
    oidc_scopes: str = Field(
        default="openid profile email groups",
        description="Scopes asked for, space-separated (openid is always asked).",
    )
    oidc_groups_claim: str = Field(
        default="groups",
        min_length=1,
        description="The ID token claim holding the user's groups or roles (a list, or one "
        "string); a dotted path reaches into an object, e.g. realm_access.roles.",
    )
    oidc_username_claim: str = Field(
        default="preferred_username",
        min_length=1,
        description="The ID token claim that names the fleetcron account made for a user.",
    )
    oidc_label: str = Field(
        default="single sign-on",
        min_length=1,
        max_length=64,
        description="The provider's name on the log-in page's button and in the audit log.",
    )
    oidc_role_mapping: list[dict[str, Any]] = Field(
        default_factory=list,
        description='Groups to roles: [{group = "ops", role = "operator"}, ...]; the '
        "highest role of a user's groups counts; a user none of whose groups is listed is "
        "refused.",
    )
    oidc_timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Timeout of each request to the issuer."
    )
    ldap_url: str | None = Field(
        default=None,
        description="The directory's URL: ldaps://host[:636], or ldap://host[:389] which is "
        "always upgraded with StartTLS (no password crosses the network in clear); unset: no "
        "LDAP log-in.",
    )
    ldap_ca_file: Path | None = Field(
        default=None,
        description="CA certificates (PEM) that verify the directory's certificate; unset: "
        "the system's.",
    )
    ldap_bind_dn: str | None = Field(
        default=None,
        description="The DN fleetcron binds as to search for users and groups; unset: an "
        "anonymous search.",
    )
    ldap_bind_password: SecretStr | None = Field(
        default=None, description="The password of ldap_bind_dn."
    )
    ldap_user_base: str = Field(
        default="", description="Where users are searched (the subtree's DN)."
    )
    ldap_user_filter: str = Field(
        default="(&(objectClass=inetOrgPerson)(uid={username}))",
        description="The filter that finds one user; {username} is the name typed, escaped. "
        "Leave disabled accounts out here (e.g. Active Directory's "
        "(!(userAccountControl:1.2.840.113556.1.4.803:=2))): a user it does not find cannot "
        "log in.",
    )
    ldap_username_attribute: str = Field(
        default="uid", min_length=1, description="The attribute that names the account."
    )
    ldap_group_base: str = Field(
        default="", description="Where groups are searched; empty: ldap_user_base."
    )
    ldap_group_filter: str = Field(
        default="(|(&(objectClass=groupOfNames)(member={dn}))"
        "(&(objectClass=groupOfUniqueNames)(uniqueMember={dn}))"
        "(&(objectClass=posixGroup)(memberUid={username})))",
        description="The filter of the user's groups; {dn} is the user's DN, {username} the "
        "name, both escaped. A group counts by its cn and by its DN in the mapping.",
    )
    ldap_label: str = Field(
        default="LDAP",
        min_length=1,
        max_length=64,
        description="The directory's name in messages and in the audit log.",
    )
    ldap_role_mapping: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Groups to roles, as oidc_role_mapping: "
        '[{group = "ops", role = "operator"}, ...].',
    )
    ldap_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="Timeout of connecting to and of each answer of the directory.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Highest first: arguments, environment, ``*_FILE`` secrets, the TOML file."""
        given = init_settings.init_kwargs if isinstance(init_settings, InitSettingsSource) else {}
        sources: list[PydanticBaseSettingsSource] = [
            init_settings,
            InheritedSecretSource(settings_cls),
            env_settings,
            SecretFileSource(settings_cls, given=given.keys()),
        ]
        path = config_file()
        if path is not None:
            sources.append(TomlFileSource(settings_cls, path))
        return tuple(sources)

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

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxy_networks(cls, value: Any) -> Any:
        import ipaddress

        if isinstance(value, list | tuple):
            value = ",".join(str(item) for item in value)
        if not isinstance(value, str):
            return value
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an IP address or CIDR (e.g. 127.0.0.1, 10.0.0.0/8)"
                ) from None
        return value

    @cached_property
    def trusted_proxy_networks(self) -> tuple[Any, ...]:
        """``trusted_proxies`` parsed: a tuple of ``ipaddress`` networks."""
        import ipaddress

        parts = (part.strip() for part in self.trusted_proxies.split(","))
        return tuple(ipaddress.ip_network(part, strict=False) for part in parts if part)

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Invariants between settings, each broken one named with what to change."""
        self._check_cluster()
        self._check_lease()
        self._check_limits()
        self._check_oidc()
        return self

    def _check_oidc(self) -> None:
        """OIDC needs its client and callback; LDAP an ldap(s) URL; the mappings' entries
        are checked here."""
        from fleetcron.core.sso_mapping import parse_mapping
        from fleetcron.errors import InvalidInput

        try:
            parse_mapping(self.oidc_role_mapping, field="oidc_role_mapping")
            parse_mapping(self.ldap_role_mapping, field="ldap_role_mapping")
        except InvalidInput as bad:
            raise ValueError(bad.message) from None
        if self.ldap_url is not None and not self.ldap_url.startswith(("ldaps://", "ldap://")):
            raise ValueError(
                f"FLEETCRON_LDAP_URL: {self.ldap_url!r} is not an ldaps:// or ldap:// URL"
            )
        if self.oidc_issuer is None:
            return
        for name in ("oidc_client_id", "oidc_redirect_uri"):
            if not getattr(self, name):
                raise ValueError(
                    f"FLEETCRON_OIDC_ISSUER is set: set {env_variable(name)} too (docs/access.md)"
                )

    def _check_cluster(self) -> None:
        """Cluster mode and the replicated pair: a shared database, an endpoint, no lease."""
        if self.shards not in (None, 1) and (
            self.is_sqlite or self.topology is Topology.REPLICATED_PAIR
        ):
            raise ValueError(
                f"FLEETCRON_SHARDS ({self.shards}) needs one shared PostgreSQL database: "
                "SQLite and a replicated pair have one shard; unset it or set it to 1"
            )
        if self.cluster:
            if self.is_sqlite:
                raise ValueError(
                    "cluster mode needs PostgreSQL shared by every node: set "
                    "FLEETCRON_DATABASE_URL=postgresql+psycopg://..."
                )
            if not self.endpoint:
                raise ValueError("cluster mode needs FLEETCRON_ENDPOINT (this node's base URL)")
        if self.topology is Topology.REPLICATED_PAIR and not self.cluster:
            raise ValueError(
                "FLEETCRON_TOPOLOGY=replicated-pair is a cluster topology: set "
                "FLEETCRON_CLUSTER=true too"
            )
        if self.shard_placement == "members" and (
            not self.cluster or self.topology is Topology.REPLICATED_PAIR or self.lease_s is None
        ):
            raise ValueError(
                "FLEETCRON_SHARD_PLACEMENT=members shares the shards between the nodes of a "
                "cluster on one shared PostgreSQL, by their leases: set FLEETCRON_CLUSTER=true "
                "and FLEETCRON_LEASE_S, or unset it (a replicated pair has one owner)"
            )
        if self.topology is Topology.REPLICATED_PAIR and self.lease_s is not None:
            raise ValueError(
                "FLEETCRON_LEASE_S (automatic failover) needs one shared database: in a "
                "replicated pair a cut link between the nodes would let both take the jobs. "
                "Unset it; after fencing the old owner use `fleetcron cluster takeover`"
            )

    def _check_lease(self) -> None:
        """The lease is renewed well before it expires and before the owner fences itself."""
        if self.lease_s is not None and self.lease_renew_s >= self.lease_s:
            raise ValueError(
                f"FLEETCRON_LEASE_RENEW_S ({self.lease_renew_s:g}) must be shorter than "
                f"FLEETCRON_LEASE_S ({self.lease_s:g})"
            )
        if self.lease_s is not None:
            fence = self_fence_after(self.lease_s)
            if self.lease_renew_s >= fence:
                raise ValueError(
                    f"FLEETCRON_LEASE_RENEW_S ({self.lease_renew_s:g}) must be shorter than "
                    f"{fence:g} s: an owner that has not renewed its lease by then kills its "
                    f"runs (FLEETCRON_LEASE_S {self.lease_s:g} minus the self-fencing margin)"
                )

    def _check_limits(self) -> None:
        """SSH pool and backoff bounds, and the claim margin beyond the kill grace."""
        if self.ssh_max_connections < self.ssh_max_concurrency:
            raise ValueError(
                f"FLEETCRON_SSH_MAX_CONNECTIONS ({self.ssh_max_connections}) must be at least "
                f"FLEETCRON_SSH_MAX_CONCURRENCY ({self.ssh_max_concurrency}): each SSH run in "
                "flight holds a pooled connection"
            )
        if self.ssh_connect_backoff_max_s < self.ssh_connect_backoff_s:
            raise ValueError(
                f"FLEETCRON_SSH_CONNECT_BACKOFF_MAX_S ({self.ssh_connect_backoff_max_s:g}) must "
                f"be at least FLEETCRON_SSH_CONNECT_BACKOFF_S ({self.ssh_connect_backoff_s:g})"
            )
        if self.claim_margin_s <= DEFAULT_KILL_GRACE_S:
            raise ValueError(
                f"FLEETCRON_CLAIM_MARGIN_S ({self.claim_margin_s:g}) must be longer than the "
                f"{DEFAULT_KILL_GRACE_S:g} s between SIGTERM and SIGKILL at a run's timeout"
            )

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
    """Read the settings (arguments, environment, ``*_FILE`` secrets, TOML file); raise
    ConfigError with one line per bad value, naming where it came from."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        origins = setting_origins(**overrides)
        problems: dict[str, str] = {}
        for error in exc.errors():
            loc = error["loc"]
            field = str(loc[0]) if loc else ""
            if field not in problems:
                problems[field] = _problem(error, field, origins.get(field, "default"))
        lines = list(problems.values())
        if len(lines) == 1:
            raise ConfigError(f"invalid configuration: {lines[0]}") from None
        raise ConfigError("invalid configuration:\n" + "\n".join(f"  {x}" for x in lines)) from None


def _problem(error: Any, field: str, origin: str) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if not field:
        # An invariant between settings: its message names the variables to change.
        return message
    shown = MASK if field in SECRET_FIELDS else repr(error.get("input"))
    return f"{origin_name(field, origin)}: {message} (got {shown})"


def config_file() -> Path | None:
    """The TOML file to read: ``$FLEETCRON_CONFIG`` (which must exist), else the default
    path when it exists, else none."""
    named = os.environ.get(CONFIG_VARIABLE)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"{CONFIG_VARIABLE}: {path} does not exist or is not a file")
        return path
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def setting_origins(**overrides: Any) -> dict[str, str]:
    """Where each setting's value comes from: ``argument``, ``env:FLEETCRON_X``,
    ``file:FLEETCRON_X_FILE``, ``toml:<path>`` or ``default``.

    Asks the same sources, in the same order, as :class:`Settings` does.
    """
    path = config_file()
    layers: list[tuple[str, dict[str, Any]]] = [
        ("argument", dict(overrides)),
        ("env", EnvSettingsSource(Settings)()),
        ("file", SecretFileSource(Settings, given=overrides.keys())()),
    ]
    if path is not None:
        toml = {k.lower(): v for k, v in TomlFileSource(Settings, path)().items()}
        layers.append((f"toml:{path}", toml))
    origins: dict[str, str] = {}
    for field in Settings.model_fields:
        origins[field] = "default"
        for kind, values in layers:
            if field in values:
                if kind == "env":
                    origins[field] = f"env:{env_variable(field)}"
                elif kind == "file":
                    origins[field] = f"file:{file_variable(field)}"
                else:
                    origins[field] = kind
                break
    return origins
