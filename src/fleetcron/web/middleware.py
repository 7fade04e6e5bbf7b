"""Pure ASGI middleware that runs before any route: who the client really is (behind a
trusted proxy), how large a body may be, and authentication before a body is read.

Order, outermost first: :class:`TrustedProxies` (so that the client address and scheme are
right for everything below), :class:`BodyLimit` (refuses a body that says or turns out to be
too large), :class:`AuthenticateFirst` (an anonymous state change is refused before its body
is read or parsed). :class:`HttpMiddleware` is their common base for those that act on
HTTP requests only (the security headers and the change source are two more).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection, Sequence
from typing import Any

import anyio.to_thread
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleetcron.errors import AuthenticationFailed

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip().strip('"')
    if text.startswith("["):  # Forwarded: for="[2001:db8::1]:4711"
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # 192.0.2.1:4711
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    parsed = _address(address)
    return parsed is not None and any(parsed in network for network in networks)


def forwarded_chain(headers: dict[str, str]) -> tuple[list[str], str | None]:
    """The client addresses a proxy chain reports (nearest last) and the protocol the
    first proxy was reached with, from ``Forwarded`` (RFC 7239) or ``X-Forwarded-*``."""
    if forwarded := headers.get("forwarded"):
        chain, proto = [], None
        for element in forwarded.split(","):
            for pair in element.split(";"):
                key, _, value = pair.strip().partition("=")
                if key.lower() == "for":
                    chain.append(value.strip().strip('"'))
                elif key.lower() == "proto" and proto is None:
                    proto = value.strip().strip('"').lower()
        return chain, proto
    chain = [part.strip() for part in headers.get("x-forwarded-for", "").split(",") if part.strip()]
    protos = [p.strip().lower() for p in headers.get("x-forwarded-proto", "").split(",")]
    return chain, (protos[0] or None) if protos else None


def real_client(
    peer: str, headers: dict[str, str], networks: Sequence[Network]
) -> tuple[str, str | None]:
    """(client address, forwarded protocol) for a request from ``peer``.

    Headers count only when the peer is a trusted proxy. The chain is read from the right
    (the nearest hop) and the first address that is not a trusted proxy is the client: a
    client cannot push a forged address past the proxy, which appends the one it saw.
    """
    if not networks or not _trusted(peer, networks):
        return peer, None
    chain, proto = forwarded_chain(headers)
    client = peer
    for hop in reversed(chain):
        parsed = _address(hop)
        if parsed is None:
            break  # "unknown" or an obfuscated identifier: stop at the last known hop
        client = str(parsed)
        if not _trusted(client, networks):
            break
    return client, proto if proto in ("http", "https") else None


class HttpMiddleware:
    """Middleware that acts on HTTP requests only: other scopes (the lifespan) pass
    through untouched, and a subclass writes :meth:`handle` for the requests."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer, or pass on, one HTTP request."""
        raise NotImplementedError


class TrustedProxies:
    """Rewrite the ASGI ``client`` and ``scheme`` from a trusted proxy's headers."""

    def __init__(self, app: ASGIApp, networks: Sequence[Network]) -> None:
        self.app = app
        self.networks = tuple(networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.networks and scope.get("client"):
            headers = {
                k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]
            }
            peer, port = scope["client"]
            client, proto = real_client(peer, headers, self.networks)
            scope = dict(scope)
            scope["client"] = (client, port if client == peer else 0)
            if proto is not None:
                scope["scheme"] = proto
        await self.app(scope, receive, send)


async def _answer(
    send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": None}}


class BodyLimit(HttpMiddleware):
    """Refuse request bodies over ``limit`` bytes with 413: at once when Content-Length
    says so, else as soon as the streamed chunks add up to more (raised into the route,
    whose error handler answers 413)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit

    def _too_large(self) -> str:
        return f"the request body is larger than the limit of {self.limit} bytes (max_body_bytes)"

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _answer(send, 400, _error("invalid", "Content-Length is not a number"))
                    return
                if declared > self.limit:
                    await _answer(send, 413, _error("too_large", self._too_large()))
                    return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, self._too_large())
            return message

        await self.app(scope, counted, send)


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class AuthenticateFirst:
    """A state change (any method but GET, HEAD, OPTIONS) is authenticated before its body
    is read: anonymous callers get 401 (API) or a redirect to the log-in page, having cost
    the server no parsing. ``open_paths`` are the routes that authenticate by other means
    (the log-in form itself, the cluster's signed peer routes)."""

    def __init__(self, app: ASGIApp, open_paths: Collection[str]) -> None:
        self.app = app
        self.open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in SAFE_METHODS
            or scope["path"] in self.open_paths
        ):
            await self.app(scope, receive, send)
            return
        from fleetcron.web.deps import optional_caller

        request = Request(scope)
        try:
            caller = await anyio.to_thread.run_sync(optional_caller, request)
        except AuthenticationFailed as exc:
            caller, message = None, exc.message
        else:
            message = "log in or send an API token (Authorization: Bearer ...)"
        if caller is not None:
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith("/api/"):
            await _answer(
                send, 401, _error("unauthenticated", message), [(b"www-authenticate", b"Bearer")]
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", b"/login"), (b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})
