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


#: What a host CA field holds, in its errors.
HOST_CA_ALLOWED = (
    "one or more CA public key lines (as in a .pub file), optionally with "
    '"@revoked <type> <base64>" lines for revoked host keys'
)


def split_host_ca(text: str, field: str = "host_ca") -> tuple[list[str], list[str]]:
    """The CA key lines and the revoked key lines of a host CA field, each normalized
    (``@cert-authority PATTERN`` prefixes, as copied from known_hosts, are accepted)."""
    cas: list[str] = []
    revoked: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0] == "@revoked":
            revoked.append(_normalized(" ".join(words[1:]), field))
        elif words[0] == "@cert-authority":
            cas.append(_normalized(" ".join(words[2:]), field))
        else:
            cas.append(_normalized(line, field))
    if not cas:
        raise InvalidInput(
            f"{field}: no CA public key given",
            field=field,
            value=text[:80],
            allowed=HOST_CA_ALLOWED,
        )
    return cas, revoked


def normalize_host_ca(text: str, field: str = "host_ca") -> str:
    """A host CA field as stored: its CA lines, then ``@revoked`` lines, normalized."""
    cas, revoked = split_host_ca(text, field)
    return "\n".join([*cas, *(f"@revoked {line}" for line in revoked)])


def _normalized(line: str, field: str) -> str:
    try:
        kind, blob = parse_key_line(line, field)
    except InvalidInput as exc:
        raise InvalidInput(
            f"{field}: {exc.message}", field=field, value=line[:80], allowed=HOST_CA_ALLOWED
        ) from None
    return f"{kind} {base64.b64encode(blob).decode()}"
