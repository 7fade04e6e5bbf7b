"""Connection strings as they may be shown: every password in them replaced by the mask.

One function, :func:`mask_dsn`, for every place a database URL or a libpq connection
string is shown (``config show``, logs, error messages, audit details): a SQLAlchemy or
libpq URL (``postgresql+psycopg://user:PASSWORD@host/db?sslpassword=...``) and a libpq
``key=value`` string (``host=db password=... sslpassword=...``). What cannot be parsed is
masked whole: a string that fails to parse may still hold a password.
"""

from __future__ import annotations

import re

__all__ = ["LIBPQ_SECRET_KEYS", "MASK", "holds_secret", "mask_dsn"]

MASK = "**********"
LIBPQ_SECRET_KEYS = frozenset({"password", "sslpassword"})
"""The libpq connection parameters whose values are secrets (``passfile``, ``sslkey`` and
``sslcert`` name files; the key's passphrase is ``sslpassword``)."""

# One libpq ``keyword = value`` pair: the value single-quoted (with backslash escapes) or a
# run of non-blank characters (backslash escapes allowed), or empty at the end.
_PAIR = re.compile(
    r"\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*"
    r"(?P<value>'(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)+|(?=\s*$))\s*"
)
_PLACEHOLDER = "FLEETCRON-MASKED-PASSWORD"


def mask_dsn(text: str) -> str:
    """``text`` (a URL or a libpq ``key=value`` string) with every password masked."""
    if "://" in text:
        return _mask_url(text)
    return _mask_pairs(text)


def holds_secret(text: str) -> bool:
    """True when a connection string carries a password (or cannot be read to tell)."""
    return mask_dsn(text) != text


def _mask_url(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return MASK
    if parsed.password is not None:
        parsed = parsed.set(password=_PLACEHOLDER)
    secret = {key: _PLACEHOLDER for key in parsed.query if key.lower() in LIBPQ_SECRET_KEYS}
    if secret:
        parsed = parsed.update_query_dict(secret)
    return parsed.render_as_string(hide_password=False).replace(_PLACEHOLDER, MASK)


def _mask_pairs(conninfo: str) -> str:
    """The pairs with secret values masked; ``conninfo`` unchanged when it holds none."""
    shown: list[str] = []
    masked = False
    position = 0
    while position < len(conninfo):
        match = _PAIR.match(conninfo, position)
        if match is None or match.end() == position:
            return MASK
        key, value = match["key"], match["value"]
        if key.lower() in LIBPQ_SECRET_KEYS:
            value, masked = MASK, True
        shown.append(f"{key}={value}")
        position = match.end()
    return " ".join(shown) if masked else conninfo
