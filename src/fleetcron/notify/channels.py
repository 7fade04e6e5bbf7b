"""What a notification channel holds, and the rules for it. Pure: no I/O.

A webhook channel keeps ``{"url"}`` and, optionally, a signing secret; an email channel
keeps ``{"host", "port", "starttls", "username", "sender", "to"}`` and, with a login, a
password. Secrets are returned apart from the settings so the caller can encrypt them;
error messages name the field and, for a webhook, show the URL's origin only (URLs often
carry a token, and failed attempts are audited).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fleetcron.core import validation as v
from fleetcron.errors import InvalidInput
from fleetcron.notify.webhook import SCHEMES, origin

MIN_SECRET_LENGTH = 16
MAX_SECRET_LENGTH = 1024
MAX_URL_LENGTH = 2048
MAX_RECIPIENTS = 50
_ADDRESS = re.compile(r"[^@\s<>()\[\],;:\"]+@[^@\s<>()\[\],;:\"]+")


@dataclass(frozen=True)
class WebhookSpec:
    """A webhook channel: JSON POST to ``url``, signed with ``secret`` when given."""

    url: str
    secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class EmailSpec:
    """An email channel: plain-text mail from ``sender`` to ``to`` through an SMTP server."""

    host: str
    sender: str
    to: Sequence[str]
    port: int = 25
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def validate_webhook(spec: WebhookSpec) -> tuple[dict[str, Any], str | None]:
    url = spec.url
    parts = urlsplit(url)
    shown = origin(url) if parts.scheme else "(no scheme)"
    allowed = "an http:// or https:// URL with a host, at most 2048 characters"
    if (
        len(url) > MAX_URL_LENGTH
        or parts.scheme not in SCHEMES
        or not parts.hostname
        or any(ch.isspace() or ord(ch) < 32 for ch in url)
    ):
        # The message names the origin only: URLs often carry a token, and it is audited.
        raise InvalidInput(
            f"url: {shown} is not a valid webhook URL; allowed: {allowed}",
            field="url",
            value=shown,
            allowed=allowed,
        )
    if "@" in parts.netloc:
        raise InvalidInput(
            "url: credentials in the URL are not supported; sign requests with --secret",
            field="url",
            value=shown,
            allowed=allowed,
        )
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise InvalidInput(
            f"url: {shown} has an invalid port", field="url", value=shown, allowed=allowed
        ) from None
    return {"url": url}, _valid_secret(spec.secret, field_name="secret")


def _valid_secret(secret: str | None, *, field_name: str) -> str | None:
    if secret is None:
        return None
    rule = f"{MIN_SECRET_LENGTH} to {MAX_SECRET_LENGTH} characters"
    if not MIN_SECRET_LENGTH <= len(secret) <= MAX_SECRET_LENGTH:
        raise InvalidInput(
            f"{field_name}: must be {rule} long (got {len(secret)})",
            field=field_name,
            value="**********",
            allowed=rule,
        )
    return secret


def validate_email(spec: EmailSpec) -> tuple[dict[str, Any], str | None]:
    host = spec.host
    if not host or len(host) > 255 or any(ch.isspace() or ch in "@/" for ch in host):
        raise InvalidInput(
            f"smtp_host: {host!r} is not a host name or address",
            field="smtp_host",
            value=host,
            allowed="a DNS name or an IP address",
        )
    v.validate_int(spec.port, field="smtp_port", low=1, high=65535)
    sender = _valid_address(spec.sender, field_name="from")
    recipients = list(dict.fromkeys(_valid_address(a, field_name="to") for a in spec.to))
    if not 1 <= len(recipients) <= MAX_RECIPIENTS:
        raise InvalidInput(
            f"to: {len(recipients)} recipients; give 1 to {MAX_RECIPIENTS}",
            field="to",
            value=recipients,
            allowed=f"1 to {MAX_RECIPIENTS} addresses",
        )
    username = spec.username or None
    if username is not None and (
        len(username) > 255 or any(ch.isspace() or ord(ch) < 32 for ch in username)
    ):
        raise InvalidInput(
            "username: must be at most 255 characters without spaces",
            field="username",
            value=username,
            allowed="at most 255 characters without spaces",
        )
    password = spec.password or None
    if (username is None) != (password is None):
        missing = "password" if password is None else "username"
        raise InvalidInput(
            f"{missing}: an SMTP login needs both --username and --password",
            field=missing,
            value=None,
            allowed="both or neither",
        )
    if password is not None and len(password) > MAX_SECRET_LENGTH:
        raise InvalidInput(
            f"password: at most {MAX_SECRET_LENGTH} characters",
            field="password",
            value="**********",
            allowed=f"at most {MAX_SECRET_LENGTH} characters",
        )
    if password is not None and not spec.starttls and not is_loopback(host):
        raise InvalidInput(
            "starttls: a password is sent only over STARTTLS (add --starttls), "
            "or in plain text to a relay on this host",
            field="starttls",
            value=False,
            allowed="--starttls, or --smtp-host localhost",
        )
    config = {
        "host": host,
        "port": spec.port,
        "starttls": spec.starttls,
        "username": username,
        "sender": sender,
        "to": recipients,
    }
    return config, password


def _valid_address(address: str, *, field_name: str) -> str:
    if not _ADDRESS.fullmatch(address) or len(address) > 254:
        raise InvalidInput(
            f"{field_name}: {address!r} is not an email address",
            field=field_name,
            value=address,
            allowed="user@domain",
        )
    return address


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def audit_summary(kind: str, config: dict[str, Any], *, signed: bool) -> dict[str, Any]:
    if kind == "webhook":
        return {"origin": origin(config["url"]), "signed": signed}
    return {
        "host": config["host"],
        "port": config["port"],
        "starttls": config["starttls"],
        "recipients": len(config["to"]),
    }


__all__ = [
    "EmailSpec",
    "WebhookSpec",
    "audit_summary",
    "is_loopback",
    "validate_email",
    "validate_webhook",
]
