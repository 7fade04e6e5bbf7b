"""Backups of the whole state in one file, and restoring them into an empty installation.

A backup is a gzip'ed tar archive of two members, the manifest first::

    manifest.json      format and version, created_at, fleetcron version, database kind,
                       schema revision, SHA-256 of the database member, a key check (a
                       token the master key decrypts), and the master key wrapped with a
                       passphrase (scrypt, then Fernet) or null (``--no-key``)
    database.sqlite    SQLite: an online copy made with SQLite's backup API
    database.pgdump    PostgreSQL: ``pg_dump --format=custom``

Restoring checks everything it can before writing anything: the format, the database kind
against the configured one, the schema revision (newer than this fleetcron is refused; older
is migrated after the restore), the master key (the passphrase unwraps it, or the key given
separately matches the key check), the emptiness of the target and the checksum.

The format (manifest, members, the wrapped key, reading a backup) is
:mod:`fleetcron.services.backup.archive`; PostgreSQL's dump and restore with the client
tools is :mod:`fleetcron.services.backup.postgres`.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, inspect, select
from sqlalchemy.engine import make_url

from fleetcron import __version__
from fleetcron.app import App
from fleetcron.config import Settings
from fleetcron.config_view import mask_url
from fleetcron.crypto import MasterKey
from fleetcron.errors import Conflict, InvalidInput, SecretError, StoreError
from fleetcron.services.backup.archive import (
    FORMAT_VERSION,
    KEY_CHECK,
    MEMBERS,
    MIN_PASSPHRASE_LENGTH,
    Manifest,
    extract_database,
    file_sha256,
    not_a_backup,
    read_manifest,
    unwrap_key,
    wrap_key,
    write_archive,
)
from fleetcron.services.backup.archive import MANIFEST as MANIFEST
from fleetcron.services.backup.postgres import (
    dump_postgres,
    find_pg_tool,
    libpq_conninfo,
    restore_postgres,
)
from fleetcron.store.db import Database, alembic_config
from fleetcron.store.schema import ClusterSecret, NotificationChannel, Target

__all__ = [
    "FORMAT_VERSION",
    "MIN_PASSPHRASE_LENGTH",
    "BackupResult",
    "Manifest",
    "RestoreResult",
    "create_backup",
    "find_pg_tool",
    "libpq_conninfo",
    "read_manifest",
    "restore_backup",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackupResult:
    path: Path
    kind: str
    revision: str
    size: int
    key_included: bool


@dataclass(frozen=True)
class RestoreResult:
    kind: str
    database: str
    """The database restored into, its password masked."""
    created_at: str
    revision_in_backup: str
    revision: str | None
    master_key_file: Path | None
    """The key file written, or None when the key came from the environment or was there."""

    @property
    def migrated(self) -> bool:
        return self.revision != self.revision_in_backup


# -- backing up ------------------------------------------------------------------------


def create_backup(
    app: App,
    path: Path,
    *,
    passphrase: str | None,
    include_key: bool = True,
    overwrite: bool = False,
    pg_bin_dir: Path | None = None,
) -> BackupResult:
    """Write a consistent snapshot of the whole state to ``path`` (mode 0600).

    The master key goes in wrapped with ``passphrase`` unless ``include_key`` is false.
    The file appears only once complete; an existing one is replaced only with
    ``overwrite``.
    """
    settings = app.settings
    _check_destination(path, overwrite=overwrite)
    raw_key = _installed_key(settings)
    if include_key:
        _check_key_can_go_in(settings, raw_key, passphrase)
    kind = "sqlite" if settings.is_sqlite else "postgresql"
    master = MasterKey(raw_key) if raw_key is not None else None
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        snapshot = work / MEMBERS[kind]
        revision = _snapshot(app, snapshot, master=master, pg_bin_dir=pg_bin_dir)
        wrapped = (
            wrap_key(raw_key, passphrase)
            if include_key and raw_key is not None and passphrase is not None
            else None
        )
        manifest = _manifest(app, snapshot, revision=revision, master=master, wrapped=wrapped)
        archive = work / "backup.tar.gz"
        write_archive(archive, manifest, snapshot)
        os.replace(archive, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = BackupResult(
        path, kind, revision, path.stat().st_size, manifest.wrapped_key is not None
    )
    _log_written(result)
    return result


def _manifest(
    app: App,
    snapshot: Path,
    *,
    revision: str,
    master: MasterKey | None,
    wrapped: dict[str, Any] | None,
) -> Manifest:
    """What the archive says of its snapshot: kind, schema, checksum, and the key's check
    and wrapped copy."""
    return Manifest(
        version=FORMAT_VERSION,
        created_at=app.now().isoformat(),
        fleetcron_version=__version__,
        kind="sqlite" if app.settings.is_sqlite else "postgresql",
        revision=revision,
        database_sha256=file_sha256(snapshot),
        key_check=master.encrypt(KEY_CHECK).decode() if master is not None else None,
        wrapped_key=wrapped,
    )


def _log_written(result: BackupResult) -> None:
    log.info(
        "backup: wrote %s (%s, schema %s, %d bytes, master key %s)",
        result.path,
        result.kind,
        result.revision,
        result.size,
        "included" if result.key_included else "left out",
        extra={"action": "backup.create"},
    )


def _check_destination(path: Path, *, overwrite: bool) -> None:
    """The backup file's name: a file in an existing directory, not there yet unless it
    may be replaced."""
    if path.is_dir():
        raise InvalidInput(
            f"{path} is a directory", field="file", value=str(path), allowed="a file name"
        )
    if not path.parent.is_dir():
        raise InvalidInput(
            f"{path.parent} does not exist",
            field="file",
            value=str(path),
            allowed="a file in an existing directory",
        )
    if path.exists() and not overwrite:
        raise Conflict(f"{path} already exists; choose another name or use --force to replace it")


def _check_key_can_go_in(settings: Settings, raw_key: bytes | None, passphrase: str | None) -> None:
    """A backup that includes the master key needs the key and a passphrase to wrap it."""
    if raw_key is None:
        raise SecretError(
            f"no master key to put in the backup: {settings.effective_master_key_file} "
            "does not exist and FLEETCRON_MASTER_KEY is not set"
        )
    if passphrase is None:
        raise InvalidInput(
            "a passphrase is needed to wrap the master key in the backup: give "
            "--passphrase-file FILE or FLEETCRON_BACKUP_PASSPHRASE, or use --no-key to "
            "leave the key out",
            field="passphrase",
            value=None,
            allowed="--passphrase-file FILE or FLEETCRON_BACKUP_PASSPHRASE, "
            "or --no-key to leave the key out",
        )
    _check_passphrase(passphrase)


def _snapshot(
    app: App, snapshot: Path, *, master: MasterKey | None, pg_bin_dir: Path | None
) -> str:
    """Copy the database to ``snapshot`` and check that the key (if any) reads its stored
    secrets; return the copy's schema revision."""
    if not app.settings.is_sqlite:
        revision = dump_postgres(app.db, snapshot, pg_bin_dir)
        if master is not None:
            _check_key_decrypts_stored_secrets(app.db.engine, master)
        return revision
    # Only SQLite's backup API touches the live file: fleetcron's engine would take
    # the writer lock (BEGIN IMMEDIATE) and wait for the scheduler.
    revision = _snapshot_sqlite(_sqlite_path(app.settings), snapshot)
    if master is not None:
        copy = create_engine(f"sqlite:///{snapshot}")
        try:
            _check_key_decrypts_stored_secrets(copy, master)
        finally:
            copy.dispose()
    return revision


