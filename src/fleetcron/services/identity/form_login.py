"""The log-in form's check: a local account's password, or the directory's.

Apart from :mod:`~fleetcron.services.identity.configs` (which the flows import for their
settings) so that only this check reaches the directory module, and only when a
directory is configured and the name is not a local account's: ldap3 is imported then.
"""

from __future__ import annotations

from sqlalchemy import select

from fleetcron.app import App
from fleetcron.services.accounts import sessions
from fleetcron.services.accounts.sessions import LoggedIn
from fleetcron.services.identity.configs import LdapConfig
from fleetcron.store.schema import User


def form_login(
    app: App, config: LdapConfig | None, name: str, password: str, address: str
) -> tuple[str, LoggedIn]:
    """The log-in form's check: a local account's password (always, so the local admin
    is the break-glass way in), else the directory's when one is configured."""
    if config is None or _is_local(app, name):
        return sessions.login(app, name, password, address)
    from fleetcron.services.identity.ldap import login

    return login(app, config, name, password, address)


def _is_local(app: App, name: str) -> bool:
    with app.db.read() as session:
        provider = session.execute(select(User.identity_provider).where(User.name == name)).first()
    return provider is not None and provider[0] is None
