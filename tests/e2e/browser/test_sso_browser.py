"""Single sign-on in a real browser: headless Chromium goes from fleetcron's log-in page
to a real OpenID Connect provider (``oidc-provider`` under Node.js), signs in there, comes
back logged in with the role its groups map to, and logs out of both."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_web import NODE, LiveServer
from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy import select

from fixtures.app import make_settings
from fixtures.oidc_provider import OidcProvider, start_provider, stop_provider, user
from fleetcron.app import App
from fleetcron.services.identity.oidc import forget_provider
from fleetcron.store.schema import User


@pytest.fixture(scope="module")
def sso_server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, OidcProvider]]:
    directory = tmp_path_factory.mktemp("sso-web")
    sock = LiveServer.bound_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = start_provider([url + "/login/oidc/callback"], [url + "/login"], directory)
    shutil.copyfile(sqlite_template, directory / "fleetcron.db")
    settings = make_settings(
        directory / "data",
        f"sqlite:///{directory / 'fleetcron.db'}",
        node_name=NODE,
        **provider.settings(url + "/login/oidc/callback"),
    )
    app = App.open(settings)
    live = LiveServer.start(app, sock)
    yield live, provider
    live.stop()
    app.close()
    stop_provider(provider)
    forget_provider(provider.issuer)


# Submitting the provider's form starts a chain of five page loads across two servers
# (the provider's log-in and authorization, fleetcron's callback, which itself calls the
# provider's token endpoint, and the page it returns to). On a loaded machine that chain
# alone can take longer than one action's timeout, so the click does not wait for it and
# the test waits for where the chain ends, with this longer bound.
CHAIN_MS = 40_000


def sign_in(page: Page, login: str) -> None:
    """At the provider's sign-in page: fill it in as ``login`` and submit (without waiting
    for the redirects that follow: the caller waits for where they end)."""
    expect(page.get_by_role("heading", name="Test IdP sign-in")).to_be_visible()
    page.locator("#login").fill(login)
    page.locator("#password").fill(user(login).password)
    page.locator("#sign-in").click(no_wait_after=True)


def test_an_operator_logs_in_through_the_provider_and_out_of_both(
    fresh_context: BrowserContext, sso_server: tuple[LiveServer, OidcProvider]
) -> None:
    live, provider = sso_server
    page = fresh_context.new_page()
    page.goto(live.at("/jobs"))
    page.get_by_role("link", name="Log in with Test IdP").click()
    assert page.url.startswith(provider.issuer + "/interaction/")
    sign_in(page, "olga")

    page.wait_for_url(live.at("/jobs"), timeout=CHAIN_MS)
    expect(page.locator("header .who")).to_contain_text("olga")
    with live.app.db.read() as session:
        olga = session.scalars(select(User).where(User.name == "olga")).one()
        assert (olga.role, olga.subject) == ("operator", user("olga").sub)

    page.locator("header form.logout button").click(no_wait_after=True)
    expect(page.get_by_role("heading", name="Test IdP sign-out")).to_be_visible(timeout=CHAIN_MS)
    page.locator("#logout-yes").click(no_wait_after=True)
    page.wait_for_url(live.at("/login"), timeout=CHAIN_MS)
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()

    # Logged out of fleetcron, and of the provider: a new log-in asks to sign in again.
    page.goto(live.at("/"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_role("link", name="Log in with Test IdP").click()
    expect(page.get_by_role("heading", name="Test IdP sign-in")).to_be_visible()


def test_a_user_with_no_mapped_group_sees_why_and_is_not_logged_in(
    fresh_context: BrowserContext, sso_server: tuple[LiveServer, OidcProvider]
) -> None:
    live, _ = sso_server
    page = fresh_context.new_page()
    page.goto(live.at("/login"))
    page.get_by_role("link", name="Log in with Test IdP").click()
    sign_in(page, "nina")

    expect(page.get_by_role("heading", name="Log-in refused")).to_be_visible(timeout=CHAIN_MS)
    expect(page.get_by_role("alert")).to_contain_text("no role for your groups")
    page.goto(live.at("/"))
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
