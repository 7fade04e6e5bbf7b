"""Webhook sender: one JSON POST per message, optionally signed.

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
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from fleetcron import __version__
from fleetcron.crypto import Secret
from fleetcron.notify import DeliveryFailed

SIGNATURE_HEADER = "X-Fleetcron-Signature"
EVENT_HEADER = "X-Fleetcron-Event"
DELIVERY_HEADER = "X-Fleetcron-Delivery"
SCHEMES = ("http", "https")


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
    private, reserved or multicast address (the ``webhook_refuse_private`` setting): a
    channel must not reach the host's own services or a cloud metadata endpoint.

    The name is resolved here and again by the HTTP client, so a DNS server that answers
    differently the second time is not stopped; a host firewall is the complete defence."""
    import ipaddress
    import socket

    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise DeliveryFailed(f"{origin(url)}: cannot resolve the host: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
        mapped = getattr(address, "ipv4_mapped", None)
        address = mapped or address
        if not address.is_global or address.is_multicast:
            raise DeliveryFailed(
                f"{origin(url)}: resolves to {address}, a non-public address; "
                "webhook_refuse_private is on"
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


__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "encode",
    "origin",
    "post",
    "post_message",
    "sign",
    "verify",
]
