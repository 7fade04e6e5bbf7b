"""The host probe's fresh connection against a real sshd: each state it tells apart.

The classification itself is unit-tested (tests/unit/core/test_reach.py); here the errors
are the real ones asyncssh and the socket raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from fixtures.sshd import ClientKey, SshServer, generate_client_key
from fleetcron.core.reach import Reach
from fleetcron.executors import SshTarget
from fleetcron.executors.ssh_probe import PER_FIRST_HOP, probe, probe_many
from waiting import eventually_async

pytestmark = pytest.mark.sshd

TargetFactory = Callable[..., SshTarget]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts TCP connections and never says anything (a host whose
    packets are dropped after the handshake looks the same to the client)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


async def test_a_running_sshd_with_the_pinned_key_is_reachable(
    sshd: SshServer, make_target: TargetFactory
) -> None:
    assert await probe(make_target(sshd), timeout_s=10) == (Reach.REACHABLE, None)


async def test_a_port_nothing_listens_on_is_refused(
    sshd: SshServer, make_target: TargetFactory, free_port: int
) -> None:
    state, error = await probe(replace(make_target(sshd), port=free_port), timeout_s=10)
    assert state is Reach.REFUSED
    assert error is not None and "refused" in error


async def test_a_silent_host_times_out(
    sshd: SshServer, make_target: TargetFactory, silent_port: int
) -> None:
    state, error = await probe(replace(make_target(sshd), port=silent_port), timeout_s=0.5)
    assert state is Reach.TIMEOUT
    assert error


async def test_another_host_key_than_the_pinned_one_is_host_key_changed(
    sshd: SshServer, sshd_other_host_key: SshServer, make_target: TargetFactory
) -> None:
    state, error = await probe(
        make_target(sshd, host_key=sshd_other_host_key.host_key_line), timeout_s=10
    )
    assert state is Reach.HOST_KEY_CHANGED
    assert error is not None and sshd.host_key_fingerprint in error


async def test_a_key_the_server_does_not_accept_is_auth_failed(
    sshd: SshServer, tmp_path: Path, make_target: TargetFactory
) -> None:
    stranger: ClientKey = generate_client_key(tmp_path)
    state, error = await probe(make_target(sshd, key=stranger.private_key), timeout_s=10)
    assert state is Reach.AUTH_FAILED
    assert error is not None and "authentication failed" in error


async def test_many_probes_share_a_bounded_number_of_connections(
    sshd: SshServer, make_target: TargetFactory, free_port: int
) -> None:
    good = make_target(sshd)
    bad = replace(good, port=free_port)
    results = await probe_many(
        [(i, good if i % 2 else bad) for i in range(1, 9)], timeout_s=10, concurrency=3
    )
    assert [r.target_id for r in results] == list(range(1, 9))
    assert [r.reach for r in results] == [Reach.REACHABLE, Reach.REFUSED] * 4
    assert all(r.seconds >= 0 for r in results)


async def test_a_probe_opens_a_new_connection_each_time(
    sshd: SshServer, make_target: TargetFactory
) -> None:
    """Two probes are two logins in sshd's log: nothing is pooled."""
    before = sshd.log_path.read_text().count("Accepted publickey")
    for _ in range(2):
        assert (await probe(make_target(sshd), timeout_s=10))[0] is Reach.REACHABLE

    def logged() -> int:
        return sshd.log_path.read_text().count("Accepted publickey") - before

    # sshd may write its log line just after the client returned.
    await eventually_async(lambda: logged() >= 2, 30, "two logins in the sshd log")
    assert logged() == 2


async def held_at_once(targets_to: Callable[[int], list[SshTarget]], *, expected: int) -> int:
    """Start probing ``targets_to(port)`` (all reaching a silent server on ``port`` first)
    with room for all at once; how many connections that server holds once it holds
    ``expected`` and a moment more has passed (none closes meanwhile: each probe waits far
    longer for an answer). Waiting for the number expected, not for a fixed time, lets a
    loaded machine take as long as it needs to connect them all."""
    held: list[asyncio.StreamWriter] = []
    done = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await done.wait()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    targets = targets_to(int(server.sockets[0].getsockname()[1]))
    probing = asyncio.create_task(
        probe_many(list(enumerate(targets, 1)), timeout_s=30, concurrency=len(targets))
    )
    try:
        await eventually_async(lambda: len(held) >= expected, 60, f"{expected} connections")
        await asyncio.sleep(0.5)  # the others had time to connect, had they been let
        return len(held)
    finally:
        probing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probing
        done.set()
        server.close()
        await server.wait_closed()


async def test_probes_through_one_jump_host_are_a_few_at_once(
    sshd: SshServer, make_target: TargetFactory
) -> None:
    """Many targets behind one bastion never open more than ``PER_FIRST_HOP`` connections
    to it at once (its sshd drops new ones past ``MaxStartups``); the control: as many
    targets reached directly at the same address are all probed at once."""

    def bastion(port: int) -> SshTarget:
        return replace(make_target(sshd), name="b1", port=port)

    def behind(port: int) -> list[SshTarget]:
        return [replace(make_target(sshd), name=f"t{i}", via=(bastion(port),)) for i in range(12)]

    def direct(port: int) -> list[SshTarget]:
        return [replace(bastion(port), name=f"d{i}") for i in range(12)]

    assert await held_at_once(behind, expected=PER_FIRST_HOP) == PER_FIRST_HOP
    assert await held_at_once(direct, expected=12) == 12
