"""Log-in through an OpenID Connect provider: the authorization code flow with PKCE.

1. :func:`begin`: read the issuer's discovery document, store a log-in under way (the
   SHA-256 of a random ``state``, a ``nonce``, a PKCE ``code_verifier``, the page to return
   to; ten minutes to live) and send the browser to the authorization endpoint.
2. :func:`finish`: the provider sends the browser back with ``code`` and ``state``. The
   stored log-in is deleted as it is read (``DELETE ... RETURNING``: a state, and the nonce
   that goes with it, are used once); it must not have expired and the browser must hold
   the same state in its cookie. The code is exchanged for tokens (with the verifier and
   the client's secret); the ID token's signature is checked against the issuer's JWKS, and
   its ``iss``, ``aud`` (and ``azp``), ``exp``, ``iat`` and ``nonce``. Its groups claim gives
   the role (:mod:`fleetcron.services.identity.provision`).

Every failure is an :class:`~fleetcron.errors.SsoRefused` with a stable reason: the user
sees its message, the admin a log line ``sso.<reason>`` and an audit event; no failure
logs anyone in.

Libraries: joserfc for the JOSE part (JWS signatures, JWK sets, JWT claims), and httpx for
the three requests (discovery, JWKS, token). joserfc is the JOSE core of Authlib, split out
by Authlib's author and maintained with it; it is fully typed (fleetcron's mypy strict
checks our use of it), validates the algorithms we allow only (never ``none``, never a MAC
with a public key) and covers the key types providers use (RSA, EC, OKP). Authlib's OAuth
client would add an untyped layer over httpx for two requests whose every parameter we
set here, and hide the checks this module has to state. httpx is the HTTP client the tests
and FastAPI's test client already use, with explicit timeouts.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    DecodeError,
    ExpiredTokenError,
    InvalidKeyIdError,
    JoseError,
    MissingKeyError,
    UnsupportedAlgorithmError,
)
from joserfc.jwk import KeySet
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from fleetcron.app import App
from fleetcron.errors import SsoRefused
from fleetcron.services.accounts.sessions import LoggedIn, open_session
from fleetcron.services.identity.configs import OidcConfig
from fleetcron.services.identity.provision import Identity, provision, refusal
from fleetcron.store.schema import SsoLogin

DISCOVERY_PATH = "/.well-known/openid-configuration"
#: How long a log-in may stay at the provider.
LOGIN_TTL = timedelta(minutes=10)
#: How long a discovery document and a key set are believed before they are read again.
CACHE_S = 3600.0
#: An ID token signed with a key the cached set lacks reads the set again (a rotation),
#: at most this often.
JWKS_REFRESH_S = 60.0
#: Clock skew allowed between fleetcron and the provider, in seconds.
LEEWAY_S = 60
#: The signature algorithms an ID token may use: asymmetric ones only.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
#: Log-ins under way (started, not back, not expired) at most.
MAX_PENDING = 10_000
#: The longest JSON document read from the provider.
MAX_DOCUMENT_BYTES = 1 << 20


@dataclass(frozen=True)
class Metadata:
    """What fleetcron uses of the issuer's discovery document."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None


@dataclass(frozen=True)
class Started:
    """A log-in sent to the provider: where the browser goes, and the state its cookie
    keeps."""

    url: str
    state: str


@dataclass(frozen=True)
class Callback:
    """The provider's answer as the browser brings it back."""

    state: str | None
    code: str | None
    error: str | None
    #: the state the browser's cookie holds (None: no cookie)
    browser_state: str | None


# --- the provider's documents ---------------------------------------------------------


