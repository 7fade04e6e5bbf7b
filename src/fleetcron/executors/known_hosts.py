"""``known_hosts`` files and ``ssh-keyscan`` output, read to pin many targets at once (pure,
beside :mod:`fleetcron.executors.hostkeys`).

A line is ``[marker] hosts keytype base64 [comment]``: ``hosts`` is a comma-separated list
of names or patterns (``*``, ``?``, ``!negated``), ``[host]:port`` for a port other than
22, or one hashed entry ``|1|base64(salt)|base64(HMAC-SHA1(salt, name))`` (OpenSSH's
``HashKnownHosts``). ``ssh-keyscan`` prints the same lines, with ``# host:port SSH-2.0-...``
comments. Lines with a marker (``@cert-authority``, ``@revoked``) are not pins and are
counted apart; a line that is not a public key is reported with its number.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass

from fleetcron.errors import InvalidInput
from fleetcron.executors.hostkeys import normalize_key_line

#: The key type pinned when a host has several (ssh-keyscan prints one per type).
PREFERRED_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
    "ssh-rsa",
)


@dataclass(frozen=True)
class KnownHost:
    """One key line: who it is for (patterns, or a hashed name) and the key."""

    line_no: int
    hosts: str
    key: str

    def matches(self, host: str, port: int) -> bool:
        """Whether this line is for ``host`` at ``port`` (OpenSSH's matching)."""
        name = host if port == 22 else f"[{host}]:{port}"
        if self.hosts.startswith("|1|"):
            return _hashed_match(self.hosts, name)
        matched = False
        for pattern in self.hosts.split(","):
            negated = pattern.startswith("!")
            if _glob(pattern.lstrip("!")).fullmatch(name.lower()):
                if negated:
                    return False
                matched = True
        return matched


@dataclass(frozen=True)
class KnownHostsFile:
    """What a file held: its key lines, the marker lines skipped and the bad lines."""

    entries: tuple[KnownHost, ...]
    markers: int
    bad_lines: tuple[int, ...]


def parse_known_hosts(text: str) -> KnownHostsFile:
    """Every key line of ``text`` (known_hosts or ssh-keyscan output)."""
    entries: list[KnownHost] = []
    markers = 0
    bad: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            markers += 1
            continue
        parts = line.split()
        try:
            if len(parts) < 3:
                raise InvalidInput("short line", field="file")
            entries.append(KnownHost(number, parts[0], normalize_key_line(" ".join(parts[1:3]))))
        except InvalidInput:
            bad.append(number)
    return KnownHostsFile(tuple(entries), markers, tuple(bad))


def keys_for(known: KnownHostsFile, host: str, port: int) -> list[str]:
    """The distinct keys the file has for ``host:port``, the preferred type first."""
    keys: list[str] = []
    for entry in known.entries:
        if entry.key not in keys and entry.matches(host, port):
            keys.append(entry.key)
    return sorted(keys, key=_preference)


def _preference(key: str) -> int:
    kind = key.split(" ", 1)[0]
    return PREFERRED_TYPES.index(kind) if kind in PREFERRED_TYPES else len(PREFERRED_TYPES)


def _glob(pattern: str) -> re.Pattern[str]:
    """OpenSSH's host pattern: ``*`` and ``?`` are wildcards, everything else (brackets of
    ``[host]:port`` included) is literal."""
    literal = re.escape(pattern.lower())
    return re.compile(literal.replace(r"\*", ".*").replace(r"\?", "."))


def _hashed_match(hashed: str, name: str) -> bool:
    try:
        _, _, salt, digest = hashed.split("|", 3)
        salt_bytes = base64.b64decode(salt, validate=True)
        expected = base64.b64decode(digest, validate=True)
    except (ValueError, binascii.Error):
        return False
    mac = hmac.new(salt_bytes, name.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(mac, expected)
