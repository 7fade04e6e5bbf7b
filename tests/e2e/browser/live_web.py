"""What the browser tests share: the live server, logging in, watching a page, screenshots.

The server is the real app served by uvicorn with a real :class:`Scheduler` in the same
event loop (as ``fleetcron serve`` runs them), in a background thread, on a free loopback
port and a real SQLite database.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import Browser, BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError

from fixtures.app import USERS
from fleetcron.app import Actor, App
from fleetcron.scheduler.service import Scheduler
from fleetcron.web.app import create_app
from waiting import eventually_async

#: Debian's build of Chromium's headless shell (package chromium-headless-shell): the same
#: Blink and V8 as the desktop browser, without its window system, what Playwright itself
#: drives in headless mode. The 77 browser tests cost 35 CPU-s with it against 55 with the
#: desktop browser's headless mode (pytest, the driver and the browser; 79 s against 96).
CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The zone the browser reports; the pages must show their times in it.
BROWSER_ZONE = "Europe/Berlin"
NODE = "web-test-node"
#: Paired local targets every server starts with, and their labels.
TARGETS = (("alpha", "env=prod"), ("bravo", "env=prod"), ("charlie", "env=staging"))
SCREENSHOTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "screenshots"
PASSWORDS = {name: password for name, password, _ in USERS}
ADMIN = Actor("admin", "admin")
#: Playwright's wait for an element or a navigation. A page answers in milliseconds, but on a
#: two-core machine the browser tests share with the fault scenarios' nodes (at a higher CPU
#: priority) a log-in's redirect was seen to take over 10 s: the bound is for a starved
#: machine, and only a failing test ever waits it out.
TIMEOUT_MS = 30_000
#: The servers' scheduler tick: a queued run starts within half a second. An idle tick
#: costs the test process about 6 ms of CPU, so 0.2 s cost 30 ms for every second the
#: browser tests take, twice what 0.5 s does.
TICK_S = 0.5

#: ``open_page(user, javascript=True)`` -> a logged-in page (the ``open_page`` fixture).
OpenPage = Callable[..., Page]


class _QuietServer(uvicorn.Server):
    """uvicorn without signal handlers: it runs in a thread that the test process stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class LiveServer:
    """The running web UI: its base URL and the app behind it (for setup and checks)."""

    url: str
    app: App
    #: (user, javascript) -> that user's logged-in page, reused from test to test: a new
    #: context or page costs a renderer process start, several times a navigation.
    pages: dict[tuple[str, bool], Page] = field(default_factory=dict)
    _stop: Callable[[], None] = lambda: None

    def at(self, path: str) -> str:
        return self.url + path

    @staticmethod
    def bound_socket() -> socket.socket:
        """A listening loopback socket on a free port (its URL can be known, e.g. by an
        identity provider, before the app that will serve it is made)."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Without it, a response written as headers then body waits out a delayed ACK (~40 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        return sock

    @classmethod
    def start(cls, app: App, sock: socket.socket | None = None) -> LiveServer:
        sock = sock or cls.bound_socket()
        ready, box = threading.Event(), dict[str, Any]()
        thread = threading.Thread(
            target=asyncio.run, args=(_serve(app, sock, ready, box),), name="web", daemon=True
        )
        thread.start()
        if not ready.wait(30) or "error" in box:
            raise RuntimeError(f"the web server did not start: {box.get('error')}")
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with urllib.request.urlopen(url + "/login", timeout=10) as response:
            assert response.status == 200

        def stop() -> None:
            box["loop"].call_soon_threadsafe(box["stop"].set)
            thread.join(30)
            sock.close()

        return cls(url, app, _stop=stop)

    def stop(self) -> None:
        for page in self.pages.values():
            with contextlib.suppress(PlaywrightError):  # the browser may be gone already
                page.context.close()
        self._stop()


async def _serve(
    app: App, sock: socket.socket, ready: threading.Event, box: dict[str, Any]
) -> None:
    stop = asyncio.Event()
    box["loop"], box["stop"] = asyncio.get_running_loop(), stop
    web = create_app(app)
    scheduler = Scheduler(app)
    web.state.scheduler = scheduler
    config = uvicorn.Config(web, log_config=None, access_log=False, lifespan="off")
    server = _QuietServer(config)
    tasks = [
        asyncio.create_task(scheduler.serve(stop)),
        asyncio.create_task(server.serve(sockets=[sock])),
    ]
    try:
        # Within the 30 s that start() waits for ``ready``.
        await eventually_async(
            lambda: server.started or any(task.done() for task in tasks),
            25,
            "uvicorn to start (or the scheduler or the server to fail)",
        )
        if not server.started:
            box["error"] = [task.exception() for task in tasks if task.done()]
            return
    except AssertionError as timeout:
        box["error"] = timeout
        return
    finally:
        ready.set()
    await stop.wait()
    server.should_exit = True
    await asyncio.gather(*tasks)


@dataclass
class Problems:
    """Console errors and uncaught exceptions of a page (CSP violations show up here)."""

    messages: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("console", lambda m: self.messages.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.messages.append(f"uncaught: {e}"))


def watched(page: Page) -> Page:
    """Start collecting the page's console errors (see :func:`problems_of`)."""
    problems = Problems()
    problems.watch(page)
    page.problems = problems  # type: ignore[attr-defined]
    return page


def problems_of(page: Page) -> list[str]:
    problems: Problems = page.problems  # type: ignore[attr-defined]
    return problems.messages


def new_context(browser: Browser, **options: Any) -> BrowserContext:
    context = browser.new_context(timezone_id=BROWSER_ZONE, **options)
    context.set_default_timeout(TIMEOUT_MS)
    return context


def log_in(page: Page, server: LiveServer, user: str) -> None:
    """Log in through the form. First waits until the page shows times in the browser's
    zone (the page script sets the zone cookie and reloads once), so no typing is lost."""
    page.goto(server.at("/login"))
    page.get_by_text(f"Times in {BROWSER_ZONE}").wait_for()
    page.get_by_label("User").fill(user)
    page.get_by_label("Password").fill(PASSWORDS[user])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(server.at("/"))


#: ``TEST_SCREENSHOTS=full`` (``make screenshots``): whole pages, scrolled out.
FULL_PAGE_SCREENSHOTS = os.environ.get("TEST_SCREENSHOTS", "") == "full"


def screenshot(page: Page, name: str) -> Path:
    """Keep what ``page`` shows under test-artifacts/screenshots/ for a human to look at:
    its viewport, or with ``TEST_SCREENSHOTS=full`` the whole page. A whole page
    costs Chromium about 0.4 CPU-s to paint and encode (ten times the viewport's), and the
    suite takes two dozen of them, so only when asked."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=FULL_PAGE_SCREENSHOTS)
    return path
