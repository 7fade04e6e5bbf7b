"""kill_older_generations: active cleanup of an older generation's runs on a target.

Runs of generations 3 and 5 and an untagged run sleep on the target (this machine, or
a loopback sshd); asking for generations below 5 kills exactly the generation-3 run's
whole process group and nothing else. The scan sees every process of the machine, so
these tests run it in a PID namespace of its own (unshare): on a shared test machine it
would otherwise kill other suites' tagged runs too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from kill_child import request
from procs import kill_all, marker_seconds, sleeping

import fixtures.sshd as sshd_fixture
from fixtures.sshd import ClientKey, SshServer, running_sshd
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from waiting import eventually

CHILD = Path(__file__).with_name("kill_child.py")
UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]


def isolated(scenario: str) -> dict[str, object]:
    """Run a kill_child.py scenario in a PID namespace of its own (see its docstring)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    out = subprocess.run(
        [*UNSHARE, sys.executable, str(CHILD), scenario],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_local_cleanup_kills_only_the_older_generation() -> None:
    assert isolated("runs") == {
        "killed": 1,
        "old_left": 0,
        "new_left": 2,
        "untagged_left": 2,
        "old_status": "failed",  # killed from outside: not a timeout of its executor
        "second_sweep": 0,  # nothing older than 3 is left
    }


def test_local_cleanup_kills_what_a_run_left_behind_after_its_main_process_ended() -> None:
    assert isolated("leftover") == {"status": "succeeded", "killed": 1, "left": 0}


def test_a_tagged_member_of_a_group_with_an_untagged_live_leader_is_left_alone() -> None:
    assert isolated("member") == {"killed": 0, "returncode": None, "left": 1}


def test_a_tagged_process_whose_group_is_outside_the_pid_namespace_is_left_alone() -> None:
    """Its pgid reads as 0 there: killpg(0) would have killed the scanner's own group."""
    assert isolated("outside") == {"killed": 0, "returncode": None, "left": 1}


def test_local_cleanup_kills_a_tagged_group_leader_started_by_hand() -> None:
    """Negative control for the two tests above: the same process as a group leader goes."""
    assert isolated("leader") == {"killed": 1, "returncode": -9, "left": 0}


@contextlib.contextmanager
def sshd_in_its_own_pid_namespace(workdir: Path, client_key: ClientKey) -> Iterator[SshServer]:
    """A real sshd whose sessions see only their own processes in /proc."""
    wrapper = workdir / "sshd-in-namespace"
    # unshare ignores SIGTERM while it waits: turn the fixture's SIGTERM into a SIGKILL
    # of unshare, which --kill-child passes on to sshd.
    wrapper.write_text(
        "#!/bin/sh\n"
        f'{shlex.join(UNSHARE)} {sshd_fixture.SSHD_BINARY} "$@" &\n'
        'pid=$!; trap \'kill -s KILL "$pid"\' TERM; wait "$pid"\n'
    )
    wrapper.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sshd_fixture, "SSHD_BINARY", wrapper)
        with running_sshd(
            workdir / "sshd", authorized_keys=[client_key.public_key_line], client_key=client_key
        ) as server:
            yield server


@pytest.fixture(scope="module")
def isolated_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    with sshd_in_its_own_pid_namespace(tmp_path_factory.mktemp("isolated"), sshd_client_key) as s:
        yield s


@pytest.fixture
def isolated_target(isolated_sshd: SshServer, make_target: Callable[..., SshTarget]) -> SshTarget:
    return make_target(isolated_sshd)


@pytest.fixture
async def ssh() -> AsyncIterator[SshExecutor]:
    executor = SshExecutor(kill_grace_s=1.0)
    try:
        yield executor
    finally:
        await executor.close()


async def test_ssh_cleanup_kills_only_the_older_generation(
    ssh: SshExecutor, isolated_target: SshTarget
) -> None:
    old, new, untagged = marker_seconds(), marker_seconds(), marker_seconds()
    # A tagged group leader outside the target's PID namespace: never seen, never killed.
    outsider = subprocess.Popen(
        ["sleep", marker_seconds()],
        env={**os.environ, "FLEETCRON_GENERATION": "1"},
        start_new_session=True,
    )
    tasks = [
        asyncio.create_task(ssh.run(isolated_target, request(old, 3, 1))),
        asyncio.create_task(ssh.run(isolated_target, request(new, 5, 2))),
        asyncio.create_task(ssh.run(isolated_target, request(untagged, None, 3))),
    ]
    try:
        for marker in (old, new, untagged):

            def started(m: str = marker) -> bool:
                return len(sleeping(m)) == 2

            await asyncio.to_thread(eventually, started, 15, f"both sleep {marker} to start")
        assert await ssh.kill_older_generations(isolated_target, 5) == 1
        await asyncio.to_thread(eventually, lambda: not sleeping(old), 5, "the old to go")
        result = await asyncio.wait_for(tasks[0], 10)
        assert result.status == "failed"
        assert len(sleeping(new)) == 2 and len(sleeping(untagged)) == 2
        assert await ssh.kill_older_generations(isolated_target, 3) == 0
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kill_all(old, new, untagged)


async def test_ssh_cleanup_kills_what_a_run_left_behind_after_its_main_process_ended(
    ssh: SshExecutor, isolated_target: SshTarget
) -> None:
    seconds = marker_seconds()
    command = f"sleep {seconds} >/dev/null 2>&1 & echo started"
    try:
        result = await ssh.run(
            isolated_target, ExecRequest(command, timeout_s=60, run_id=1, generation=2)
        )
        assert result.status == "succeeded"
        await asyncio.to_thread(
            eventually, lambda: len(sleeping(seconds)) == 1, 5, "the detached sleep to run"
        )
        assert await ssh.kill_older_generations(isolated_target, 3) == 1
        await asyncio.to_thread(
            eventually, lambda: not sleeping(seconds), 5, "the detached sleep to be killed"
        )
    finally:
        kill_all(seconds)


async def test_ssh_cleanup_of_an_unreachable_target_raises_a_connect_error(
    ssh: SshExecutor, sshd: SshServer, free_port: int
) -> None:
    from fleetcron.errors import ConnectError

    gone = SshTarget(
        "gone", "127.0.0.1", free_port, sshd.user, sshd.client_private_key, sshd.host_key_line
    )
    with pytest.raises(ConnectError, match="connection refused"):
        await ssh.kill_older_generations(gone, 5)
