"""The executor table of a scheduler: one :class:`~fleetcron.executors.base.Executor` per
target kind, adapting the local and SSH executors to the one seam.

``LocalKind`` holds the local concurrency cap (``local_max_concurrency``) as its
admission; ``SshKind`` turns a :class:`~fleetcron.executors.base.RunTarget` into an
:class:`~fleetcron.executors.base.SshTarget`, decrypting the private key once per stored
ciphertext while it stays among the :data:`KEY_CACHE_SIZE` most recently used, so the
scheduler loop never handles key material and the cache stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fleetcron.config import Settings
from fleetcron.core.targets import TargetKind
from fleetcron.executors.base import Clock, ExecRequest, ExecResult, RunTarget, SshTarget
from fleetcron.executors.local import LocalExecutor
from fleetcron.executors.ssh import SshExecutor
from fleetcron.executors.ssh_jump import JumpLimits

Decrypt = Callable[[bytes], bytes]
"""Decrypts a stored private key (the app's master key)."""

#: Decrypted SSH keys kept per :class:`SshKind` (one per distinct ciphertext in use).
KEY_CACHE_SIZE = 1024


class LocalKind:
    """Targets of kind ``local``: a subprocess on this machine, at most ``slots`` at once."""

    def __init__(self, executor: LocalExecutor, slots: int) -> None:
        self.executor = executor
        self._slots = asyncio.Semaphore(slots)

    def admit(self) -> AbstractAsyncContextManager[object]:
        return self._slots

    async def run(self, target: RunTarget, request: ExecRequest) -> ExecResult:
        return await self.executor.run(request)

    async def close(self) -> None:
        await self.executor.close()


class SshKind:
    """Targets of kind ``ssh``: pooled, host-key-pinned connections (``SshExecutor``)."""

    def __init__(
        self, executor: SshExecutor, decrypt: Decrypt, *, key_cache_size: int = KEY_CACHE_SIZE
    ) -> None:
        if key_cache_size < 1:
            raise ValueError(f"key_cache_size must be at least 1, not {key_cache_size}")
        self.executor = executor
        self._decrypt = decrypt
        self._key_cache_size = key_cache_size
        self._keys: OrderedDict[bytes, bytes] = OrderedDict()

    def admit(self) -> AbstractAsyncContextManager[object]:
        # The SSH executor's own caps (global, per target) count from run(), inside the
        # watchdog budget.
        return contextlib.nullcontext()

    async def run(self, target: RunTarget, request: ExecRequest) -> ExecResult:
        return await self.executor.run(self.ssh_target(target), request)

    async def close(self) -> None:
        await self.executor.close()

    def ssh_target(self, target: RunTarget) -> SshTarget:
        """The connection of ``target`` and of its jump hosts (see :func:`ssh_target`)."""
        return ssh_target(target, self.private_key)

    def private_key(self, encrypted: bytes) -> bytes:
        """The decrypted key of this ciphertext: decrypted on its first use, then kept among
        the ``key_cache_size`` most recently used (the least recently used is dropped, so
        keys replaced by re-pairing or of removed targets do not pile up)."""
        key = self._keys.get(encrypted)
        if key is None:
            key = self._decrypt(encrypted)
            self._keys[encrypted] = key
            if len(self._keys) > self._key_cache_size:
                self._keys.popitem(last=False)
        else:
            self._keys.move_to_end(encrypted)
        return key


def ssh_target(target: RunTarget, key: Decrypt) -> SshTarget:
    """The connection of ``target`` and of its jump hosts, each key revealed by ``key``;
    raises ``ValueError`` when a record lacks the SSH settings or the pinned host key (or
    host CA). The runs and the host probe build their connections so."""
    if not (
        target.host
        and target.port
        and target.user
        and target.private_key_enc
        and (target.host_key or target.host_ca)
    ):
        raise ValueError(f"target {target.name} is missing its SSH settings or host key")
    return SshTarget(
        name=target.name,
        host=target.host,
        port=target.port,
        user=target.user,
        private_key=key(target.private_key_enc),
        host_key=target.host_key or "",
        via=tuple(ssh_target(hop, key) for hop in target.via),
        host_ca=target.host_ca or "",
        client_cert=key(target.client_cert_enc) if target.client_cert_enc else "",
    )


def standard_executors(
    settings: Settings, clock: Clock, decrypt: Decrypt
) -> dict[str, LocalKind | SshKind]:
    """The production table: one executor per :class:`TargetKind`, sized from ``settings``
    (a jump host runs no jobs, so it has no executor)."""
    ssh = SshKind(
        SshExecutor(
            clock=clock,
            max_concurrency=settings.ssh_max_concurrency,
            per_target_concurrency=settings.ssh_per_target_concurrency,
            max_connections=settings.ssh_max_connections,
            idle_timeout_s=settings.ssh_idle_timeout_s,
            connect_timeout_s=settings.ssh_connect_timeout_s,
            connect_backoff_s=settings.ssh_connect_backoff_s,
            connect_backoff_max_s=settings.ssh_connect_backoff_max_s,
            max_connecting=settings.ssh_max_connecting,
        ),
        decrypt,
    )
    ssh.executor.pool.keep_alive_every(settings.ssh_keepalive_s)
    ssh.executor.pool.jumps.limit(
        JumpLimits(settings.ssh_jump_max_connections, settings.ssh_jump_targets_per_connection)
    )
    return {
        TargetKind.LOCAL: LocalKind(
            LocalExecutor(
                clock=clock, run_as=settings.local_run_as, allow_root=settings.local_allow_root
            ),
            settings.local_max_concurrency,
        ),
        TargetKind.SSH: ssh,
    }
