"""Log-in against an LDAP directory: bind and search, over LDAPS or StartTLS only.

The log-in form's name and password are checked here when the name is not a local
account's (a local account, the break-glass admin above all, always logs in with its own
password, whatever the directory says):

1. bind as ``ldap_bind_dn`` (or anonymously) and search ``ldap_user_base`` with
   ``ldap_user_filter`` for exactly one entry (the name is escaped into the filter; a
   disabled account is one the filter leaves out);
2. bind as that entry's DN with the password typed (an empty password is refused first:
   LDAP takes a bind with a DN and no password as an anonymous bind, and succeeds);
3. search the user's groups (``ldap_group_filter``); each counts by its ``cn`` and DN in
   ``ldap_role_mapping`` (:mod:`fleetcron.core.sso_mapping`).

A user the directory no longer finds is refused like a wrong password, and any session of
their account is ended. A directory that does not answer within ``ldap_timeout_s`` is a
clear message, never a 500.

Library: ldap3, pure Python (it installs with pip anywhere: python-ldap needs OpenLDAP's
headers and a compiler), with a timeout per connection and per answer, StartTLS and LDAPS,
and the escaping of filter values. Its own check of the server's host name calls
``ssl.match_hostname``, deprecated since Python 3.7 and removed in 3.12, so the TLS layer
here is the standard library's ``SSLContext`` with ``check_hostname`` on
(:class:`_StdlibTls`).
"""

from __future__ import annotations

import contextlib
import math
import socket
import ssl
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import ldap3
from ldap3.core.exceptions import (
    LDAPException,
    LDAPInvalidCredentialsResult,
    LDAPSocketOpenError,
    LDAPSocketReceiveError,
)
from ldap3.utils.conv import escape_filter_chars
from sqlalchemy import delete, select

from fleetcron.app import App
from fleetcron.errors import AuthenticationFailed, FleetcronError, SsoRefused
from fleetcron.services.accounts.sessions import ANONYMOUS, LoggedIn, open_session
from fleetcron.services.audit import AuditNote, record
from fleetcron.services.identity.configs import LdapConfig
from fleetcron.services.identity.provision import Identity, provision, refusal
from fleetcron.store.schema import User, WebSession
from fleetcron.tls import verifying_context

WRONG = "unknown user or wrong password"
#: The groups read of one user at most.
MAX_GROUPS = 500


class _StdlibTls(ldap3.Tls):  # type: ignore[misc]
    """ldap3's TLS with the standard library's verification: the CA, then the host name
    during the handshake (``check_hostname``)."""

    def __init__(self, context: ssl.SSLContext, host: str) -> None:
        super().__init__(validate=ssl.CERT_REQUIRED)
        self._context = context
        self._host = host

    def wrap_socket(self, connection: Any, do_handshake: bool = False) -> None:
        # Each request waits for its answer: with Nagle's algorithm on, a log-in against a
        # directory on loopback took about 100 ms, nearly all of it waiting; without, about
        # 10 ms (docs/benchmarks.md). The directory is reached over TCP only (ldap, ldaps).
        connection.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.socket = self._context.wrap_socket(
            connection.socket,
            server_side=False,
            do_handshake_on_connect=do_handshake,
            server_hostname=self._host,
        )


def _server(config: LdapConfig) -> ldap3.Server:
    parts = urlsplit(config.url)
    secure = parts.scheme == "ldaps"
    host = parts.hostname or ""
    context = verifying_context(config.ca_file)  # kept per CA file (fleetcron.tls)
    return ldap3.Server(
        host,
        port=parts.port or (636 if secure else 389),
        use_ssl=secure,
        tls=_StdlibTls(context, host),
        connect_timeout=config.timeout_s,
        get_info=ldap3.NONE,
    )


def _unanswered(config: LdapConfig, error: Exception) -> SsoRefused:
    return SsoRefused(
        f"The directory ({config.label}) did not answer. Try again later; if it lasts, tell "
        "an administrator. (Local accounts can still log in.)",
        reason="ldap_unreachable",
        detail=f"{config.url}: {type(error).__name__}: {error}",
    )


def _tls_failed(error: Exception) -> bool:
    """Whether ``error`` is TLS refusing the directory (ldap3 wraps the ``SSLError``)."""
    text = str(error).lower()
    return isinstance(error, ssl.SSLError) or "certificate" in text or "ssl" in text


def _untrusted(config: LdapConfig, error: Exception) -> SsoRefused:
    return SsoRefused(
        f"The directory's ({config.label}) certificate could not be verified, so no "
        "password was sent to it. Tell an administrator. (Local accounts can still log in.)",
        reason="ldap_tls",
        detail=f"{config.url}: {type(error).__name__}: {error} (check ldap_ca_file and the "
        "host name in ldap_url)",
    )


