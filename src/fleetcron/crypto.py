"""Secrets at rest: the master key, and encryption of target private keys with it.

Encryption is Fernet (AES-128-CBC with HMAC-SHA256, from ``cryptography``): authenticated,
versioned, and well reviewed. The master key comes from ``FLEETCRON_MASTER_KEY``, or a key
file (``FLEETCRON_MASTER_KEY_FILE``, default ``<data_dir>/master.key``, mode 0600) that
``fleetcron init`` creates. Decrypted secrets live only in memory, wrapped in
:class:`Secret` so that no ``repr``, log line or traceback shows them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from fleetcron.errors import SecretError


class Secret:
    """A value that never shows itself in ``repr`` or ``str``."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class MasterKey:
    """Encrypts and decrypts secrets stored in the database."""

    def __init__(self, key: bytes) -> None:
        self._mac_root = hashlib.sha256(b"fleetcron-master-key-derivation\0" + key).digest()
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError) as exc:
            raise SecretError(
                "the master key is not valid: expected 32 bytes in url-safe base64 "
                "(as written by `fleetcron init`)"
            ) from exc

    def __repr__(self) -> str:
        return "MasterKey('**********')"

    def derive(self, purpose: str) -> Secret:
        """A key for ``purpose`` alone (HMAC-SHA256 of the purpose under the master key):
        a secret derived from it never reveals the master key or another purpose's key."""
        return Secret(hmac.new(self._mac_root, purpose.encode(), hashlib.sha256).digest())

    def encrypt(self, plaintext: bytes) -> bytes:
        return self._fernet.encrypt(plaintext)

    def decrypt(self, token: bytes) -> Secret:
        try:
            return Secret(self._fernet.decrypt(token))
        except InvalidToken as exc:
            raise SecretError(
                "a stored secret cannot be decrypted with this master key; "
                "check FLEETCRON_MASTER_KEY / FLEETCRON_MASTER_KEY_FILE"
            ) from exc


def generate_key() -> bytes:
    return Fernet.generate_key()


def create_key_file(path: Path) -> bytes:
    """Write a new master key to ``path`` with mode 0600; refuse to overwrite one."""
    key = generate_key()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.parent.is_dir():
            raise SecretError(f"{path} already exists; refusing to replace a master key") from None
        raise SecretError(
            f"cannot create the master key {path}: {path.parent} is not a directory"
        ) from None
    except OSError as exc:
        raise SecretError(f"cannot create the master key {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(key + b"\n")
    return key


def load_master_key(env_value: str | None, key_file: Path) -> MasterKey:
    """The master key from the environment value if set, else from the key file."""
    if env_value:
        return MasterKey(env_value.strip().encode())
    try:
        return MasterKey(key_file.read_bytes().strip())
    except FileNotFoundError:
        raise SecretError(
            f"no master key: {key_file} does not exist; run `fleetcron init` "
            "or set FLEETCRON_MASTER_KEY / FLEETCRON_MASTER_KEY_FILE"
        ) from None
    except PermissionError:
        raise SecretError(
            f"cannot read the master key file {key_file}: permission denied"
        ) from None
