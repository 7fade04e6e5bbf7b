"""Identity: who someone is, as an identity provider says (single sign-on).

Owns the OIDC log-in (``oidc``: discovery, the authorization code flow with PKCE, the ID
token's checks) and the accounts it makes (``provision``: groups to a role through
:mod:`fleetcron.core.sso_mapping`, the account created on first log-in and refused when no
group maps). Opening the browser session is ``accounts``' (below it in the order of
docs/architecture.md).
"""
