"""Rules every channel kind shares. Pure: no I/O.

Secrets are returned apart from the settings so the caller can encrypt them; error
messages name the field and never show a secret.
"""

from __future__ import annotations

import ipaddress

from fleetcron.errors import InvalidInput

MIN_SECRET_LENGTH = 16
MAX_SECRET_LENGTH = 1024


def valid_secret(secret: str | None, *, field_name: str) -> str | None:
    if secret is None:
        return None
    rule = f"{MIN_SECRET_LENGTH} to {MAX_SECRET_LENGTH} characters"
    if not MIN_SECRET_LENGTH <= len(secret) <= MAX_SECRET_LENGTH:
        raise InvalidInput(
            f"{field_name}: must be {rule} long (got {len(secret)})",
            field=field_name,
            value="**********",
            allowed=rule,
        )
    return secret


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["MAX_SECRET_LENGTH", "MIN_SECRET_LENGTH", "is_loopback", "valid_secret"]
