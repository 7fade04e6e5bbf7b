"""One SSH connection with the pinned host key, as the executor and pairing open it.

Only the target's pinned host key is accepted (no known_hosts file, no ~/.ssh/config, no
agent); a different key fails with :class:`~fleetcron.errors.HostKeyMismatch` naming both
fingerprints before anything is executed. The client key is parsed from memory and never
written anywhere. Pairing uses :func:`fetch_host_key` (trust on first use) and
:func:`verify_target` (log in and run ``true``, and an optional probe); the executor's pool
(:mod:`fleetcron.executors.ssh_pool`) opens its connections with :func:`open_pinned`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
from datetime import UTC, datetime
from typing import Any, Final

import asyncssh

from fleetcron.errors import AuthError, ConnectError, HostKeyMismatch, InvalidInput
from fleetcron.executors.base import SshTarget
from fleetcron.executors.hostkeys import fingerprint, split_host_ca
from fleetcron.executors.user_certs import expires_soon, parse_user_cert, refuse_expired

# The executor's logger: connection events are the SSH executor's events.
logger = logging.getLogger("fleetcron.executors.ssh")

RETRYABLE = (
    asyncssh.ConnectionLost,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)


class PinnedClient(asyncssh.SSHClient):
    """Records the host key a server presented when it was not the pinned one."""

    def __init__(self) -> None:
        self.presented: asyncssh.SSHKey | None = None
        self.lost = False

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.presented = key
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


#: How much of a probe's output :func:`verify_target` returns.
PROBE_OUTPUT_MAX = 4096


async def fetch_host_key(
    host: str,
    port: int,
    timeout_s: float = 10,
    *,
    tunnel: asyncssh.SSHClientConnection | None = None,
) -> str:
    """The host key the server at ``host:port`` presents, as ``"<type> <base64>"``.

    Used for trust-on-first-use pairing: show the fingerprint to a human, then pin it.
    With ``tunnel`` (a jump host's connection) the server is reached through it.
    Raises :class:`ConnectError` when the server cannot be reached.
    """
    try:
        async with asyncio.timeout(timeout_s):
            key = await asyncssh.get_server_host_key(
                host, port, config=None, tunnel=tunnel if tunnel is not None else ()
            )
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise connect_failure(exc, host, port, timeout_s) from exc
    if key is None:
        raise ConnectError(f"{host}:{port} did not present a host key")
    kind, blob, *_ = key.export_public_key("openssh").decode().split()
    return f"{kind} {blob}"


async def verify_target(
    target: SshTarget,
    timeout_s: float = 15,
    *,
    probe: str | None = None,
    tunnel: asyncssh.SSHClientConnection | None = None,
) -> str | None:
    """Log in with the pinned host key and run ``true``.

    Raises :class:`HostKeyMismatch`, :class:`AuthError` or :class:`ConnectError` with a
    message naming the target and what to do; returns ``None`` when all is well. With
    ``probe``, also runs that command in the same connection and returns the start of
    what it printed (empty when it failed: a probe is informational, never a failure).
    With ``tunnel`` (the last jump host's connection) the target is reached through it.
    """
    conn, _ = await open_pinned(target, import_private_key(target), timeout_s, tunnel=tunnel)
    async with conn:
        try:
            result = await asyncio.wait_for(conn.run("true", check=False), timeout_s)
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            raise ConnectError(f"{target.name}: running `true` failed: {exc}") from exc
        if result.exit_status != 0:
            raise ConnectError(
                f"{target.name}: `true` exited with {result.exit_status}; check the login shell"
            )
        if probe is None:
            return None
        try:
            probed = await asyncio.wait_for(conn.run(probe, check=False), timeout_s)
        except (asyncssh.Error, OSError, TimeoutError):
            return ""
    out = probed.stdout
    text = out.decode(errors="replace") if isinstance(out, bytes) else str(out or "")
    return text[:PROBE_OUTPUT_MAX]


async def open_pinned(
    target: SshTarget,
    client_key: asyncssh.SSHKey,
    timeout_s: float,
    *,
    tunnel: asyncssh.SSHClientConnection | None = None,
) -> tuple[asyncssh.SSHClientConnection, PinnedClient]:
    """Connect and log in with only the pinned host key trusted; with ``tunnel`` (a jump
    host's connection) through it, never directly."""
    if target.via and tunnel is None:
        raise ConnectError(
            f"target {target.name} is reached through jump host {target.via[-1].name}; "
            "it is never connected to directly"
        )
    cert = user_certificate(target)
    client = PinnedClient()
    try:
        conn = await asyncssh.connect(
            target.host,
            target.port,
            username=target.user,
            client_keys=[client_key] if cert is None else [(client_key, cert)],
            known_hosts=trusted_keys(target),
            # Under CA trust, accept plain host keys in the handshake too, so that a server
            # without a certificate is refused by name rather than by a failed handshake.
            server_host_key_algs="default" if target.host_ca else (),
            client_factory=lambda: client,
            connect_timeout=timeout_s,
            tunnel=tunnel if tunnel is not None else (),
            **ONLY_THE_GIVEN_KEY,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        raise host_refusal(target, client, exc) from exc
    except asyncssh.PermissionDenied as exc:
        raise AuthError(
            f"authentication failed for user {target.user} on {target.host}:{target.port} "
            f"(target {target.name}): the server refused the key"
        ) from exc
    except RETRYABLE:
        raise
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        raise connect_failure(exc, target.host, target.port, timeout_s) from exc
    return conn, client


#: The ciphers offered, in order: AES-GCM first, then the rest of asyncssh's defaults, so a
#: server that allows only some of them is still reached. asyncssh builds each packet's
#: ChaCha20-Poly1305 (its first choice) from four cipher contexts made in Python: 13 µs a
#: packet against 2 µs for AES-GCM in one OpenSSL call, and a pooled run is some twenty
#: packets (docs/benchmarks.md, "SSH packets: AES-GCM first"). Both are AEAD ciphers that
#: OpenSSH enables by default.
CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
)

#: Seconds without traffic before a pooled connection sends a keepalive
#: (``FLEETCRON_SSH_KEEPALIVE_S``); after :data:`KEEPALIVES_UNANSWERED` unanswered ones it
#: is closed, and the pool opens a new one for the next run. One-off connections (pairing,
#: probes) send none.
KEEPALIVE_S: Final = 30.0
KEEPALIVES_UNANSWERED: Final = 3


def keep_alive(conn: asyncssh.SSHClientConnection, interval_s: float) -> None:
    """Make ``conn`` send keepalives after ``interval_s`` without traffic (0: none)."""
    conn.set_keepalive(interval_s, KEEPALIVES_UNANSWERED)


#: No ~/.ssh/config, agent, password or other method: the given client key only.
ONLY_THE_GIVEN_KEY: dict[str, Any] = {
    "config": None,
    "agent_path": None,
    "password": None,
    "kbdint_auth": False,
    "gss_auth": False,
    "preferred_auth": "publickey",
    "encryption_algs": CIPHERS,
}


def host_refusal(
    target: SshTarget, client: PinnedClient, exc: asyncssh.HostKeyNotVerifiable
) -> HostKeyMismatch:
    """The server's host key was not the pinned one (or not vouched for by its host CA)."""
    presented = client.presented.get_fingerprint("sha256") if client.presented else "an unknown key"
    if target.host_ca:
        return ca_refusal(target, presented, exc)
    return HostKeyMismatch(
        f"host key mismatch: expected {fingerprint(target.host_key)}, got {presented} "
        f"from {target.host}:{target.port} (target {target.name}); nothing was run. "
        "If the server's key was changed on purpose, re-pin its host key "
        f"(`fleetcron target repin {target.name}`, or Re-pin host key on its page)."
    )


def trusted_keys(
    target: SshTarget,
) -> tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]:
    """What asyncssh trusts for ``target``: its pinned key, or its host CA keys and the
    keys they must not vouch for (``@revoked``)."""
    if not target.host_ca:
        return [asyncssh.import_public_key(target.host_key)], [], []
    cas, revoked = split_host_ca(target.host_ca)
    return (
        [],
        [asyncssh.import_public_key(line) for line in cas],
        [asyncssh.import_public_key(line) for line in revoked],
    )


def ca_refusal(target: SshTarget, presented: str, exc: asyncssh.Error) -> HostKeyMismatch:
    """The server's host key was not vouched for by the target's host CA."""
    cas, _ = split_host_ca(target.host_ca)
    fingerprints = ", ".join(fingerprint(line) for line in cas)
    return HostKeyMismatch(
        f"host not trusted: {target.host}:{target.port} (target {target.name}) presented "
        f"no valid certificate from its host CA {fingerprints} for the name {target.host} "
        f"(got {presented}; {exc.reason}); nothing was run. A host certificate must name "
        "the host as a principal, be valid now, and its key must not be revoked."
    )


def connect_failure(exc: BaseException, host: str, port: int, timeout_s: float) -> ConnectError:
    where = f"{host}:{port}"
    if isinstance(exc, ConnectionRefusedError):
        return ConnectError(f"connection refused: {where}")
    if isinstance(exc, socket.gaierror):
        return ConnectError(f"cannot resolve host {host}: {exc.strerror}")
    if isinstance(exc, TimeoutError):
        return ConnectError(f"connection to {where} timed out after {timeout_s:g} s")
    if isinstance(exc, asyncssh.Error):
        return ConnectError(f"ssh handshake with {where} failed: {exc.reason}")
    return ConnectError(f"cannot connect to {where}: {exc}")


def key_digest(target: SshTarget) -> str:
    """The client credentials as pooled: the key and its certificate, if any."""
    digest = hashlib.sha256(_raw(target.private_key))
    if target.client_cert:
        digest.update(b"\0" + _raw(target.client_cert))
    return digest.hexdigest()


def _raw(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def user_certificate(target: SshTarget) -> object | None:
    """The target's user certificate for the login, checked: an expired one is refused
    before connecting, one expiring within a week is logged as a warning."""
    if not target.client_cert:
        return None
    try:
        info, cert = parse_user_cert(target.client_cert)
    except InvalidInput as exc:
        raise AuthError(
            f"the user certificate of target {target.name} cannot be used: {exc}"
        ) from None
    now = datetime.now(UTC)
    refuse_expired(target.name, info, now)
    if expires_soon(info, now):
        assert info.valid_before is not None
        logger.warning(
            "the user certificate of target %s expires at %s",
            target.name,
            info.valid_before.isoformat(timespec="seconds"),
            extra={"action": "ssh.cert_expiring", "target": target.name},
        )
    return cert


def import_private_key(target: SshTarget) -> asyncssh.SSHKey:
    try:
        return asyncssh.import_private_key(target.private_key)
    except (asyncssh.KeyImportError, ValueError) as exc:
        # The exception text never contains key material, only what was wrong with it.
        raise AuthError(f"the private key of target {target.name} cannot be used: {exc}") from exc
