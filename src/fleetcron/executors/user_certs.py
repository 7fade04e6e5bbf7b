"""OpenSSH user certificates: what one says about itself (pure, read with asyncssh).

A target may log in with a user certificate (``ssh-keygen -s CA -I ID -n USER``) next to
its private key. :func:`read_user_cert` checks one before it is stored: a user (not host)
certificate, for the target's private key, not expired. At connection time
:func:`refuse_expired` refuses an expired one with a clear message before anything is
tried; within :data:`~fleetcron.core.targets.CLIENT_CERT_EXPIRY_WARNING` of its expiry,
the executor logs a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import asyncssh
from asyncssh.public_key import CERT_TYPE_USER, SSHOpenSSHCertificate

from fleetcron.core.targets import CLIENT_CERT_EXPIRY_WARNING
from fleetcron.errors import AuthError, InvalidInput

#: ``valid_before`` of a certificate that never expires (OpenSSH's ``forever``).
FOREVER = 2**64 - 1

ALLOWED = "an OpenSSH user certificate (ssh-keygen -s CA -I ID -n USER key.pub) for the key"


_CERT_FIELDS = ("cert_type", "key_id", "valid_after", "valid_before")


@dataclass(frozen=True)
class UserCert:
    """What a user certificate says: its key id, principals and validity."""

    key_id: str
    principals: tuple[str, ...]
    valid_after: datetime
    #: None: never expires.
    valid_before: datetime | None


def _when(stamp: int) -> datetime:
    return datetime.fromtimestamp(min(stamp, 253402300799), UTC)


def parse_user_cert(data: str | bytes, *, field: str = "client_cert") -> tuple[UserCert, object]:
    """The certificate ``data`` as :class:`UserCert` and as asyncssh's object."""
    try:
        cert = asyncssh.import_certificate(data)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise InvalidInput(
            f"{field}: not an OpenSSH certificate ({exc})",
            field=field,
            value="(file contents not shown)",
            allowed=ALLOWED,
        ) from None
    # asyncssh keeps what a certificate says in private attributes (2.x): read, never set.
    fields = {name: getattr(cert, f"_{name}", None) for name in _CERT_FIELDS}
    if not isinstance(cert, SSHOpenSSHCertificate) or fields["cert_type"] != CERT_TYPE_USER:
        raise InvalidInput(
            f"{field}: a host certificate, not a user certificate",
            field=field,
            value="(file contents not shown)",
            allowed=ALLOWED,
        )
    valid_before, valid_after = int(fields["valid_before"] or 0), int(fields["valid_after"] or 0)
    before = None if valid_before >= FOREVER else _when(valid_before)
    info = UserCert(str(fields["key_id"] or ""), tuple(cert.principals), _when(valid_after), before)
    return info, cert


def read_user_cert(
    data: bytes, private_key: bytes, *, now: datetime, field: str = "client_cert"
) -> UserCert:
    """Check a user certificate before it is stored: for this private key, valid now."""
    info, cert = parse_user_cert(data, field=field)
    key = asyncssh.import_private_key(private_key)
    subject = cert.key  # type: ignore[attr-defined]
    if subject.public_data != key.public_data:
        raise InvalidInput(
            f"{field}: the certificate is for another key than the target's private key",
            field=field,
            value=info.key_id,
            allowed=ALLOWED,
        )
    if info.valid_before is not None and info.valid_before <= now:
        raise InvalidInput(
            f"{field}: the certificate {info.key_id!r} expired at "
            f"{info.valid_before.isoformat(timespec='seconds')}",
            field=field,
            value=info.key_id,
            allowed=ALLOWED + ", valid now",
        )
    if info.valid_after > now:
        raise InvalidInput(
            f"{field}: the certificate {info.key_id!r} is not valid before "
            f"{info.valid_after.isoformat(timespec='seconds')}",
            field=field,
            value=info.key_id,
            allowed=ALLOWED + ", valid now",
        )
    return info


def refuse_expired(name: str, info: UserCert, now: datetime) -> None:
    """An expired (or not yet valid) certificate is refused before connecting."""
    if info.valid_before is not None and info.valid_before <= now:
        raise AuthError(
            f"the user certificate of target {name} ({info.key_id!r}) expired at "
            f"{info.valid_before.isoformat(timespec='seconds')}; nothing was tried. Give "
            f"a renewed one (`fleetcron target edit {name} --cert FILE`)"
        )
    if info.valid_after > now:
        raise AuthError(
            f"the user certificate of target {name} ({info.key_id!r}) is not valid before "
            f"{info.valid_after.isoformat(timespec='seconds')}; nothing was tried"
        )


def expires_soon(info: UserCert, now: datetime) -> bool:
    return info.valid_before is not None and info.valid_before - now <= CLIENT_CERT_EXPIRY_WARNING
