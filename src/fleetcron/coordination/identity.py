"""Who a node is: a stable id per host, a fingerprint per (host, database cluster), an endpoint.

A node is named after its host's machine id (``/etc/machine-id``), which systemd creates once
per installation and keeps across renames and address changes. The raw id is treated as
sensitive: it is hashed here under an application-specific key and only the hash is kept, so
nothing stored, logged or sent by fleetcron can be joined with other software's use of it.

* ``node_id``: the first 16 hex characters of that hash, stable for the life of the host.
* ``fingerprint``: SHA-256 of the hash and the database's system identifier. It changes when
  the machine id changes or when the same host is pointed at another database cluster, so an
  approved node that comes back different cannot pass as the one that was approved.

Two hosts cloned from one disk image share a machine id and cannot be told apart by any
software; a clone must be given a new one before fleetcron starts on it.

Nothing here reads the clock or the network. The caller passes the file path, the hostname
and the database identifier, so tests pass their own.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from fleetcron.errors import CoordinationError, InvalidInput

__all__ = [
    "APP_KEY",
    "ENDPOINT_RULE",
    "MACHINE_ID_PATH",
    "NodeIdentity",
    "machine_hash",
    "node_identity",
    "normalize_endpoint",
    "read_machine_id",
]

APP_KEY = b"fleetcron node identity v1"
"""The HMAC key that makes the machine hash specific to fleetcron (not a secret)."""

MACHINE_ID_PATH = Path("/etc/machine-id")
"""Where systemd keeps the machine id; ``/var/lib/dbus/machine-id`` has the same format."""

ENDPOINT_RULE = (
    "an http:// or https:// URL with a host, an optional port and base path, "
    "and no user, query or fragment"
)

_CLONE_ADVICE = (
    "Every host needs its own machine id; a disk clone must get a new one: remove the file "
    "and run `systemd-machine-id-setup`."
)
_MACHINE_ID_RULE = "32 hexadecimal characters, as systemd and D-Bus write it"
_MACHINE_ID = re.compile(r"[0-9a-fA-F]{32}")
_DB_SYSTEM_ID = re.compile(r"[!-~]{1,128}")  # printable ASCII, no spaces
_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_NUMERIC = re.compile(r"[0-9.]+")
_PATH = re.compile(r"(/[A-Za-z0-9._~!$&'()*+,;=:@%-]*)*")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def machine_hash(machine_id: str, *, app_key: bytes = APP_KEY) -> str:
    """HMAC-SHA256 of the machine id (surrounding whitespace stripped) under ``app_key``, hex.

    The raw id is a host-wide identifier other software may use too; keyed hashing keeps
    fleetcron's copy from being matched against theirs.
    """
    return hmac.new(app_key, machine_id.strip().encode("utf-8"), hashlib.sha256).hexdigest()


def read_machine_id(path: Path = MACHINE_ID_PATH) -> str:
    """Read and validate the machine id at ``path``; return it as 32 lowercase hex characters.

    Accepts the systemd format and the D-Bus one (``/var/lib/dbus/machine-id``): 32 hex
    characters and a newline. Raises :class:`CoordinationError` naming the path when the file
    is missing, unreadable, empty, ``uninitialized`` (first boot not finished) or not a valid
    id. The content is never put in the message.
    """
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError as exc:
        raise CoordinationError(
            f"the machine id file {path} does not exist. {_CLONE_ADVICE}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise CoordinationError(
            f"the machine id in {path} is not valid: expected {_MACHINE_ID_RULE}. {_CLONE_ADVICE}"
        ) from exc
    except OSError as exc:
        raise CoordinationError(
            f"the machine id file {path} cannot be read: {exc.strerror or exc}. {_CLONE_ADVICE}"
        ) from exc
    value = _normalize_machine_id(text)
    if value is None:
        raise CoordinationError(
            f"the machine id in {path} is not valid: expected {_MACHINE_ID_RULE}. {_CLONE_ADVICE}"
        )
    return value


def _normalize_machine_id(text: str) -> str | None:
    value = text.strip()
    # An all-zero id is systemd's "null" id; an empty file or "uninitialized" means the first
    # boot has not created one yet. None of them tells hosts apart.
    if not _MACHINE_ID.fullmatch(value) or int(value, 16) == 0:
        return None
    return value.lower()


def normalize_endpoint(url: str) -> str:
    """Return the canonical form of a node's base URL, or raise :class:`InvalidInput`.

    Scheme and host are lowercased, the default port (80 for http, 443 for https) is
    dropped, trailing slashes go. Endpoints are compared exactly after this, e.g. when an
    operator types the fenced owner's endpoint to confirm a forced takeover.
    """
    if not isinstance(url, str):
        _bad_endpoint(url, "is not text")
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        _bad_endpoint(url, "is not a valid URL (check the port and brackets around IPv6)")
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        _bad_endpoint(url, "must start with http:// or https://")
    if parts.username is not None or parts.password is not None:
        _bad_endpoint(url, "must not contain a user name or password")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        _bad_endpoint(url, "must not contain a query or fragment")
    host = _normalize_host(parts.hostname or "")
    if host is None:
        _bad_endpoint(url, "does not name a valid host")
    if port == 0:
        _bad_endpoint(url, "has port 0")
    path = parts.path.rstrip("/")
    if not _PATH.fullmatch(path):
        _bad_endpoint(url, "has characters that are not allowed in its path")
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return f"{scheme}://{netloc}{path}"


def _normalize_host(host: str) -> str | None:
    host = host.lower()
    if not host:
        return None
    if ":" in host:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            return None
        return f"[{address.compressed}]"
    # "example.com." and "example.com" are the same name in DNS.
    name = host[:-1] if host.endswith(".") else host
    if _NUMERIC.fullmatch(name):
        # All digits and dots is meant as an IPv4 address; "10.0.0.05" or "999.1.1.1" is a typo.
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            return None
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return name


def _bad_endpoint(value: object, reason: str) -> NoReturn:
    raise InvalidInput(
        f"endpoint: {value!r} {reason}; allowed: {ENDPOINT_RULE}",
        field="endpoint",
        value=value,
        allowed=ENDPOINT_RULE,
    )


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """What a node says about itself; every field is safe to store, log and send."""

    node_id: str
    """First 16 hex characters of the machine hash: stable per host."""
    fingerprint: str
    """SHA-256 hex of ``machine hash + ":" + db_system_id``."""
    hostname: str
    version: str
    endpoint: str
    """Canonical base URL (see :func:`normalize_endpoint`)."""
    db_system_id: str
    """The database cluster's system identifier."""

    def as_dict(self) -> dict[str, str]:
        """The fields as a plain dict, ready to be signed and sent."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeIdentity:
        """Rebuild an identity a peer sent; raise :class:`CoordinationError` if malformed."""
        names = [field.name for field in fields(cls)]
        if not isinstance(data, Mapping) or set(data) != set(names):
            raise CoordinationError(
                f"a node identity must have exactly the fields {', '.join(names)}"
            )
        values = {name: data[name] for name in names}
        for name, value in values.items():
            if not isinstance(value, str) or not value:
                raise CoordinationError(f"node identity field {name} must be non-empty text")
        if not _HEX16.fullmatch(values["node_id"]) or not _HEX64.fullmatch(values["fingerprint"]):
            raise CoordinationError("node identity has a malformed node_id or fingerprint")
        try:
            if normalize_endpoint(values["endpoint"]) != values["endpoint"]:
                raise CoordinationError("node identity endpoint is not in canonical form")
        except InvalidInput as exc:
            raise CoordinationError(f"node identity endpoint is not valid: {exc}") from exc
        return cls(**values)


def node_identity(
    machine_id: str, db_system_id: str, hostname: str, version: str, endpoint: str
) -> NodeIdentity:
    """Build this node's identity; the raw ``machine_id`` is hashed and not kept.

    Raises :class:`InvalidInput` naming the field for a malformed machine id (its value is
    never repeated), database identifier, hostname, version or endpoint.
    """
    normalized = _normalize_machine_id(machine_id)
    if normalized is None:
        raise InvalidInput(
            f"machine_id: is not a valid machine id; allowed: {_MACHINE_ID_RULE}",
            field="machine_id",
            value="**********",
            allowed=_MACHINE_ID_RULE,
        )
    if not _DB_SYSTEM_ID.fullmatch(db_system_id):
        raise InvalidInput(
            f"db_system_id: {db_system_id!r} is not a database system identifier",
            field="db_system_id",
            value=db_system_id,
            allowed="1 to 128 printable ASCII characters without spaces",
        )
    for field, value in (("hostname", hostname), ("version", version)):
        if not value.strip() or len(value) > 255:
            raise InvalidInput(
                f"{field}: must be non-empty text of at most 255 characters",
                field=field,
                value=value,
                allowed="1 to 255 characters",
            )
    digest = machine_hash(normalized)
    return NodeIdentity(
        node_id=digest[:16],
        fingerprint=hashlib.sha256(f"{digest}:{db_system_id}".encode()).hexdigest(),
        hostname=hostname.strip(),
        version=version.strip(),
        endpoint=normalize_endpoint(endpoint),
        db_system_id=db_system_id,
    )
