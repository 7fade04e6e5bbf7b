"""`fleetcron init` and `fleetcron db upgrade`."""

from __future__ import annotations

import os

import click

from fleetcron.cli.context import opened_app, sqlite_file
from fleetcron.cli.passwords import get_password, password_file_option
from fleetcron.config import Settings, load_settings
from fleetcron.errors import InvalidInput
from fleetcron.services import setup
from fleetcron.services.accounts.users import check_bootstrap_password

ADMIN_PASSWORD_ENV = "FLEETCRON_ADMIN_PASSWORD"


@click.command()
@click.option(
    "--admin", "admin_name", default="admin", show_default=True, help="Name of the first admin."
)
@password_file_option("--admin-password-file")
@click.option("--password-stdin", is_flag=True, help="Read the first admin's password from stdin.")
@click.option("--admin-password", hidden=True, help="Deprecated: the password shows in `ps`.")
def init(
    admin_name: str, password_file: str | None, password_stdin: bool, admin_password: str | None
) -> None:
    """Create the data dir, the database, the master key and the first admin.

    The admin's password is asked in a terminal, or read from --password-stdin,
    --admin-password-file FILE or FLEETCRON_ADMIN_PASSWORD. All or nothing: a failed init
    leaves nothing behind. On an installation that is set up already it changes nothing."""
    if password_stdin:
        if password_file is not None:
            raise InvalidInput(
                "admin-password: --password-stdin and --admin-password-file both given",
                field="admin-password",
                value=None,
                allowed="one of them",
            )
        password_file = "-"
    settings = load_settings()
    if _set_up(settings):
        _report_existing(settings, given=password_file is not None or admin_password is not None)
        return
    password = get_password(
        file=password_file,
        given=admin_password,
        env=ADMIN_PASSWORD_ENV,
        field="admin-password",
        prompt="Password for the first admin",
        option="--admin-password",
        file_option="--admin-password-file",
        stdin_option="--password-stdin",
    )
    check_bootstrap_password(password)  # before anything is made
    before = setup.Made.of(settings)
    with opened_app(check_schema=False, create=True) as app:
        result = setup.init(app, admin_name=admin_name, admin_password=password, before=before)
    click.echo(f"data dir:    {result.data_dir}")
    click.echo(f"database:    {result.database_url} (schema up to date)")
    if result.master_key_file:
        click.echo(f"master key:  {result.master_key_file} (created, mode 0600; back it up)")
    if result.admin:
        click.echo(f"admin user:  {result.admin} (created)")
    for warning in result.warnings:
        click.echo(f"warning:     {warning}")


def _set_up(settings: Settings) -> bool:
    """True when the configured installation has its database and its first admin (looked
    at without creating anything)."""
    path = sqlite_file(settings)
    if path is not None and not path.exists():
        return False
    with opened_app(check_schema=False) as app:
        return not setup.needs_admin(app)


def _report_existing(settings: Settings, *, given: bool) -> None:
    """Init on an installation that is set up: nothing changes, and a password given for
    an admin that exists is refused rather than ignored."""
    if given:
        raise InvalidInput(
            "admin-password: fleetcron is set up here already and init changes nothing; "
            "to change a password, run `fleetcron user passwd NAME`",
            field="admin-password",
            value=None,
            allowed="no password on an installation that is set up",
        )
    with opened_app(check_schema=False) as app:
        result = setup.existing(app)
    click.echo(f"data dir:    {result.data_dir}")
    click.echo(f"database:    {result.database_url}")
    click.echo("nothing changed: fleetcron is set up here already")
    if os.environ.get(ADMIN_PASSWORD_ENV):
        click.echo(
            f"note:        {ADMIN_PASSWORD_ENV} is not used: the first admin exists "
            "(`fleetcron user passwd NAME` changes a password)"
        )
    for warning in result.warnings:
        click.echo(f"warning:     {warning}")


@click.group()
def db() -> None:
    """Database maintenance."""


@db.command()
def upgrade() -> None:
    """Migrate the database schema to this version of fleetcron."""
    with opened_app(check_schema=False) as app:
        before = app.db.current_revision()
        app.db.upgrade()
        after = app.db.current_revision()
    click.echo(f"database schema: {before or 'empty'} -> {after}")