@contextmanager
def _bound(config: LdapConfig, dn: str | None, password: str | None) -> Iterator[Any]:
    """A connection bound as ``dn`` (anonymous when None), over TLS, closed after use.
    A wrong password raises AuthenticationFailed; a silent directory, SsoRefused."""
    connection = ldap3.Connection(
        _server(config),
        user=dn,
        password=password,
        # whole seconds: ldap3 packs it into the socket's SO_RCVTIMEO as an integer
        receive_timeout=max(1, math.ceil(config.timeout_s)),
        raise_exceptions=True,
        auto_bind=ldap3.AUTO_BIND_NONE,
        read_only=True,
    )
    try:
        connection.open()
        if not config.url.startswith("ldaps://"):
            connection.start_tls()
        connection.bind()
        yield connection
    except LDAPInvalidCredentialsResult:
        raise AuthenticationFailed(WRONG) from None
    except (LDAPSocketOpenError, LDAPSocketReceiveError, ssl.SSLError, OSError) as exc:
        raise (_untrusted(config, exc) if _tls_failed(exc) else _unanswered(config, exc)) from None
    except FleetcronError:
        raise
    except (LDAPException, ValueError, TypeError, struct.error) as exc:
        raise SsoRefused(
            f"The directory ({config.label}) refused the log-in. Tell an administrator.",
            reason="ldap_error",
            detail=f"{config.url}: {type(exc).__name__}: {exc}",
        ) from None
    finally:
        # A connection TLS failed on may be half closed: unbinding it is best effort.
        with contextlib.suppress(LDAPException, OSError):
            connection.unbind()


def _values(entry: dict[str, Any], attribute: str) -> list[str]:
    value = entry.get("attributes", {}).get(attribute)
    if isinstance(value, list):
        return [str(v) for v in value]
    return [] if value in (None, "") else [str(value)]


def _find_user(config: LdapConfig, name: str) -> tuple[str, str] | None:
    """(DN, account name) of the one entry the user filter finds for ``name``, or None."""
    query = config.user_filter.replace("{username}", escape_filter_chars(name))
    with _bound(config, config.bind_dn, config.bind_password) as connection:
        connection.search(
            config.user_base,
            query,
            search_scope=ldap3.SUBTREE,
            attributes=[config.username_attribute],
            size_limit=2,
        )
        entries = [e for e in connection.response if e.get("type") == "searchResEntry"]
    if len(entries) != 1:
        return None
    names = _values(entries[0], config.username_attribute)
    return str(entries[0]["dn"]), (names[0] if names else name)


def _groups(connection: Any, config: LdapConfig, dn: str, name: str) -> tuple[str, ...]:
    query = config.group_filter.replace("{dn}", escape_filter_chars(dn)).replace(
        "{username}", escape_filter_chars(name)
    )
    connection.search(
        config.group_base,
        query,
        search_scope=ldap3.SUBTREE,
        attributes=["cn"],
        size_limit=MAX_GROUPS,
    )
    groups: list[str] = []
    for entry in connection.response:
        if entry.get("type") == "searchResEntry":
            groups.append(str(entry["dn"]))
            groups.extend(_values(entry, "cn"))
    return tuple(groups)


def _identity(app: App, config: LdapConfig, name: str, password: str) -> Identity:
    """Who the directory says ``name`` is, once their password is proven by a bind."""
    found = _find_user(config, name)
    if found is None:
        _end_sessions_of(app, config, name)
        raise AuthenticationFailed(WRONG)
    dn, account = found
    with _bound(config, dn, password) as connection:
        groups = _groups(connection, config, dn, account)
    return Identity(config.provider, dn, account, groups, config.label)


def _end_sessions_of(app: App, config: LdapConfig, name: str) -> None:
    """The directory no longer finds ``name`` (removed, or left out by the user filter as
    disabled): any session of their account from this directory ends."""
    with app.db.session() as session:
        user_id = session.scalar(
            select(User.id).where(User.name == name, User.identity_provider == config.provider)
        )
        if user_id is not None:
            session.execute(delete(WebSession).where(WebSession.user_id == user_id))


def _audit_failure(app: App, config: LdapConfig, name: str, address: str) -> None:
    detail = {"address": address, "user": name[:64], "provider": config.label}
    with app.db.session() as session:
        record(session, app, ANONYMOUS, AuditNote("login", detail=detail), success=False)


def login(
    app: App, config: LdapConfig, name: str, password: str, address: str
) -> tuple[str, LoggedIn]:
    """Check ``name`` and ``password`` against the directory and open a session (the
    account made or updated by its groups). A wrong password or unknown user raises
    AuthenticationFailed (audited); any other refusal, :class:`SsoRefused` (logged and
    audited)."""
    try:
        if not password:
            raise AuthenticationFailed(WRONG)
        identity = _identity(app, config, name, password)
        actor = provision(app, identity, config.mapping, field="ldap_role_mapping")
    except SsoRefused as refused:
        refusal(refused, provider=config.label, address=address, app=app)
        raise
    except AuthenticationFailed:
        _audit_failure(app, config, name, address)
        raise
    detail = {"address": address, "provider": config.label, "directory": config.url}
    detail["subject"] = identity.subject
    return open_session(app, actor, detail)
