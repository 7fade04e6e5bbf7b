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
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from alembic.script import ScriptDirectory
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from sqlalchemy import Engine, create_engine, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from fleetcron import __version__
from fleetcron.app import App
from fleetcron.config import Settings, mask_url
from fleetcron.crypto import MasterKey
from fleetcron.errors import Conflict, InvalidInput, SecretError, StoreError
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

FORMAT = "fleetcron-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MEMBERS = {"sqlite": "database.sqlite", "postgresql": "database.pgdump"}
MIN_PASSPHRASE_LENGTH = 8
KEY_CHECK = b"fleetcron backup key check"
# scrypt at n=2**15, r=8 costs ~32 MiB and ~0.1 s per attempt: cheap once, slow to guess.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
_MAX_SCRYPT_N = 2**20  # a crafted manifest must not make restore allocate gigabytes
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Manifest:
    """What a backup says about itself."""

    version: int
    created_at: str
    fleetcron_version: str
    kind: str
    revision: str
    database_sha256: str
    key_check: str | None
    wrapped_key: dict[str, Any] | None

    @property
    def member(self) -> str:
        return MEMBERS[self.kind]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": self.version,
            "created_at": self.created_at,
            "fleetcron_version": self.fleetcron_version,
            "database": {"kind": self.kind, "revision": self.revision},
            "database_sha256": self.database_sha256,
            "key_check": self.key_check,
            "master_key": self.wrapped_key,
        }


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
    raw_key = _installed_key(settings)
    if include_key:
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
    kind = "sqlite" if settings.is_sqlite else "postgresql"
    master = MasterKey(raw_key) if raw_key is not None else None
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        snapshot = work / MEMBERS[kind]
        if kind == "sqlite":
            # Only SQLite's backup API touches the live file: fleetcron's engine would take
            # the writer lock (BEGIN IMMEDIATE) and wait for the scheduler.
            revision = _snapshot_sqlite(_sqlite_path(settings), snapshot)
            if master is not None:
                copy = create_engine(f"sqlite:///{snapshot}")
                try:
                    _check_key_decrypts_stored_secrets(copy, master)
                finally:
                    copy.dispose()
        else:
            revision = _dump_postgres(app.db, snapshot, pg_bin_dir)
            if master is not None:
                _check_key_decrypts_stored_secrets(app.db.engine, master)
        manifest = Manifest(
            version=FORMAT_VERSION,
            created_at=app.now().isoformat(),
            fleetcron_version=__version__,
            kind=kind,
            revision=revision,
            database_sha256=_sha256(snapshot),
            key_check=master.encrypt(KEY_CHECK).decode() if master is not None else None,
            wrapped_key=(
                _wrap_key(raw_key, passphrase)
                if include_key and raw_key is not None and passphrase is not None
                else None
            ),
        )
        archive = work / "backup.tar.gz"
        _write_archive(archive, manifest, snapshot)
        os.replace(archive, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = BackupResult(
        path, kind, revision, path.stat().st_size, manifest.wrapped_key is not None
    )
    log.info(
        "backup: wrote %s (%s, schema %s, %d bytes, master key %s)",
        path,
        kind,
        revision,
        result.size,
        "included" if result.key_included else "left out",
        extra={"action": "backup.create"},
    )
    return result


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


def _dump_postgres(db: Database, dest: Path, bin_dir: Path | None) -> str:
    before = db.current_revision()
    if before is None:
        raise StoreError("the database holds no fleetcron schema; there is nothing to back up")
    _run_pg_tool(
        "pg_dump",
        ["--format=custom", "--no-owner", "--no-privileges", f"--file={dest}"],
        db.url,
        bin_dir,
    )
    # pg_dump reads one snapshot; only a migration in between could make the revision
    # read beside it wrong.
    if db.current_revision() != before:
        raise StoreError("the database schema changed during the backup; run the backup again")
    return before


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_archive(archive: Path, manifest: Manifest, database: Path) -> None:
    fd = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:gz") as tar:
            data = json.dumps(manifest.as_dict(), indent=2).encode()
            tar.addfile(_member(MANIFEST, len(data)), io.BytesIO(data))
            with database.open("rb") as handle:
                tar.addfile(_member(manifest.member, database.stat().st_size), handle)
        raw.flush()
        os.fsync(raw.fileno())


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o600
    return info


def _wrap_key(key: bytes, passphrase: str) -> dict[str, Any]:
    salt = os.urandom(16)
    kek = _derive(passphrase, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return {
        "kdf": "scrypt",
        "n": SCRYPT_N,
        "r": SCRYPT_R,
        "p": SCRYPT_P,
        "salt": base64.b64encode(salt).decode(),
        "cipher": "fernet",
        "token": Fernet(kek).encrypt(key).decode(),
    }


def _derive(passphrase: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    raw = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode())
    return base64.urlsafe_b64encode(raw)


def _unwrap_key(wrapped: dict[str, Any], passphrase: str) -> bytes:
    try:
        n, r, p = int(wrapped["n"]), int(wrapped["r"]), int(wrapped["p"])
        salt = base64.b64decode(wrapped["salt"], validate=True)
        token = str(wrapped["token"]).encode()
        if wrapped["kdf"] != "scrypt" or wrapped["cipher"] != "fernet":
            raise ValueError("unknown kdf or cipher")
        if not (1 < n <= _MAX_SCRYPT_N and n & (n - 1) == 0 and 0 < r <= 32 and 0 < p <= 16):
            raise ValueError("scrypt parameters out of range")
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"the backup's wrapped master key is malformed ({exc})",
            field="file",
            value=None,
            allowed="a file written by `fleetcron backup`",
        ) from None
    try:
        return Fernet(_derive(passphrase, salt, n, r, p)).decrypt(token)
    except InvalidToken:
        raise SecretError(
            "the passphrase does not unwrap this backup's master key (wrong passphrase?); "
            "nothing was restored"
        ) from None


# -- reading a backup ------------------------------------------------------------------


def _not_a_backup(path: Path, why: str) -> InvalidInput:
    return InvalidInput(
        f"{path} is not a fleetcron backup ({why})",
        field="file",
        value=str(path),
        allowed="a file written by `fleetcron backup`",
    )


def read_manifest(path: Path) -> Manifest:
    """The manifest of the backup at ``path``; InvalidInput when it is not one we can read."""
    if not path.is_file():
        raise InvalidInput(
            f"{path} does not exist or is not a file",
            field="file",
            value=str(path),
            allowed="a file written by `fleetcron backup`",
        )
    try:
        with tarfile.open(path, "r:gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile():
                raise _not_a_backup(path, f"its first member is not {MANIFEST}")
            handle = tar.extractfile(first)
            assert handle is not None
            data = json.loads(handle.read(1 << 20))
    except (tarfile.TarError, OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise _not_a_backup(path, str(exc) or type(exc).__name__) from None
    except json.JSONDecodeError as exc:
        raise _not_a_backup(path, f"its manifest is not JSON: {exc}") from None
    return _parse_manifest(path, data)


def _parse_manifest(path: Path, data: Any) -> Manifest:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _not_a_backup(path, "its manifest has no fleetcron format marker")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise _not_a_backup(path, f"unknown format version {version!r}")
    if version > FORMAT_VERSION:
        raise InvalidInput(
            f"{path} was written in backup format {version} by fleetcron "
            f"{data.get('fleetcron_version')}; this fleetcron reads format {FORMAT_VERSION}: "
            "restore it with a newer fleetcron",
            field="file",
            value=str(path),
            allowed=f"backup format {FORMAT_VERSION}",
        )
    try:
        database = data["database"]
        kind = str(database["kind"])
        manifest = Manifest(
            version=version,
            created_at=str(data["created_at"]),
            fleetcron_version=str(data.get("fleetcron_version", "")),
            kind=kind,
            revision=str(database["revision"]),
            database_sha256=str(data["database_sha256"]),
            key_check=None if data.get("key_check") is None else str(data["key_check"]),
            wrapped_key=data.get("master_key"),
        )
    except (KeyError, TypeError) as exc:
        raise _not_a_backup(path, f"its manifest lacks {exc}") from None
    if kind not in MEMBERS:
        raise _not_a_backup(path, f"unknown database kind {kind!r}")
    if manifest.wrapped_key is not None and not isinstance(manifest.wrapped_key, dict):
        raise _not_a_backup(path, "its master key entry is malformed")
    return manifest


def _extract_database(path: Path, manifest: Manifest, dest: Path) -> None:
    """Write the database member to ``dest`` (mode 0600) and check its checksum."""
    digest = hashlib.sha256()
    try:
        with tarfile.open(path, "r:gz") as tar:
            for info in tar:
                if info.name == manifest.member and info.isfile():
                    source = tar.extractfile(info)
                    assert source is not None
                    _copy(source, dest, digest)
                    break
            else:
                raise _not_a_backup(path, f"it holds no {manifest.member}")
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        dest.unlink(missing_ok=True)
        raise _not_a_backup(path, f"it is damaged: {exc}") from None
    if digest.hexdigest() != manifest.database_sha256:
        dest.unlink(missing_ok=True)
        raise InvalidInput(
            f"{path} is damaged: its database does not match the checksum in its manifest",
            field="file",
            value=str(path),
            allowed="an intact backup file",
        )


def _copy(source: IO[bytes], dest: Path, digest: Any) -> None:
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())


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
    _check_revision_known(manifest.revision)
    key, write_key = _restore_key(settings, manifest, passphrase)
    key_file = settings.effective_master_key_file
    if kind == "sqlite":
        db_path = _sqlite_path(settings)
        _check_data_dir_empty(settings, db_path)
        _restore_sqlite(path, manifest, db_path, settings.data_dir)
    else:
        _restore_postgres(path, manifest, settings.effective_database_url, pg_bin_dir)
    written = _write_key_file(key_file, key) if write_key else None
    database = Database(settings.effective_database_url)
    try:
        if database.current_revision() != database.head_revision():
            database.upgrade()
        revision = database.current_revision()
    finally:
        database.dispose()
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
        key = _unwrap_key(manifest.wrapped_key, passphrase)
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
        _extract_database(path, manifest, partial)
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
        raise _not_a_backup(path, f"its SQLite database cannot be opened: {exc}") from None
    if not verdict or verdict[0] != "ok":
        raise _not_a_backup(path, f"its SQLite database is damaged: {verdict}")


def _restore_postgres(path: Path, manifest: Manifest, url: str, bin_dir: Path | None) -> None:
    _check_database_empty(url)
    with tempfile.TemporaryDirectory(prefix="fleetcron-restore-") as work:
        dump = Path(work) / manifest.member
        _extract_database(path, manifest, dump)
        # One transaction: a failure leaves the database as empty as it was.
        _run_pg_tool(
            "pg_restore",
            ["--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", str(dump)],
            url,
            bin_dir,
        )


def _check_database_empty(url: str) -> None:
    database = Database(url)
    try:
        with database.engine.connect() as conn:
            relations = conn.execute(
                text(
                    "SELECT count(*) FROM pg_catalog.pg_class c"
                    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')"
                    " AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"
                )
            ).scalar_one()
    except SQLAlchemyError as exc:
        raise StoreError(
            f"cannot reach the database to restore into ({mask_url(url)}): "
            f"{getattr(exc, 'orig', exc)}; it must exist, empty"
        ) from exc
    finally:
        database.dispose()
    if relations:
        raise Conflict(
            f"the database {mask_url(url)} is not empty ({relations} relation(s)); "
            "restore into a new, empty database so no data is overwritten"
        )


def _write_key_file(path: Path, key: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key + b"\n")
    return path


# -- PostgreSQL client tools -----------------------------------------------------------


def find_pg_tool(name: str, bin_dir: Path | None = None) -> Path:
    """``bin_dir/name`` if given, else ``name`` on PATH, else the newest
    ``/usr/lib/postgresql/*/bin/name``."""
    if bin_dir is not None:
        candidate = bin_dir / name
        if candidate.is_file():
            return candidate
        raise StoreError(f"{name} is not in {bin_dir}")
    on_path = shutil.which(name)
    if on_path is not None:
        return Path(on_path)
    installed = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), key=_pg_version)
    if installed:
        return installed[-1]
    raise StoreError(
        f"{name} was not found on PATH nor under /usr/lib/postgresql/*/bin; install the "
        "PostgreSQL client tools (Debian: postgresql-client) in a version at least as new "
        "as the server"
    )


