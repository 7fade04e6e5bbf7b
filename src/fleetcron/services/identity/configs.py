"""The single sign-on settings as the flows take them.

Kept apart from :mod:`~fleetcron.services.identity.oidc` and
:mod:`~fleetcron.services.identity.ldap` so that the web application imports their
libraries (httpx, joserfc, ldap3) only once a provider is configured and used.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetcron.app import App
from fleetcron.config import Settings
from fleetcron.core.sso_mapping import GroupRole, parse_mapping


@dataclass(frozen=True)
class OidcConfig:
    """The OIDC settings, checked (``Settings`` checks them at start)."""

    issuer: str
    client_id: str
    client_secret: str | None
    redirect_uri: str
    scopes: str
    groups_claim: str
    username_claim: str
    label: str
    mapping: tuple[GroupRole, ...]
    timeout_s: float

    @classmethod
    def of(cls, settings: Settings) -> OidcConfig | None:
        """The configuration, or None when no issuer is set (no OIDC log-in)."""
        if not settings.oidc_issuer:
            return None
        secret = settings.oidc_client_secret
        scopes = settings.oidc_scopes.split()
        return cls(
            issuer=settings.oidc_issuer,
            client_id=settings.oidc_client_id or "",
            client_secret=secret.get_secret_value() if secret else None,
            redirect_uri=settings.oidc_redirect_uri or "",
            scopes=" ".join(["openid", *(s for s in scopes if s != "openid")]),
            groups_claim=settings.oidc_groups_claim,
            username_claim=settings.oidc_username_claim,
            label=settings.oidc_label,
            mapping=parse_mapping(settings.oidc_role_mapping, field="oidc_role_mapping"),
            timeout_s=settings.oidc_timeout_s,
        )

    def __repr__(self) -> str:
        return f"OidcConfig(issuer={self.issuer!r}, client_id={self.client_id!r})"


@dataclass(frozen=True)
class LdapConfig:
    """The LDAP settings, checked (``Settings`` checks them at start)."""

    url: str
    ca_file: str | None
    bind_dn: str | None
    bind_password: str | None
    user_base: str
    user_filter: str
    username_attribute: str
    group_base: str
    group_filter: str
    label: str
    mapping: tuple[GroupRole, ...]
    timeout_s: float

    @classmethod
    def of(cls, settings: Settings) -> LdapConfig | None:
        if not settings.ldap_url:
            return None
        password = settings.ldap_bind_password
        return cls(
            url=settings.ldap_url,
            ca_file=str(settings.ldap_ca_file) if settings.ldap_ca_file else None,
            bind_dn=settings.ldap_bind_dn,
            bind_password=password.get_secret_value() if password else None,
            user_base=settings.ldap_user_base,
            user_filter=settings.ldap_user_filter,
            username_attribute=settings.ldap_username_attribute,
            group_base=settings.ldap_group_base or settings.ldap_user_base,
            group_filter=settings.ldap_group_filter,
            label=settings.ldap_label,
            mapping=parse_mapping(settings.ldap_role_mapping, field="ldap_role_mapping"),
            timeout_s=settings.ldap_timeout_s,
        )

    def __repr__(self) -> str:
        return f"LdapConfig(url={self.url!r}, bind_dn={self.bind_dn!r})"

    @property
    def provider(self) -> str:
        """The namespace of this directory's subjects (its URL, as ``ldap:<url>``)."""
        return f"ldap:{self.url}"


def warn_unknown_projects(app: App, oidc: OidcConfig | None, ldap: LdapConfig | None) -> None:
    """Log, for the admin, each mapping entry naming a project that does not exist (it is
    ignored at log-ins until the project is added): the web server's start asks this."""
    from fleetcron.services.identity.project_roles import Provider, check_projects

    for config, field in ((oidc, "oidc_role_mapping"), (ldap, "ldap_role_mapping")):
        if config is not None:
            check_projects(app, config.mapping, Provider(config.label, field))
