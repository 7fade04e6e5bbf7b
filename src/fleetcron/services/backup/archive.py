"""The backup file format: the manifest, the archive's members, the master key wrapped
with a passphrase (scrypt, then Fernet), and reading a backup back with every check a
restore makes before it writes anything (:mod:`fleetcron.services.backup.create`).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from fleetcron.errors import InvalidInput, SecretError

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


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_archive(archive: Path, manifest: Manifest, database: Path) -> None:
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


def wrap_key(key: bytes, passphrase: str) -> dict[str, Any]:
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


class WrongPassphrase(SecretError, InvalidInput):
    """The passphrase given does not unwrap a backup's master key: a secret error that is
    also bad input (the CLI's exit 2), since the operator gave the wrong passphrase."""


def unwrap_key(wrapped: dict[str, Any], passphrase: str) -> bytes:
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
        raise WrongPassphrase(
            "the passphrase does not unwrap this backup's master key (wrong passphrase?); "
            "nothing was restored",
            field="passphrase",
            value=None,
            allowed="the passphrase the backup was made with",
        ) from None


# -- reading a backup ------------------------------------------------------------------


def not_a_backup(path: Path, why: str) -> InvalidInput:
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
                raise not_a_backup(path, f"its first member is not {MANIFEST}")
            handle = tar.extractfile(first)
            assert handle is not None
            data = json.loads(handle.read(1 << 20))
    except (tarfile.TarError, OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise not_a_backup(path, str(exc) or type(exc).__name__) from None
    except json.JSONDecodeError as exc:
        raise not_a_backup(path, f"its manifest is not JSON: {exc}") from None
    return _parse_manifest(path, data)


def _parse_manifest(path: Path, data: Any) -> Manifest:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise not_a_backup(path, "its manifest has no fleetcron format marker")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise not_a_backup(path, f"unknown format version {version!r}")
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
        raise not_a_backup(path, f"its manifest lacks {exc}") from None
    if kind not in MEMBERS:
        raise not_a_backup(path, f"unknown database kind {kind!r}")
    if manifest.wrapped_key is not None and not isinstance(manifest.wrapped_key, dict):
        raise not_a_backup(path, "its master key entry is malformed")
    return manifest


def extract_database(path: Path, manifest: Manifest, dest: Path) -> None:
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
                raise not_a_backup(path, f"it holds no {manifest.member}")
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        dest.unlink(missing_ok=True)
        raise not_a_backup(path, f"it is damaged: {exc}") from None
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
