"""How a CLI command reaches the services: settings, the app, and who is acting."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from fleetcron.config import load_settings
from fleetcron.services.context import Actor, App
from fleetcron.services.users import actor_for, first_admin

as_user_option = click.option(
    "--as",
    "as_user",
    metavar="USER",
    default=None,
    help="Act as this user (default: the first admin). Audited under this name.",
)


@contextmanager
def opened_app(*, check_schema: bool = True) -> Iterator[App]:
    app = App.open(load_settings())
    try:
        if check_schema:
            app.db.ensure_current()
        yield app
    finally:
        app.close()


def acting(app: App, as_user: str | None) -> Actor:
    """The local operator acts as a named user, or as the first admin."""
    return actor_for(app, as_user) if as_user else first_admin(app)