class _Cache:
    """Discovery documents and key sets by issuer, each with when it was read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.metadata: dict[str, tuple[float, Metadata]] = {}
        self.keys: dict[str, tuple[float, KeySet]] = {}


_cache = _Cache()


def _unreachable(config: OidcConfig, what: str, error: object) -> SsoRefused:
    return SsoRefused(
        f"The identity provider ({config.label}) cannot be reached. Try again later; if it "
        "lasts, tell an administrator.",
        reason="issuer_unreachable",
        detail=f"{what}: {error}",
    )


def _misconfigured(config: OidcConfig, reason: str, detail: str) -> SsoRefused:
    return SsoRefused(
        f"The identity provider ({config.label}) does not answer as fleetcron is configured "
        "to expect. An administrator must fix the configuration (the server log says what).",
        reason=reason,
        detail=detail,
    )


def _get_json(config: OidcConfig, url: str, what: str) -> dict[str, Any]:
    try:
        response = httpx.get(url, timeout=config.timeout_s, headers={"accept": "application/json"})
    except httpx.HTTPError as exc:
        raise _unreachable(config, f"{what} {url}", exc) from None
    if response.status_code != 200:
        raise _unreachable(config, f"{what} {url}", f"HTTP {response.status_code}")
    return _json_object(config, response, f"{what} {url}")


def _json_object(config: OidcConfig, response: httpx.Response, what: str) -> dict[str, Any]:
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise _misconfigured(config, "issuer_invalid", f"{what}: larger than 1 MiB")
    try:
        document = response.json()
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise _misconfigured(config, "issuer_invalid", f"{what}: not a JSON object")
    return document


def check_issuer_url(url: str) -> str | None:
    """Why ``url`` cannot be an issuer (or an endpoint of one), or None: https, or http to
    a loopback address (a provider on the same host, as in tests)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname:
        try:
            if ip_address(parts.hostname).is_loopback:
                return None
        except ValueError:
            if parts.hostname == "localhost":
                return None
    return f"{url!r} is not an https URL (http only on a loopback address)"


def discover(config: OidcConfig) -> Metadata:
    """The issuer's metadata, from its discovery document (read at most once an hour)."""
    with _cache.lock:
        cached = _cache.metadata.get(config.issuer)
    if cached is not None and time.monotonic() - cached[0] < CACHE_S:
        return cached[1]
    problem = check_issuer_url(config.issuer)
    if problem:
        raise _misconfigured(config, "issuer_invalid", f"oidc_issuer: {problem}")
    url = config.issuer.rstrip("/") + DISCOVERY_PATH
    metadata = _metadata_of(config, _get_json(config, url, "discovery document"))
    with _cache.lock:
        _cache.metadata[config.issuer] = (time.monotonic(), metadata)
    return metadata


def _metadata_of(config: OidcConfig, document: Mapping[str, Any]) -> Metadata:
    if document.get("issuer") != config.issuer:
        raise _misconfigured(
            config,
            "issuer_mismatch",
            f"the discovery document names the issuer {str(document.get('issuer'))[:200]!r}, "
            f"not {config.issuer!r} (oidc_issuer must be the issuer exactly)",
        )
    endpoints: dict[str, str] = {}
    for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(name)
        problem = check_issuer_url(value) if isinstance(value, str) else "missing"
        if problem:
            raise _misconfigured(config, "issuer_invalid", f"discovery {name}: {problem}")
        endpoints[name] = str(value)
    end_session = document.get("end_session_endpoint")
    if not isinstance(end_session, str) or check_issuer_url(end_session):
        end_session = None
    return Metadata(issuer=config.issuer, end_session_endpoint=end_session, **endpoints)


def _key_set(config: OidcConfig, metadata: Metadata, *, refresh: bool) -> KeySet:
    """The issuer's keys: cached for an hour, read again when ``refresh`` (a token signed
    with a key we lack) and the last read is older than a minute."""
    with _cache.lock:
        cached = _cache.keys.get(config.issuer)
    if cached is not None:
        age = time.monotonic() - cached[0]
        if age < (JWKS_REFRESH_S if refresh else CACHE_S):
            return cached[1]
    document = _get_json(config, metadata.jwks_uri, "key set")
    try:
        keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise _misconfigured(config, "issuer_invalid", f"key set: {exc}") from None
    with _cache.lock:
        _cache.keys[config.issuer] = (time.monotonic(), keys)
    return keys


def forget_provider(issuer: str) -> None:
    """Drop what is cached of ``issuer`` (its discovery document and keys)."""
    with _cache.lock:
        _cache.metadata.pop(issuer, None)
        _cache.keys.pop(issuer, None)


# --- the flow ---------------------------------------------------------------------------


def _state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def begin(app: App, config: OidcConfig, next_path: str, address: str) -> Started:
    """Start a log-in: the provider's authorization URL with a new state, nonce and PKCE
    challenge (S256); the log-in is stored until it comes back or expires. A provider that
    cannot be read is logged and audited before :class:`SsoRefused` is raised."""
    try:
        return _begin(app, config, next_path)
    except SsoRefused as refused:
        refusal(refused, provider=config.label, address=address, app=app)
        raise


