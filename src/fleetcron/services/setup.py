"""First start: data dir, database at the newest schema, master key, first admin."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from fleetcron.app import SYSTEM, App
from fleetcron.config import Settings
from fleetcron.crypto import create_key_file
from fleetcron.masking import mask_dsn
from fleetcron.services.users import add_user, check_bootstrap_password, count_users

log = logging.getLogger(__name__)

INITIAL_PASSWORD_FILE = "initial-admin-password"


@dataclass(frozen=True)
class InitResult:
    data_dir: Path
    database_url: str
    master_key_file: Path | None
    admin: str | None
    #: e.g. a data dir that others may read (see :func:`data_dir_warning`)
    warnings: tuple[str, ...] = ()


def data_dir_warning(settings: Settings) -> str | None:
    """A warning when the data dir may be entered or read by its group or others.

    The files fleetcron creates there are owner-only anyway; the warning is about what
    was or will be put there by other means (an older database, copies, backups)."""
    try:
        mode = stat.S_IMODE(settings.data_dir.stat().st_mode)
    except FileNotFoundError:
        return None
    if not mode & 0o077:
        return None
    return (
        f"the data dir {settings.data_dir} has mode {mode:04o}: its group or others may "
        "reach it, and it holds the database and the master key; make it owner-only with "
        f"`chmod 700 {settings.data_dir}`"
    )


def log_data_dir_warning(settings: Settings) -> str | None:
    """:func:`data_dir_warning`, also as a log line (action ``setup.data_dir_mode``)."""
    warning = data_dir_warning(settings)
    if warning:
        log.warning("%s", warning, extra={"action": "setup.data_dir_mode"})
    return warning


def write_initial_password(settings: Settings, password: str) -> Path:
    """Write the first admin's password to ``<data_dir>/initial-admin-password``, mode
    0600 from the start (also when the file exists with another mode)."""
    path = settings.data_dir / INITIAL_PASSWORD_FILE
    previous = os.umask(0o077)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    finally:
        os.umask(previous)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(fd, 0o600)
        handle.write(password + "\n")
    return path


def needs_admin(app: App) -> bool:
    """True before the first admin exists (including on an empty database)."""
    if app.db.current_revision() is None:
        return True
    with app.db.read() as session:
        return count_users(session) == 0


def init(app: App, *, admin_name: str, admin_password: str | None) -> InitResult:
    """Idempotent: creates what is missing and leaves what exists alone."""
    settings = app.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    warning = data_dir_warning(settings)
    app.db.upgrade()
    key_file: Path | None = None
    if settings.master_key is None and not settings.effective_master_key_file.exists():
        create_key_file(settings.effective_master_key_file)
        key_file = settings.effective_master_key_file
    app.master_key  # noqa: B018 - fail now, not at the first pairing, if the key is unusable
    admin: str | None = None
    if needs_admin(app):
        add_user(app, SYSTEM, admin_name, check_bootstrap_password(admin_password), "admin")
        admin = admin_name
    return InitResult(
        settings.data_dir,
        mask_dsn(app.db.url),
        key_file,
        admin,
        warnings=(warning,) if warning else (),
    )


