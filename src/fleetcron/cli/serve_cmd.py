"""`fleetcron serve` and `fleetcron scheduler`: the long-running process."""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal

import click

from fleetcron.config import Settings, load_settings
from fleetcron.crypto import create_key_file
from fleetcron.logs import configure_logging
from fleetcron.scheduler.service import Scheduler
from fleetcron.services import setup
from fleetcron.services.context import App

log = logging.getLogger(__name__)


def prepare(settings: Settings) -> App:
    """Open the app; the embedded default (SQLite) sets itself up on first start."""
    app = App.open(settings)
    if settings.is_sqlite:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        app.db.ensure_current(auto_upgrade=True)
        if settings.master_key is None and not settings.effective_master_key_file.exists():
            create_key_file(settings.effective_master_key_file)
        if setup.needs_admin(app):
            _first_admin(app, settings)
    else:
        app.db.ensure_current()
    app.master_key  # noqa: B018 - stop now if the master key is missing or unusable
    return app


def _first_admin(app: App, settings: Settings) -> None:
    password = secrets.token_urlsafe(12)
    setup.init(app, admin_name="admin", admin_password=password)
    path = settings.data_dir / "initial-admin-password"
    path.write_text(password + "\n")
    path.chmod(0o600)
    log.warning(
        "created the first admin user 'admin'; its password is in %s "
        "(change it with `fleetcron user passwd admin`)",
        path,
        extra={"action": "init.admin"},
    )


async def _serve(app: App) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await Scheduler(app).serve(stop)


@click.command()
def scheduler() -> None:
    """Run the scheduler alone (no web UI)."""
    settings = load_settings()
    configure_logging(settings.log_format)
    app = prepare(settings)
    try:
        asyncio.run(_serve(app))
    finally:
        app.close()


@click.command()
def serve() -> None:
    """Run the scheduler (and the web UI and API, when installed) in one process."""
    settings = load_settings()
    configure_logging(settings.log_format)
    app = prepare(settings)
    try:
        asyncio.run(_serve(app))
    finally:
        app.close()