def _installed_key(settings: Settings) -> bytes | None:
    """The master key as configured (environment, else key file), or None if there is none."""
    if settings.master_key is not None and settings.master_key.get_secret_value().strip():
        return settings.master_key.get_secret_value().strip().encode()
    try:
        return settings.effective_master_key_file.read_bytes().strip() or None
    except FileNotFoundError:
        return None
    except PermissionError:
        raise SecretError(
            f"cannot read the master key file {settings.effective_master_key_file}: "
            "permission denied"
        ) from None


def _check_passphrase(passphrase: str) -> None:
    if len(passphrase) < MIN_PASSPHRASE_LENGTH:
        raise InvalidInput(
            f"passphrase: too short ({len(passphrase)} characters); "
            f"use at least {MIN_PASSPHRASE_LENGTH}",
            field="passphrase",
            value="(not shown)",
            allowed=f"at least {MIN_PASSPHRASE_LENGTH} characters",
        )


def _check_key_decrypts_stored_secrets(engine: Engine, master: MasterKey) -> None:
    """A backup whose key cannot read the stored secrets would restore useless: stop now."""
    with engine.connect() as conn:
        # A backup taken before `fleetcron db upgrade` may lack the newer tables.
        tables = set(inspect(conn).get_table_names())
        for column in (
            Target.private_key_enc,
            ClusterSecret.secret_enc,
            NotificationChannel.secret_enc,
        ):
            if column.class_.__tablename__ not in tables:
                continue
            token = conn.scalar(select(column).where(column.is_not(None)).limit(1))
            if token is not None:
                master.decrypt(token)
                return


