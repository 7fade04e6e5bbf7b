"""kill_older_generations: active cleanup of an older generation's runs on a target.

Runs of generations 3 and 5 and an untagged run sleep on the target (this machine, or
the loopback sshd); asking for generations below 5 kills exactly the generation-3 run's
whole process group and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from procs import kill_all, marker_seconds, sleeping, wait_for

from fixtures.sshd import SshServer
from fleetcron.executors import ExecRequest, ExecResult, LocalExecutor, SshExecutor, SshTarget

Runner = Callable[[ExecRequest], Awaitable[ExecResult]]


def tagged(seconds: str, generation: int | None, run_id: int) -> ExecRequest:
    # A child and an orphaned grandchild: the whole group must go.
    return ExecRequest(
        f"(sleep {seconds} &); sleep {seconds}",
        timeout_s=60,
        run_id=run_id,
        generation=generation,
    )


@contextlib.asynccontextmanager
async def three_runs(
    run: Runner,
) -> AsyncIterator[tuple[str, str, str, list[asyncio.Task[ExecResult]]]]:
    old, new, untagged = marker_seconds(), marker_seconds(), marker_seconds()
    tasks = [
        asyncio.create_task(run(tagged(old, 3, 1))),
        asyncio.create_task(run(tagged(new, 5, 2))),
        asyncio.create_task(run(tagged(untagged, None, 3))),
    ]
    try:
        for marker in (old, new, untagged):
            assert await asyncio.to_thread(wait_for, lambda m=marker: len(sleeping(m)) == 2, 15)
        yield old, new, untagged, tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kill_all(old, new, untagged)


async def test_local_cleanup_kills_only_the_older_generation() -> None:
    local = LocalExecutor(allow_root=True)
    async with three_runs(local.run) as (old, new, untagged, tasks):
        assert await local.kill_older_generations(5) == 1
        assert await asyncio.to_thread(wait_for, lambda: not sleeping(old), 5)
        result = await asyncio.wait_for(tasks[0], 10)
        assert result.status == "failed"  # killed from outside: not a timeout of ours
        assert len(sleeping(new)) == 2 and len(sleeping(untagged)) == 2
        # Nothing older than 3 is left: a second sweep kills nothing.
        assert await local.kill_older_generations(3) == 0


async def test_a_tag_on_a_process_that_leads_no_group_is_ignored() -> None:
    """A tagged process that is not a group leader is not a run's group (e.g. a child
    that changed nothing), and untagged leaders are never touched."""
    seconds = marker_seconds()
    proc = subprocess.Popen(["sleep", seconds], env={**os.environ, "FLEETCRON_GENERATION": "1"})
    try:
        assert await asyncio.to_thread(wait_for, lambda: bool(sleeping(seconds)), 5)
        assert await LocalExecutor(allow_root=True).kill_older_generations(9) == 0
        assert sleeping(seconds) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


async def test_local_cleanup_kills_a_tagged_group_leader_started_by_hand() -> None:
    """Negative control for the test above: the same process as a group leader goes."""
    seconds = marker_seconds()
    proc = subprocess.Popen(
        ["sleep", seconds], env={**os.environ, "FLEETCRON_GENERATION": "1"}, start_new_session=True
    )
    try:
        assert await asyncio.to_thread(wait_for, lambda: bool(sleeping(seconds)), 5)
        assert await LocalExecutor(allow_root=True).kill_older_generations(9) == 1
        assert proc.wait(timeout=5) == -9
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
async def ssh() -> AsyncIterator[SshExecutor]:
    executor = SshExecutor(kill_grace_s=1.0)
    try:
        yield executor
    finally:
        await executor.close()


async def test_ssh_cleanup_kills_only_the_older_generation(
    ssh: SshExecutor, target: SshTarget
) -> None:
    async with three_runs(lambda request: ssh.run(target, request)) as (old, new, untagged, tasks):
        assert await ssh.kill_older_generations(target, 5) == 1
        assert await asyncio.to_thread(wait_for, lambda: not sleeping(old), 5)
        result = await asyncio.wait_for(tasks[0], 10)
        assert result.status == "failed"
        assert len(sleeping(new)) == 2 and len(sleeping(untagged)) == 2
        assert await ssh.kill_older_generations(target, 3) == 0


async def test_ssh_cleanup_of_an_unreachable_target_raises_a_connect_error(
    ssh: SshExecutor, sshd: SshServer, free_port: int
) -> None:
    from fleetcron.errors import ConnectError

    gone = SshTarget(
        "gone", "127.0.0.1", free_port, sshd.user, sshd.client_private_key, sshd.host_key_line
    )
    with pytest.raises(ConnectError, match="connection refused"):
        await ssh.kill_older_generations(gone, 5)
