"""The web application served by a real uvicorn on a free loopback port, for tests that need
real HTTP: Content-Length and streamed bodies, concurrent connections, the TCP peer address
that a proxy setting is about."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from fleetcron.app import App
from fleetcron.config import Settings
from integration.web.conftest import web_app
from waiting import eventually


def with_settings(app: App, **changes: Any) -> App:
    """The same database and clock, with some settings changed."""
    values = {**app.settings.model_dump(), **changes}
    return App(settings=Settings(**values), db=app.db, clock=app.clock)


@contextmanager
def serving(web: FastAPI) -> Iterator[str]:
    """Serve ``web`` on 127.0.0.1; yields the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        web, log_config=None, access_log=False, lifespan="off", proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    eventually(lambda: server.started, 10, "uvicorn to start", interval=0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def live(app: App) -> Iterator[tuple[FastAPI, httpx.Client]]:
    """The app's web server and an HTTP client for it (no redirects followed)."""
    web = web_app(app)
    with serving(web) as base, httpx.Client(base_url=base, follow_redirects=False) as client:
        yield web, client
