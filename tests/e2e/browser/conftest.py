"""The web UI in a real headless Chromium, against the real app on a real SQLite database.

One browser and one server per session (see :mod:`live_web`), over a copy of the seeded
test database with three paired local targets; tests name their own jobs, so they do not
depend on each other. Each user's page logs in through the login form once, then serves
all of that user's tests.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from argon2 import PasswordHasher
from live_web import (
    ADMIN,
    CHROMIUM,
    CHROMIUM_ARGS,
    NODE,
    TARGETS,
    TICK_S,
    LiveServer,
    OpenPage,
    log_in,
    new_context,
    problems_of,
    watched,
)
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from fixtures.app import USERS, make_settings
from fleetcron.app import App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.accounts import users
from fleetcron.services.targets.edit import add_target

#: Argon2id at its smallest cost (the hashing stays real argon2id, as in tests/integration/web).
CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


@pytest.fixture(scope="package")
def sqlite_template(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """The seeded database every browser test's server copies, its users' passwords hashed
    at argon2id's smallest cost, and new hashes made at that cost while these tests run:
    the product's cost spends 0.2 CPU-s on each log-in, and these tests log in through the
    form a few dozen times (verification reads the cost from the stored hash)."""
    path = tmp_path_factory.mktemp("browser-template") / "template.db"
    shutil.copyfile(sqlite_template, path)
    with closing(sqlite3.connect(path)) as connection, connection:
        for name, password, _ in USERS:
            connection.execute(
                "UPDATE users SET password_hash = ? WHERE name = ?",
                (CHEAP_HASHER.hash(password), name),
            )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(users, "_hasher", CHEAP_HASHER)
        yield path


@pytest.fixture(scope="package")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("web")
    shutil.copyfile(sqlite_template, directory / "fleetcron.db")
    settings = make_settings(
        directory / "data", f"sqlite:///{directory / 'fleetcron.db'}", tick_s=TICK_S, node_name=NODE
    )
    app = App.open(settings)
    for name, label in TARGETS:
        add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL, labels=[label]))
    live = LiveServer.start(app)
    yield live
    live.stop()
    app.close()


@pytest.fixture(scope="package")
def playwright_driver() -> Iterator[Playwright]:
    """One driver for the browser tests only. While it runs, Playwright's sync API keeps its
    event loop marked as running in the main thread, which an asyncio test would trip over:
    it stops (as the server and Chromium do) when a worker goes on from the browser tests
    to others (the package scope, tests/conftest.py)."""
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    chromium = playwright_driver.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
    )
    yield chromium
    chromium.close()


@pytest.fixture
def open_page(browser: Browser, server: LiveServer) -> Iterator[OpenPage]:
    """``open_page(user, javascript=True)``: a page logged in as ``user`` (through the login
    form, the first time). The same page serves every test of that user on this server,
    so each test starts with ``page.goto``; its console errors are counted per test
    (``live_web.problems_of(page)``). After the test the pages it used are parked on a
    blank page: Chromium spends about 10 ms a second on an idle fleetcron page, and a
    user's page may wait many tests for its next one."""
    used: list[Page] = []

    def open_(user: str, *, javascript: bool = True) -> Page:
        key = (user, javascript)
        if key not in server.pages:
            context = new_context(browser, java_script_enabled=javascript)
            page = context.new_page()
            if javascript:
                log_in(page, server, user)
            else:
                with_js = open_(user)
                # Playwright types the cookies it returns (Cookie) apart from those it takes
                # (SetCookieParam); the keys it returns are ones it accepts.
                context.add_cookies(with_js.context.cookies())  # type: ignore[arg-type]
            server.pages[key] = watched(page)
        page = server.pages[key]
        problems_of(page).clear()
        used.append(page)
        return page

    yield open_
    for page in dict.fromkeys(used):
        if not page.is_closed():
            page.goto("about:blank")


@pytest.fixture(scope="package")
def anonymous_context(browser: Browser) -> Iterator[BrowserContext]:
    """The one context behind :func:`fresh_context`: a new context costs Chromium about
    0.5 CPU-s, several times what clearing one does."""
    context = new_context(browser)
    yield context
    context.close()


@pytest.fixture
def fresh_context(anonymous_context: BrowserContext) -> Iterator[BrowserContext]:
    """A browser context without any cookie: the package's anonymous context, its cookies
    cleared before and after the test and the test's pages closed after it (so their
    session storage goes with them)."""
    anonymous_context.clear_cookies()
    assert anonymous_context.pages == [], "a test left a page open in the fresh context"
    yield anonymous_context
    for page in anonymous_context.pages:
        page.close()
    anonymous_context.clear_cookies()
