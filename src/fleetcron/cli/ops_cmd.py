"""`fleetcron config show`, `fleetcron backup` and `fleetcron restore`.

Passphrases come from ``--passphrase-file``, ``FLEETCRON_BACKUP_PASSPHRASE`` or a prompt
when interactive; never from the command line, where other users could read them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from fleetcron.cli.context import opened_app
from fleetcron.cli.output import print_json, print_table, read_bounded
from fleetcron.config import config_file, load_settings
from fleetcron.config_view import effective_configuration
from fleetcron.errors import InvalidInput
from fleetcron.services.backup import create as svc

PASSPHRASE_VARIABLE = "FLEETCRON_BACKUP_PASSPHRASE"
#: A passphrase file holds one line; a larger file is not read (see read_bounded).
PASSPHRASE_FILE_MAX_BYTES = 4096

passphrase_file_option = click.option(
    "--passphrase-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"File whose first line is the passphrase (or {PASSPHRASE_VARIABLE}; "
    "prompted when interactive).",
)


@click.group()
def config() -> None:
    """The effective configuration."""


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(as_json: bool) -> None:
    """Every setting, its value (secrets masked) and where it came from."""
    path = config_file()
    settings = effective_configuration()
    if as_json:
        print_json(
            {
                "config_file": str(path) if path else None,
                "settings": [setting.as_dict() for setting in settings],
            }
        )
        return
    click.echo(f"config file: {path if path else '(none)'}")
    print_table(
        None,
        ["setting", "value", "source"],
        [(s.name, _shown(s.value), s.source) for s in settings],
    )


def _shown(value: object) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _passphrase(passphrase_file: Path | None, *, confirm: bool) -> str | None:
    """The passphrase from the file, else the environment, else a prompt on a terminal."""
    if passphrase_file is not None:
        allowed = "a readable file whose first line is the passphrase"
        data = read_bounded(
            str(passphrase_file),
            limit=PASSPHRASE_FILE_MAX_BYTES,
            field="--passphrase-file",
            allowed=allowed,
        )
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise InvalidInput(
                f"--passphrase-file: {passphrase_file} is not UTF-8 text",
                field="passphrase_file",
                value=str(passphrase_file),
                allowed=allowed,
            ) from None
        return lines[0] if lines else ""
    from_env = os.environ.get(PASSPHRASE_VARIABLE)
    if from_env:
        return from_env
    if sys.stdin.isatty():
        entered: str = click.prompt(
            "Backup passphrase", hide_input=True, confirmation_prompt=confirm
        )
        return entered
    return None


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--no-key",
    is_flag=True,
    help="Leave the master key out; restoring then needs it given separately.",
)
@passphrase_file_option
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
def backup(file: Path, no_key: bool, passphrase_file: Path | None, force: bool) -> None:
    """Write a consistent snapshot of the whole state to FILE, while the scheduler runs.

    The master key goes in wrapped with a passphrase, unless --no-key.
    """
    if no_key and passphrase_file is not None:
        raise InvalidInput(
            "--passphrase-file wraps the master key, which --no-key leaves out",
            field="passphrase_file",
            value=str(passphrase_file),
            allowed="one of --no-key or --passphrase-file",
        )
    passphrase = None if no_key else _passphrase(passphrase_file, confirm=True)
    with opened_app(check_schema=False) as app:
        result = svc.create_backup(
            app, file, passphrase=passphrase, include_key=not no_key, overwrite=force
        )
    click.echo(f"backup:      {result.path} ({result.size} bytes, mode 0600)")
    click.echo(f"database:    {result.kind}, schema {result.revision}")
    if result.key_included:
        click.echo("master key:  included, wrapped with the passphrase")
    else:
        click.echo("master key:  left out; keep it safe separately, restoring needs it")


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@passphrase_file_option
def restore(file: Path, passphrase_file: Path | None) -> None:
    """Restore the backup FILE into an empty data dir (SQLite) or empty database
    (FLEETCRON_DATABASE_URL); then start fleetcron as usual."""
    settings = load_settings()
    manifest = svc.read_manifest(file)
    passphrase = (
        _passphrase(passphrase_file, confirm=False) if manifest.wrapped_key is not None else None
    )
    result = svc.restore_backup(settings, file, passphrase=passphrase)
    click.echo(f"restored:    {file} (made {result.created_at})")
    click.echo(f"database:    {result.database}")
    if result.migrated:
        click.echo(f"schema:      {result.revision_in_backup} -> {result.revision} (migrated)")
    else:
        click.echo(f"schema:      {result.revision} (current)")
    if result.master_key_file is not None:
        click.echo(f"master key:  {result.master_key_file} (written, mode 0600)")
    else:
        click.echo("master key:  from FLEETCRON_MASTER_KEY / FLEETCRON_MASTER_KEY_FILE")
