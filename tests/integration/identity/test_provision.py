"""Accounts from an identity provider (services/identity/provision.py): made on the first
log-in, their role following the provider's groups at every log-in, found by subject (not
by name), and refused, with their sessions ended, once no group maps to a role."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.core.sso_mapping import parse_mapping
from fleetcron.errors import AuthenticationFailed, InvalidInput, SsoRefused
from fleetcron.services.accounts.sessions import open_session, resolve
from fleetcron.services.accounts.users import add_user, authenticate, set_password
from fleetcron.services.audit import AuditFilter, list_event_views
from fleetcron.services.identity.provision import Identity, provision
from fleetcron.store.schema import User, WebSession

MAPPING = parse_mapping(
    [{"group": "ops", "role": "operator"}, {"group": "admins", "role": "admin"}], field="m"
)
ISSUER = "https://id.example.org"


def olga(*groups: str, name: str = "olga") -> Identity:
    return Identity(ISSUER, "sub-olga", name, tuple(groups), "Example IdP")


def test_the_role_follows_the_groups_at_each_log_in(app: App, admin: Actor) -> None:
    assert provision(app, olga("ops"), MAPPING) == Actor("olga", "operator")
    assert provision(app, olga("ops", "admins"), MAPPING) == Actor("olga", "admin")

    events, _ = list_event_views(app, admin, AuditFilter(action="user.role"))
    assert events[0].detail == {
        "user": "olga",
        "role": "admin",
        "was": "operator",
        "provider": "Example IdP",
    }


def test_an_account_is_found_by_subject_so_a_rename_at_the_provider_keeps_it(app: App) -> None:
    provision(app, olga("ops"), MAPPING)

    assert provision(app, olga("ops", name="olga.k"), MAPPING) == Actor("olga", "operator")
    with app.db.read() as session:
        assert session.scalar(select(func.count(User.id)).where(User.subject == "sub-olga")) == 1


def test_an_account_whose_groups_no_longer_map_is_refused_and_its_sessions_end(
    app: App,
) -> None:
    actor = provision(app, olga("ops"), MAPPING)
    token, _ = open_session(app, actor, {"address": "127.0.0.1"})
    assert resolve(app, token) is not None  # negative control: the session works

    with pytest.raises(SsoRefused) as refused:
        provision(app, olga("staff"), MAPPING)

    assert refused.value.reason == "no_role"
    assert resolve(app, token) is None
    with app.db.read() as session:
        assert session.scalar(select(func.count(WebSession.id))) == 0


def test_a_name_held_by_a_local_account_is_refused(app: App) -> None:
    with pytest.raises(SsoRefused) as refused:
        provision(app, Identity(ISSUER, "sub-x", "olivia", ("admins",), "Example IdP"), MAPPING)

    assert refused.value.reason == "name_taken"
    with app.db.read() as session:
        olivia = session.scalars(select(User).where(User.name == "olivia")).one()
        assert (olivia.role, olivia.identity_provider) == ("operator", None)


def test_a_name_fleetcron_cannot_take_is_refused(app: App) -> None:
    with pytest.raises(SsoRefused) as refused:
        provision(app, olga("ops", name="olga@example.org "), MAPPING)
    assert refused.value.reason == "bad_name"


def test_an_admin_cannot_give_an_account_of_the_provider_a_local_password(
    app: App, admin: Actor
) -> None:
    """A password would log the person in past the directory (its groups, its disabling);
    a local account's password is still set (the control)."""
    provision(app, olga("ops"), MAPPING)
    add_user(app, admin, "local", "a-long-password-1", "viewer")

    with pytest.raises(InvalidInput) as refused:
        set_password(app, admin, "olga", "a-long-password-2")

    assert refused.value.field == "user"
    assert f"olga signs in through {ISSUER}" in str(refused.value)
    with pytest.raises(AuthenticationFailed):
        authenticate(app, "olga", "a-long-password-2")
    set_password(app, admin, "local", "a-long-password-3")
    assert authenticate(app, "local", "a-long-password-3") == Actor("local", "viewer")