def _begin(app: App, config: OidcConfig, next_path: str) -> Started:
    metadata = discover(config)
    state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(64)
    now = app.now()
    with app.db.session() as session:
        _check_room(session, now)
        session.add(
            SsoLogin(
                state_hash=_state_hash(state),
                nonce=nonce,
                code_verifier=verifier,
                next_path=next_path,
                created_at=now,
                expires_at=now + LOGIN_TTL,
            )
        )
    query = {
        "response_type": "code",
        "client_id": config.client_id,
        "redirect_uri": config.redirect_uri,
        "scope": config.scopes,
        "state": state,
        "nonce": nonce,
        "code_challenge": _challenge(verifier),
        "code_challenge_method": "S256",
    }
    separator = "&" if "?" in metadata.authorization_endpoint else "?"
    return Started(metadata.authorization_endpoint + separator + urlencode(query), state)


def _check_room(session: Session, now: datetime) -> None:
    """Refuse a new log-in while :data:`MAX_PENDING` are under way (anyone may start one:
    the table must not grow without bound between two prunings)."""
    pending = session.scalar(
        select(func.count()).select_from(
            select(SsoLogin.id).where(SsoLogin.expires_at > now).limit(MAX_PENDING).subquery()
        )
    )
    if (pending or 0) >= MAX_PENDING:
        raise SsoRefused(
            "Too many log-ins are under way. Try again in a few minutes.",
            reason="too_many_logins",
            detail=f"{MAX_PENDING} log-ins started in the last {LOGIN_TTL} have not come back",
        )


@dataclass(frozen=True)
class _Pending:
    nonce: str
    verifier: str
    next_path: str


def take_login(app: App, callback: Callback) -> _Pending:
    """The stored log-in of the callback's state, deleted as it is read (used once)."""
    if not callback.state:
        raise _restart("state_missing", "the callback carries no state")
    with app.db.session() as session:
        row = session.execute(
            delete(SsoLogin)
            .where(SsoLogin.state_hash == _state_hash(callback.state))
            .returning(
                SsoLogin.nonce, SsoLogin.code_verifier, SsoLogin.next_path, SsoLogin.expires_at
            )
        ).first()
    if row is None:
        raise _restart("state_unknown", "no log-in under way has this state (used or forged)")
    if row.expires_at <= app.now():
        raise _restart("state_expired", f"the log-in expired at {row.expires_at.isoformat()}")
    if callback.browser_state is None or not secrets.compare_digest(
        callback.browser_state, callback.state
    ):
        raise _restart("state_mismatch", "the browser's cookie does not hold this state")
    return _Pending(row.nonce, row.code_verifier, row.next_path)


_RESTART = {
    "state_missing": "This page is the end of a log-in that was never started here.",
    "state_unknown": "This log-in link was used already, or was not started here.",
    "state_expired": "This log-in took longer than 10 minutes.",
    "state_mismatch": "This log-in was started in another browser or tab.",
}


def _restart(reason: str, detail: str) -> SsoRefused:
    return SsoRefused(f"{_RESTART[reason]} Log in again.", reason=reason, detail=detail)


def _untrusted(reason: str, detail: str) -> SsoRefused:
    return SsoRefused(
        "The identity provider's answer could not be verified, so you are not logged in. "
        "Log in again; if it happens again, tell an administrator.",
        reason=reason,
        detail=detail,
    )


