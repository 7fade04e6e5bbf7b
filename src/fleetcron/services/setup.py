"""First start: data dir, database at the newest schema, master key, first admin."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from fleetcron.app import SYSTEM, App
from fleetcron.config import Settings
from fleetcron.coordination.shard_rows import fixed_shards
from fleetcron.core.topology import Topology
from fleetcron.crypto import create_key_file
from fleetcron.masking import mask_dsn
from fleetcron.services.accounts.users import add_user, check_bootstrap_password, count_users

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


def init(
    app: App, *, admin_name: str, admin_password: str | None, before: Made | None = None
) -> InitResult:
    """Create what is missing and leave what exists alone; all or nothing.

    The password is checked before anything is made. Should a later step fail, what this
    call created is removed again (the data dir, the SQLite database and its side files,
    the master key file), so a failed init leaves no half-made installation. On PostgreSQL
    the migrations run in transactions and the admin is the last write. ``before``: what
    existed before the app was opened (:meth:`Made.of`, taken first: opening an app on a
    SQLite database creates its directory)."""
    settings = app.settings
    made = before or Made.of(settings)
    try:
        if needs_admin(app):
            check_bootstrap_password(admin_password)
        return _init(app, made, admin_name=admin_name, admin_password=admin_password)
    except BaseException:
        made.undo(app)
        log.warning(
            "init failed: removed what it had created in %s",
            settings.data_dir,
            extra={"action": "setup.init_undone"},
        )
        raise


def existing(app: App) -> InitResult:
    """What ``init`` reports on an installation that is set up already (it changes nothing)."""
    warning = data_dir_warning(app.settings)
    return InitResult(
        app.settings.data_dir,
        mask_dsn(app.db.url),
        None,
        None,
        warnings=(warning,) if warning else (),
    )


@dataclass
class Made:
    """What existed before an init, so that a failed one removes only what it created."""

    directories: list[Path]
    """The data dir and the database's directory, when init creates them."""
    files: list[Path]
    """The SQLite database and its side files, and the master key file, when init creates them."""

    @classmethod
    def of(cls, settings: Settings) -> Made:
        """What an init on these settings would create, taken before it starts."""
        files: list[Path] = []
        database = _sqlite_path(settings.effective_database_url)
        if database is not None and not database.exists():
            files += [database.with_name(database.name + end) for end in SQLITE_SIDE_FILES]
        key_file = settings.effective_master_key_file
        if settings.master_key is None and not key_file.exists():
            files.append(key_file)
        directories = {settings.data_dir} | ({database.parent} if database else set())
        return cls(sorted(d for d in directories if not d.exists()), files)

    def undo(self, app: App) -> None:
        app.db.engine.dispose()  # no connection holds the database file any more
        for path in self.files:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        for directory in self.directories:
            shutil.rmtree(directory, ignore_errors=True)


SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")
"""The database file itself and the files SQLite keeps beside it."""


def _sqlite_path(url: str) -> Path | None:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _fix_shards(app: App) -> None:
    """Fix the shard count now (``FLEETCRON_SHARDS``), or refuse another than the fixed
    one. The second node of a replicated pair receives it from the first."""
    if app.settings.topology is Topology.REPLICATED_PAIR:
        return
    with app.db.session() as session:
        fixed_shards(app, session)


def _init(app: App, made: Made, *, admin_name: str, admin_password: str | None) -> InitResult:
    settings = app.settings
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    warning = data_dir_warning(settings)
    key_file: Path | None = None
    if settings.effective_master_key_file in made.files:
        create_key_file(settings.effective_master_key_file)
        key_file = settings.effective_master_key_file
    app.master_key  # noqa: B018 - fail now, not at the first pairing, if the key is unusable
    app.db.upgrade()
    _fix_shards(app)
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
