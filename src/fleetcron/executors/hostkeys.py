"""OpenSSH public key lines: parsing and fingerprints (pure)."""

from __future__ import annotations

import base64
import binascii
import hashlib

from fleetcron.errors import InvalidInput


def parse_key_line(line: str, field: str = "host_key") -> tuple[str, bytes]:
    """Split ``"ssh-ed25519 AAAA... [comment]"`` into its type and decoded key blob.

    Raises :class:`InvalidInput` naming ``field`` when the line is not a public key.
    """
    parts = line.split()
    if len(parts) < 2:
        raise InvalidInput(
            "not an OpenSSH public key line",
            field=field,
            value=line,
            allowed='"<type> <base64 key> [comment]", e.g. "ssh-ed25519 AAAAC3Nza..."',
        )
    kind, encoded = parts[0], parts[1]
    try:
        blob = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        blob = b""
    # The blob starts with its own length-prefixed type name; a mismatch means garbage.
    name_len = int.from_bytes(blob[:4], "big") if len(blob) >= 4 else -1
    if blob[4 : 4 + name_len] != kind.encode():
        raise InvalidInput(
            f"the key data does not match the key type {kind!r}",
            field=field,
            value=line,
            allowed="a public key line as printed by ssh-keyscan or a .pub file",
        )
    return kind, blob


def fingerprint(host_key_line: str) -> str:
    """The ``SHA256:...`` fingerprint of a public key line, as ``ssh-keygen -l`` prints it."""
    _, blob = parse_key_line(host_key_line)
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def normalize_key_line(line: str) -> str:
    """The line without its comment: ``"<type> <base64>"``."""
    kind, blob = parse_key_line(line)
    return f"{kind} {base64.b64encode(blob).decode()}"