def _exchange(config: OidcConfig, metadata: Metadata, code: str, verifier: str) -> str:
    """The ID token the token endpoint gives for ``code``."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": config.redirect_uri,
        "code_verifier": verifier,
    }
    auth: tuple[str, str] | None = None
    if config.client_secret is None:
        form["client_id"] = config.client_id
    else:
        auth = (config.client_id, config.client_secret)
    try:
        response = httpx.post(
            metadata.token_endpoint, data=form, auth=auth, timeout=config.timeout_s
        )
    except httpx.HTTPError as exc:
        raise _unreachable(config, f"token endpoint {metadata.token_endpoint}", exc) from None
    body = _json_object(config, response, "token response")
    if response.status_code != 200:
        raise SsoRefused(
            "The identity provider refused to complete the log-in. Log in again.",
            reason="token_refused",
            detail=f"token endpoint: HTTP {response.status_code} "
            f"{str(body.get('error'))[:100]}: {str(body.get('error_description'))[:300]}",
        )
    id_token = body.get("id_token")
    if not isinstance(id_token, str):
        raise _untrusted("token_missing", "the token response holds no id_token")
    return id_token


def verified_claims(
    app: App, config: OidcConfig, metadata: Metadata, id_token: str, nonce: str
) -> dict[str, Any]:
    """The claims of ``id_token`` once its signature (the issuer's keys) and its claims
    (issuer, audience, authorized party, expiry, issue time, nonce) hold."""
    token = _decoded(config, metadata, id_token)
    registry = jwt.JWTClaimsRegistry(
        now=lambda: int(app.now().timestamp()),
        leeway=LEEWAY_S,
        iss={"essential": True, "value": config.issuer},
        aud={"essential": True, "value": config.client_id},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": nonce},
    )
    try:
        registry.validate(token.claims)
    except ExpiredTokenError:
        raise _untrusted("token_expired", "the ID token has expired") from None
    except ClaimError as exc:
        reason = {"aud": "token_audience", "nonce": "nonce_mismatch", "iss": "token_issuer"}
        raise _untrusted(reason.get(exc.claim, "token_claims"), f"ID token: {exc}") from None
    audiences = token.claims["aud"]
    several = isinstance(audiences, list) and len(audiences) > 1
    if several and token.claims.get("azp") != config.client_id:
        raise _untrusted("token_audience", "several audiences and azp is not our client")
    return dict(token.claims)


def _decoded(config: OidcConfig, metadata: Metadata, id_token: str) -> jwt.Token:
    for refresh in (False, True):
        keys = _key_set(config, metadata, refresh=refresh)
        try:
            return jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
        except (InvalidKeyIdError, MissingKeyError):
            continue  # a key we lack: read the set again once, then refuse
        except UnsupportedAlgorithmError as exc:
            raise _untrusted("token_algorithm", f"ID token: {exc}") from None
        except (BadSignatureError, DecodeError, JoseError, ValueError) as exc:
            raise _untrusted("token_signature", f"ID token: {exc}") from None
    raise _untrusted("token_signature", "the ID token is signed with a key not in the key set")


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    """A claim by name, or by a dotted path into objects (``realm_access.roles``)."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def identity_of(config: OidcConfig, claims: Mapping[str, Any]) -> Identity:
    """Who the verified claims say the person is."""
    groups = _claim(claims, config.groups_claim)
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list):
        groups = []
    name = _claim(claims, config.username_claim)
    if not isinstance(name, str) or not name:
        raise SsoRefused(
            "The identity provider did not say your user name. Tell an administrator.",
            reason="no_username",
            detail=f"the ID token has no {config.username_claim!r} claim (oidc_username_claim)",
        )
    return Identity(
        provider=config.issuer,
        subject=str(claims["sub"]),
        name=name,
        groups=tuple(g for g in groups if isinstance(g, str)),
        label=config.label,
    )


@dataclass(frozen=True)
class Finished:
    """A completed log-in: the session cookie's value, the session, the page to go to."""

    token: str
    session: LoggedIn
    next_path: str


def finish(app: App, config: OidcConfig, callback: Callback, address: str) -> Finished:
    """Complete a log-in from the provider's answer. A refused log-in is logged and
    audited before :class:`SsoRefused` is raised."""
    try:
        return _finish(app, config, callback, address)
    except SsoRefused as refused:
        refusal(refused, provider=config.label, address=address, app=app)
        raise


def _finish(app: App, config: OidcConfig, callback: Callback, address: str) -> Finished:
    pending = take_login(app, callback)
    if callback.error or not callback.code:
        error = "".join(c for c in (callback.error or "no code")[:64] if c.isalnum() or c in "_ ")
        raise SsoRefused(
            f"The identity provider did not log you in ({error}). Log in again.",
            reason="provider_error",
            detail=f"the provider answered {error}",
        )
    metadata = discover(config)
    id_token = _exchange(config, metadata, callback.code, pending.verifier)
    claims = verified_claims(app, config, metadata, id_token, pending.nonce)
    identity = identity_of(config, claims)
    actor = provision(app, identity, config.mapping, field="oidc_role_mapping")
    detail = {"address": address, "provider": config.label, "issuer": config.issuer}
    detail["subject"] = identity.subject
    token, session = open_session(app, actor, detail)
    return Finished(token, session, pending.next_path)


def logout_url(config: OidcConfig) -> str | None:
    """The provider's end-session URL (RP-initiated logout) that returns to fleetcron's
    log-in page, or None when the provider has none (or cannot be reached now)."""
    try:
        metadata = discover(config)
    except SsoRefused:
        return None
    if metadata.end_session_endpoint is None:
        return None
    parts = urlsplit(config.redirect_uri)
    back = f"{parts.scheme}://{parts.netloc}/login"
    query = urlencode({"client_id": config.client_id, "post_logout_redirect_uri": back})
    separator = "&" if "?" in metadata.end_session_endpoint else "?"
    return metadata.end_session_endpoint + separator + query
