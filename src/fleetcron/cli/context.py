"""How a CLI command reaches the services: settings, the app, and who is acting."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from fleetcron.app import Actor, App
from fleetcron.config import Settings, env_variable, load_settings
from fleetcron.config_view import data_dir_origin
from fleetcron.errors import SchemaOutOfDate, StoreError
from fleetcron.services.accounts.users import actor_for, first_admin

as_user_option = click.option(
    "--as",
    "as_user",
    metavar="USER",
    default=None,
    help="Act as this user (default: the first admin). Audited under this name.",
)


@contextmanager
def opened_app(*, check_schema: bool = True, create: bool = False) -> Iterator[App]:
    """The app of the configured installation.

    Only ``create=True`` (``fleetcron init``) may create a SQLite database: every other
    command on a data dir without one stops before connecting, names the data dir and how
    it was chosen, and leaves it as it was (no empty database file, no directory).
    """
    settings = load_settings()
    if not create:
        require_database(settings)
    app = App.open(settings)
    try:
        if check_schema:
            try:
                app.db.ensure_current()
            except SchemaOutOfDate:
                if settings.is_sqlite and app.db.current_revision() is None:
                    raise StoreError(_no_database(settings, empty=True)) from None
                raise
        yield app
    finally:
        app.close()


def sqlite_file(settings: Settings) -> Path | None:
    """The SQLite database file of the settings; None for PostgreSQL or in-memory."""
    url = settings.effective_database_url
    if not url.startswith("sqlite:///") or url.startswith("sqlite:///:memory:"):
        return None
    return Path(url.removeprefix("sqlite:///").partition("?")[0])


def require_database(settings: Settings) -> None:
    """Stop, creating nothing, when the SQLite database file does not exist."""
    path = sqlite_file(settings)
    if path is not None and not path.exists():
        raise StoreError(_no_database(settings, empty=False))


def _no_database(settings: Settings, *, empty: bool) -> str:
    path = sqlite_file(settings)
    variable = env_variable("data_dir")
    what = "an empty fleetcron database" if empty else "no fleetcron database"
    if settings.database_url:
        # An explicit SQLite URL: the data dir does not decide where the database is.
        where = f"{what} at {path} (from {env_variable('database_url')})"
        point = f"set {env_variable('database_url')} as for the server"
    else:
        where = f"{what} in the data dir {settings.data_dir} ({data_dir_origin()})"
        point = f"set {variable}=DIR (or data_dir in the config file) as for the server"
    created = "" if empty else "; nothing was created there"
    return (
        f"{where}{created}. If fleetcron runs with another data dir, {point}; "
        "to set up a new installation here, run `fleetcron init`"
    )


#: where ``--project`` leaves its value, for :func:`acting` (the context's ``meta`` is
#: shared by a command and its groups)
PROJECT_META = "fleetcron.project"


def _remember_project(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.meta[PROJECT_META] = value


def project_option() -> click.Option:
    """``--project NAME`` (or ``FLEETCRON_PROJECT``): the project a command acts in."""
    return click.Option(
        ["--project"],
        metavar="NAME",
        envvar="FLEETCRON_PROJECT",
        expose_value=False,
        callback=_remember_project,
        help="The project to act in (default: default; env FLEETCRON_PROJECT).",
    )


def with_project_option(command: click.Command) -> click.Command:
    """``command`` and, for a group, each of its subcommands with ``--project``."""
    if not any(p.name == "project" for p in command.params):
        command.params.append(project_option())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            with_project_option(sub)
    return command


def current_project() -> str | None:
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(PROJECT_META)


def acting(app: App, as_user: str | None) -> Actor:
    """The local operator acts as a named user, or as the first admin, in the project
    ``--project`` names (default: ``default``)."""
    actor = actor_for(app, as_user) if as_user else first_admin(app)
    return actor.within(current_project())
