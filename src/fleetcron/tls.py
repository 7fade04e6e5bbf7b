"""Verifying TLS contexts for the connections fleetcron opens (the LDAP directory, the
SMTP server's STARTTLS), kept per CA file.

Building a context reads its CA file, or without one the system's whole bundle (about
20 ms of CPU for Debian's 144 certificates), and an LDAP log-in binds two or three times.
A context is kept per CA file and built again when what it was read from changes on disk
(the file, or the system's bundle and directory: inode, size and modification time are
part of the cache key), so a replaced CA is trusted at the next connection and the old one
no longer. A context here only verifies (no client certificate, no per-connection state)
and may wrap several connections at once.
"""

from __future__ import annotations

import functools
import os
import ssl

__all__ = ["verifying_context"]

#: What a file's contents are taken to be: its path, and its inode, size and modification
#: time (None when it cannot be read).
_FileStamp = tuple[str, tuple[int, int, int] | None]


def _stamp(path: str | None) -> _FileStamp | None:
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return (path, None)
    return (path, (found.st_ino, found.st_size, found.st_mtime_ns))


def _trust_stamp(ca_file: str | None) -> tuple[_FileStamp | None, ...]:
    """What the trust of a context for ``ca_file`` is read from, as it is on disk now: the
    file itself, or the system's default bundle and directory when there is none."""
    if ca_file is not None:
        return (_stamp(ca_file),)
    defaults = ssl.get_default_verify_paths()
    return (
        _stamp(defaults.cafile or defaults.openssl_cafile),
        _stamp(defaults.capath or defaults.openssl_capath),
    )


@functools.lru_cache(maxsize=8)
def _context(ca_file: str | None, stamp: tuple[_FileStamp | None, ...]) -> ssl.SSLContext:
    # ``stamp`` is only the cache key: a changed CA file (or system bundle) is a new key.
    return ssl.create_default_context(cafile=ca_file)


def verifying_context(ca_file: str | None = None) -> ssl.SSLContext:
    """The context that verifies a server against ``ca_file`` (None: the system's CAs) and
    its host name, built again only when what it trusts changed on disk."""
    return _context(ca_file, _trust_stamp(ca_file))