def _pg_version(tool: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in tool.parent.parent.name.split(".") if part.isdigit())


def libpq_conninfo(url: str) -> tuple[str, str | None]:
    """A libpq connection string for a SQLAlchemy URL, and the password apart (it goes to
    the tool in PGPASSWORD, never on a command line other users can read)."""
    from psycopg.conninfo import make_conninfo

    parsed = make_url(url)
    params: dict[str, str] = {}
    for key, value in (
        ("dbname", parsed.database),
        ("host", parsed.host),
        ("port", parsed.port),
        ("user", parsed.username),
    ):
        if value is not None:
            params[key] = str(value)
    for key, given in parsed.query.items():
        params[key] = given if isinstance(given, str) else given[-1]
    password = params.pop("password", None) or parsed.password
    return make_conninfo(**params), None if password is None else str(password)


def _run_pg_tool(name: str, args: list[str], url: str, bin_dir: Path | None) -> None:
    tool = find_pg_tool(name, bin_dir)
    conninfo, password = libpq_conninfo(url)
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = password
    result = subprocess.run(
        [str(tool), *args, "--no-password", f"--dbname={conninfo}"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        detail = result.stderr.strip() or result.stdout.strip() or "no output"
        raise StoreError(f"{name} failed (exit {result.returncode}): {detail}")