def _sqlite_path(settings: Settings) -> Path:
    database = make_url(settings.effective_database_url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        raise StoreError(
            f"cannot back up or restore the SQLite database {database or '(none)'}: "
            "only a database file is supported"
        )
    return Path(database)


def _snapshot_sqlite(db_path: Path, dest: Path) -> str:
    """Copy the live database with SQLite's online backup API; return its schema revision."""
    if not db_path.is_file():
        # Checked first: connecting would create an empty database file.
        raise StoreError(f"there is no database at {db_path} to back up")
    try:
        source = sqlite3.connect(db_path, timeout=10)
        try:
            target = sqlite3.connect(dest)
            try:
                # One step (pages=-1) reads one snapshot; in WAL mode the scheduler keeps
                # writing meanwhile, and what it commits later is simply not in the copy.
                source.backup(target)
                # The copy is one self-contained file; restore switches WAL back on.
                target.execute("PRAGMA journal_mode=DELETE")
                revision = _sqlite_revision(target)
            finally:
                target.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot copy the SQLite database {db_path}: {exc}") from exc
    if revision is None:
        raise StoreError(f"{db_path} holds no fleetcron schema; there is nothing to back up")
    return revision


def _sqlite_revision(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        return None
    return str(row[0]) if row else None


# -- restoring -------------------------------------------------------------------------


def restore_backup(
    settings: Settings,
    path: Path,
    *,
    passphrase: str | None,
    pg_bin_dir: Path | None = None,
) -> RestoreResult:
    """Restore the backup at ``path`` into the empty installation ``settings`` describes.

    Every check runs before anything is written. The master key file is written (mode
    0600) unless the key comes from the environment; a schema older than this fleetcron
    is migrated afterwards.
    """
    manifest = read_manifest(path)
    kind = "sqlite" if settings.is_sqlite else "postgresql"
    _check_kind_matches(settings, path, manifest)
    _check_revision_known(manifest.revision)
    key, write_key = _restore_key(settings, manifest, passphrase)
    key_file = settings.effective_master_key_file
    if kind == "sqlite":
        db_path = _sqlite_path(settings)
        _check_data_dir_empty(settings, db_path)
        _restore_sqlite(path, manifest, db_path, settings.data_dir)
    else:
        restore_postgres(path, manifest, settings.effective_database_url, pg_bin_dir)
    written = _write_key_file(key_file, key) if write_key else None
    revision = _migrated(settings)
    result = RestoreResult(
        kind=kind,
        database=mask_url(settings.effective_database_url),
        created_at=manifest.created_at,
        revision_in_backup=manifest.revision,
        revision=revision,
        master_key_file=written,
    )
    log.info(
        "backup: restored %s (%s, made %s) into %s, schema %s -> %s",
        path,
        kind,
        manifest.created_at,
        result.database,
        manifest.revision,
        revision,
        extra={"action": "backup.restore"},
    )
    return result


def _check_kind_matches(settings: Settings, path: Path, manifest: Manifest) -> None:
    """A backup restores into the kind of database it was made from."""
    kind = "sqlite" if settings.is_sqlite else "postgresql"
    if manifest.kind != kind:
        raise InvalidInput(
            f"{path} holds a {manifest.kind} database but this fleetcron is configured for "
            f"{kind} ({mask_url(settings.effective_database_url)})",
            field="database_url",
            value=None,
            allowed=(
                "a FLEETCRON_DATABASE_URL of an empty PostgreSQL database"
                if manifest.kind == "postgresql"
                else "no FLEETCRON_DATABASE_URL (SQLite in the data dir)"
            ),
        )


def _migrated(settings: Settings) -> str | None:
    """Bring the restored schema up to this fleetcron's; return its revision."""
    database = Database(settings.effective_database_url)
    try:
        if database.current_revision() != database.head_revision():
            database.upgrade()
        return database.current_revision()
    finally:
        database.dispose()


def _check_revision_known(revision: str) -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    known = {script.revision for script in scripts.walk_revisions()}
    if revision not in known:
        raise StoreError(
            f"the backup's database schema is at revision {revision}, which this fleetcron "
            f"does not know (its newest is {scripts.get_current_head()}): the backup comes "
            "from a newer fleetcron; restore it with that version or a later one"
        )


def _restore_key(
    settings: Settings, manifest: Manifest, passphrase: str | None
) -> tuple[bytes, bool]:
    """The master key of the restored data, and whether the key file must be written."""
    secret = settings.master_key.get_secret_value().strip() if settings.master_key else ""
    from_env = secret.encode() if secret else None
    key_file = settings.effective_master_key_file
    if manifest.wrapped_key is not None:
        if passphrase is None:
            raise InvalidInput(
                "this backup's master key is wrapped with a passphrase: give "
                "--passphrase-file FILE or FLEETCRON_BACKUP_PASSPHRASE",
                field="passphrase",
                value=None,
                allowed="--passphrase-file FILE or FLEETCRON_BACKUP_PASSPHRASE",
            )
        key = unwrap_key(manifest.wrapped_key, passphrase)
        if from_env is not None and from_env != key:
            raise SecretError(
                "FLEETCRON_MASTER_KEY is not the master key of this backup; unset it to "
                "restore the backup's key into the key file, or set it to that key"
            )
        write = from_env is None
        if write and key_file.exists():
            if _read_key_file(key_file) != key:
                raise Conflict(f"{key_file} holds another master key; refusing to replace it")
            write = False
    elif from_env is not None:
        key, write = from_env, False
    elif key_file.exists():
        key, write = _read_key_file(key_file), False
    else:
        raise SecretError(
            "this backup holds no master key (it was made with --no-key): set "
            "FLEETCRON_MASTER_KEY, or FLEETCRON_MASTER_KEY_FILE to a file holding it"
        )
    if manifest.key_check is not None:
        try:
            MasterKey(key).decrypt(manifest.key_check.encode())
        except SecretError:
            raise SecretError(
                "the master key given (FLEETCRON_MASTER_KEY / FLEETCRON_MASTER_KEY_FILE) is "
                "not the key of this backup; nothing was restored"
            ) from None
    return key, write


def _read_key_file(path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except OSError as exc:
        raise SecretError(f"cannot read the master key file {path}: {exc.strerror}") from None


def _check_data_dir_empty(settings: Settings, db_path: Path) -> None:
    for existing in (db_path, db_path.with_name(db_path.name + "-wal")):
        if existing.exists():
            raise Conflict(
                f"{existing} already exists; restore into an empty data dir "
                "(FLEETCRON_DATA_DIR) so no data is overwritten"
            )
    data_dir = settings.data_dir
    if not data_dir.exists():
        return
    if not data_dir.is_dir():
        raise Conflict(f"the data dir {data_dir} is not a directory")
    # A key file placed there for a --no-key backup is expected; anything else is data.
    others = sorted(p.name for p in data_dir.iterdir() if p != settings.effective_master_key_file)
    if others:
        raise Conflict(
            f"the data dir {data_dir} is not empty ({', '.join(others[:5])}); "
            "restore into an empty or new data dir so no data is overwritten"
        )


def _restore_sqlite(path: Path, manifest: Manifest, db_path: Path, data_dir: Path) -> None:
    created = [d for d in (data_dir, db_path.parent) if not d.exists()]
    for directory in created:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = db_path.with_name(f".{db_path.name}.restoring")
    partial.unlink(missing_ok=True)
    try:
        extract_database(path, manifest, partial)
        _check_sqlite_file(path, partial)
        os.replace(partial, db_path)
    except BaseException:
        partial.unlink(missing_ok=True)
        for directory in created:
            shutil.rmtree(directory, ignore_errors=True)
        raise


def _check_sqlite_file(path: Path, database: Path) -> None:
    try:
        conn = sqlite3.connect(database)
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise not_a_backup(path, f"its SQLite database cannot be opened: {exc}") from None
    if not verdict or verdict[0] != "ok":
        raise not_a_backup(path, f"its SQLite database is damaged: {verdict}")


def _write_key_file(path: Path, key: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key + b"\n")
    return path
