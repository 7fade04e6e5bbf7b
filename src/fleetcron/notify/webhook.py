"""Webhook channels: one JSON POST per message, optionally signed.

A webhook channel keeps ``{"url"}`` and, optionally, a signing secret. The URL often
carries a token: it is stored encrypted with the master key (``url_enc``) beside its
masked form (``url_shown``), the only form lists show.

The body is the message as compact JSON with sorted keys, plus ``delivery_id`` (the same on
every retry of one delivery, so a receiver can drop duplicates). With a channel secret the
request carries ``X-Fleetcron-Signature: sha256=<hex>``, the HMAC-SHA256 of the raw body
under the secret; receivers verify it over the bytes they received, before parsing.

Any 2xx answer is success. Redirects are not followed (a redirected POST would become a
GET, or go somewhere the operator did not configure): a 3xx is a failure. Error messages
name the URL's origin only, since webhook URLs often carry a token in their path.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fleetcron import __version__
from fleetcron.core.addresses import private_reason
from fleetcron.crypto import Secret
from fleetcron.errors import InvalidInput
from fleetcron.notify import ChannelKind, ChannelSpec, Cipher, Config, DeliveryFailed, Sending
from fleetcron.notify.channels import valid_secret

SIGNATURE_HEADER = "X-Fleetcron-Signature"
EVENT_HEADER = "X-Fleetcron-Event"
DELIVERY_HEADER = "X-Fleetcron-Delivery"
SCHEMES = ("http", "https")
MAX_URL_LENGTH = 2048


@dataclass(frozen=True)
class WebhookSpec(ChannelSpec):
    """A webhook channel: JSON POST to ``url``, signed with ``secret`` when given."""

    url: str
    secret: str | None = field(default=None, repr=False)


def validate(spec: WebhookSpec) -> tuple[Config, str | None]:
    url = spec.url
    allowed = "an http:// or https:// URL with a host, at most 2048 characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        # e.g. "http://[::1" (an unclosed IPv6 address); the text may carry a token.
        raise InvalidInput(
            f"url: not a valid webhook URL ({exc}); allowed: {allowed}",
            field="url",
            value="(not shown)",
            allowed=allowed,
        ) from exc
    shown = origin(url) if parts.scheme else "(no scheme)"
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
    return {"url": url}, valid_secret(spec.secret, field_name="secret")


def seal(config: Config, encrypt: Cipher) -> Config:
    """The stored config: the URL encrypted, and the masked form that lists show. A config
    already sealed (or without a URL) is returned as it is."""
    if "url" not in config or "url_enc" in config:
        return config
    url = str(config["url"])
    return {"url_enc": encrypt(url.encode()).decode(), "url_shown": masked(url)}


def unseal(config: Config, decrypt: Cipher) -> Config:
    """The config the sender needs: the URL decrypted (rows from before encryption still
    hold it in clear until they are sealed)."""
    if "url_enc" not in config:
        return config
    return {"url": decrypt(str(config["url_enc"]).encode()).decode()}


def shown(config: Config) -> Config:
    return {"url": config.get("url_shown") or masked(str(config.get("url", "")))}


def summary(config: Config, has_secret: bool) -> str:
    return f"POST {config['url']}" + (" (signed)" if has_secret else "")


def audit(config: Config, signed: bool) -> dict[str, Any]:
    return {"origin": origin(config["url"]), "signed": signed}


def send(
    config: Config, secret: Secret | None, message: Mapping[str, Any], sending: Sending
) -> str | None:
    url = str(config["url"])
    if sending.refuse_private:
        refuse_private_destination(url)
    post_message(
        url, message, secret=secret, delivery_id=sending.delivery_id, timeout=sending.timeout
    )
    return None


def encode(message: Mapping[str, Any]) -> bytes:
    """The raw request body: compact JSON, keys sorted, UTF-8."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(secret: bytes, body: bytes) -> str:
    """The signature header value for ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` (constant-time comparison)."""
    return header is not None and hmac.compare_digest(sign(secret, body), header)


def masked(url: str) -> str:
    """The URL as lists may show it: its origin, and ``/…`` for a path or query, which
    often hold a token."""
    parts = urlsplit(url)
    rest = parts.path.strip("/") or parts.query
    return origin(url) + ("/…" if rest else "/")


def refuse_private_destination(url: str) -> None:
    """Raise DeliveryFailed when the URL's host is, or resolves to, a loopback, link-local,
    private, reserved or multicast address, also one carried inside an IPv6 address (NAT64,
    6to4, IPv4-compatible or -mapped), or a site-local or Teredo one (the
    ``webhook_refuse_private`` setting): a channel must not reach the host's own services
    or a cloud metadata endpoint.

    The name is resolved here and again by the HTTP client, so a DNS server that answers
    differently the second time is not stopped; a host firewall is the complete defence."""
    import socket

    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise DeliveryFailed(f"{origin(url)}: cannot resolve the host: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
        reason = private_reason(address)
        if reason is not None:
            raise DeliveryFailed(
                f"{origin(url)}: resolves to {address}, {reason}; webhook_refuse_private is on"
            )


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL: what error messages and logs may show."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def post_message(
    url: str,
    message: Mapping[str, Any],
    *,
    secret: Secret | None,
    delivery_id: int | None,
    timeout: float,
) -> None:
    """POST the message as JSON to ``url``; raise :class:`DeliveryFailed` unless the
    receiver answers 2xx within ``timeout`` seconds."""
    body = encode({**message, "delivery_id": delivery_id})
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": f"fleetcron/{__version__}",
        EVENT_HEADER: str(message.get("event", "")),
    }
    if delivery_id is not None:
        headers[DELIVERY_HEADER] = str(delivery_id)
    if secret is not None:
        headers[SIGNATURE_HEADER] = sign(secret.reveal(), body)
    post(url, body, headers=headers, timeout=timeout)


def post(url: str, body: bytes, *, headers: Mapping[str, str], timeout: float) -> int:
    """POST raw bytes; returns the 2xx status, raises :class:`DeliveryFailed` otherwise."""
    where = origin(url)
    if urlsplit(url).scheme not in SCHEMES:
        # urllib would also open file: and ftp: URLs; a webhook is HTTP only.
        raise DeliveryFailed(f"webhook URL must be http or https, not {where}")
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    try:
        with _opener.open(request, timeout=timeout) as response:
            status = int(response.status)
            response.read(65536)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise DeliveryFailed(f"{where} answered HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise DeliveryFailed(f"no answer from {where} within {timeout:g} s") from exc
        raise DeliveryFailed(f"cannot reach {where}: {_describe(reason)}") from exc
    except TimeoutError as exc:
        raise DeliveryFailed(f"no answer from {where} within {timeout:g} s") from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise DeliveryFailed(f"webhook {where} failed: {_describe(exc)}") from exc
    if not 200 <= status < 300:
        raise DeliveryFailed(f"{where} answered HTTP {status}")
    return status


def _describe(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__


KIND = ChannelKind(
    name="webhook",
    spec_type=WebhookSpec,
    validate=validate,
    send=send,
    shown=shown,
    summary=summary,
    audit=audit,
    seal=seal,
    unseal=unseal,
)


__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "KIND",
    "SIGNATURE_HEADER",
    "WebhookSpec",
    "encode",
    "origin",
    "post",
    "post_message",
    "refuse_private_destination",
    "seal",
    "sign",
    "unseal",
    "validate",
    "verify",
]
