"""`fleetcron init` and `fleetcron db upgrade`."""

from __future__ import annotations

import os
import sys

import click

from fleetcron.cli.context import opened_app
from fleetcron.cli.passwords import password_file_option, read_password_file
from fleetcron.services import setup


@click.command()
@click.option(
    "--admin", "admin_name", default="admin", show_default=True, help="Name of the first admin."
)
@click.option(
    "--admin-password",
    default=None,
    help="Password of the first admin (or FLEETCRON_ADMIN_PASSWORD; prompted when interactive).",
)
@password_file_option("--admin-password-file")
def init(admin_name: str, admin_password: str | None, password_file: str | None) -> None:
    """Create the data dir, the database, the master key and the first admin."""
    password = admin_password or os.environ.get("FLEETCRON_ADMIN_PASSWORD")
    if password_file is not None:
        password = read_password_file(password_file, field="admin-password-file")
    with opened_app(check_schema=False, create=True) as app:
        if setup.needs_admin(app) and password is None and sys.stdin.isatty():
            password = click.prompt(
                "Password for the first admin", hide_input=True, confirmation_prompt=True
            )
        result = setup.init(app, admin_name=admin_name, admin_password=password)
    click.echo(f"data dir:    {result.data_dir}")
    click.echo(f"database:    {result.database_url} (schema up to date)")
    if result.master_key_file:
        click.echo(f"master key:  {result.master_key_file} (created, mode 0600; back it up)")
    if result.admin:
        click.echo(f"admin user:  {result.admin} (created)")
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
