"""The target's highest-generation mark: active cleanup raises it, THEN kills older
generations; a command of an older generation that arrives afterwards refuses to start.

Real sshd (in a PID namespace of its own, so the scan never touches other suites' tagged
runs on a shared machine: see test_kill_generations.py), real processes, the real mark
under the SSH user's home (one scope per test, removed afterwards).
"""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from procs import kill_all, marker_seconds, sleeping
from test_kill_generations import sshd_in_its_own_pid_namespace

from fixtures.sshd import ClientKey, SshServer, forwarded_to
from fleetcron.core.planning import TargetCleanup
from fleetcron.errors import ConnectError
from fleetcron.executors import ExecRequest, ExecResult, SshExecutor, SshTarget
from fleetcron.executors.base import SUPERSEDED, RunTarget
from fleetcron.executors.kinds import SshKind
from fleetcron.executors.local import LocalExecutor
from fleetcron.executors.watchdog import (
    MARK_AND_SCAN_SCRIPT,
    MARK_SCRIPT,
    SUPERSEDED_EXIT,
    shard_scope,
)
from fleetcron.scheduler.cleanup import _clean_target
from fleetcron.services.cluster.status import CleanupTarget
from waiting import eventually

UNSHARE_PID = ["unshare", "--pid", "--fork", "--mount-proc"]


@pytest.fixture(scope="module")
def namespaced_sshd(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey
) -> Iterator[SshServer]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a PID namespace")
    with sshd_in_its_own_pid_namespace(tmp_path_factory.mktemp("marked"), sshd_client_key) as s:
        yield s


@pytest.fixture
def target(namespaced_sshd: SshServer) -> SshTarget:
    s = namespaced_sshd
    return SshTarget("marked", s.host, s.port, s.user, s.client_private_key, s.host_key_line)


@pytest.fixture
def scope() -> Iterator[str]:
    """A fresh mark scope; its directory under the user's home is removed afterwards."""
    name = "test" + secrets.token_hex(6)
    yield name
    home = pwd.getpwuid(os.geteuid()).pw_dir
    for mark in (Path(home) / ".fleetcron").glob(f"generation-{name}*"):  # and its shards'
        shutil.rmtree(mark, ignore_errors=True)


@pytest.fixture
async def ssh() -> AsyncIterator[SshExecutor]:
    executor = SshExecutor(kill_grace_s=1.0, per_target_concurrency=10)
    try:
        yield executor
    finally:
        await executor.close()


def sleeper(seconds: str, generation: int, scope: str | None, run_id: int) -> ExecRequest:
    return ExecRequest(
        f"sleep {seconds}", timeout_s=60, run_id=run_id, generation=generation, mark_scope=scope
    )


def refused(result: ExecResult) -> bool:
    return (
        result.status == "connect_error"
        and result.error is not None
        and result.error.startswith(SUPERSEDED)
    )


async def test_cleanup_marks_then_kills_and_a_later_old_command_refuses_to_start(
    ssh: SshExecutor, target: SshTarget, scope: str, tmp_path: Path
) -> None:
    old, new = marker_seconds(), marker_seconds()
    tasks = [
        asyncio.create_task(ssh.run(target, sleeper(old, 1, scope, 1))),
        asyncio.create_task(ssh.run(target, sleeper(new, 2, scope, 2))),
    ]
    try:
        for marker in (old, new):

            def started(m: str = marker) -> bool:
                return len(sleeping(m)) == 1

            await asyncio.to_thread(eventually, started, 15, f"sleep {marker} to start")

        assert await ssh.mark_and_kill_older_generations(target, 2, scope) == (2, 1)

        await asyncio.to_thread(eventually, lambda: not sleeping(old), 5, "the old to go")
        assert (await asyncio.wait_for(tasks[0], 10)).status == "failed"  # SIGKILLed
        assert len(sleeping(new)) == 1  # the new generation's run is untouched

        # The old owner's exec request arrives after the cleanup: refused before the start.
        flag = tmp_path / "ran"
        late = ExecRequest(f"touch {flag}", timeout_s=10, run_id=3, generation=1, mark_scope=scope)
        result = await ssh.run(target, late)
        assert refused(result), result
        assert result.error == (
            "refused by the target: generation 1 superseded by 2; the command was not started"
        )
        assert not flag.exists()

        # Controls: the same command of the current generation runs; so does an old
        # generation's command of another installation (another mark scope).
        for generation, other_scope in ((2, scope), (1, scope + "x")):
            flag.unlink(missing_ok=True)
            ok = await ssh.run(
                target,
                ExecRequest(
                    f"touch {flag}", timeout_s=10, generation=generation, mark_scope=other_scope
                ),
            )
            assert ok.status == "succeeded" and flag.exists(), ok

        # The mark never goes down: a cleanup for generation 1 leaves 2 in place.
        assert await ssh.mark_and_kill_older_generations(target, 1, scope) == (2, 0)
        assert refused(await ssh.run(target, late))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kill_all(old, new)


@pytest.mark.parametrize("with_mark", [True, False], ids=["mark-then-scan", "scan-only"])
async def test_old_commands_racing_the_cleanup_are_killed_or_refuse(
    ssh: SshExecutor, target: SshTarget, scope: str, with_mark: bool
) -> None:
    """Old-generation commands start before, during and after the cleanup (a paused old
    owner resuming, exec requests on the network). With the mark none survives; the
    scan alone (the negative control) misses the ones that start after it."""
    marker = marker_seconds()
    request = sleeper(marker, 1, scope, 7)
    tasks: list[asyncio.Task[ExecResult]] = []
    try:
        tasks += [asyncio.create_task(ssh.run(target, request)) for _ in range(3)]
        await asyncio.to_thread(
            eventually, lambda: len(sleeping(marker)) == 3, 15, "the three sleeps to start"
        )
        cleanup: Awaitable[object] = (
            ssh.mark_and_kill_older_generations(target, 2, scope)
            if with_mark
            else ssh.kill_older_generations(target, 2)
        )
        # Two more race the cleanup, two come after it.
        racing = [asyncio.create_task(ssh.run(target, request)) for _ in range(2)]
        await cleanup
        tasks += racing
        tasks += [asyncio.create_task(ssh.run(target, request)) for _ in range(2)]
        await asyncio.sleep(2)  # time for the late ones to have started
        if with_mark:
            results = await asyncio.wait_for(asyncio.gather(*tasks), 15)
            assert not sleeping(marker)
            assert all(r.status == "failed" or refused(r) for r in results), results
            assert sum(refused(r) for r in results) >= 2  # at least the two late ones
            assert sum(r.status == "failed" for r in results) >= 3  # the three early ones
        else:
            assert len(sleeping(marker)) >= 2, "the scan alone should miss the late commands"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kill_all(marker)


@pytest.mark.parametrize("shards", [4, 1], ids=["per-shard-marks", "one-mark"])
async def test_a_shards_cleanup_leaves_another_shards_runs_and_mark_alone(
    ssh: SshExecutor, target: SshTarget, scope: str, tmp_path: Path, shards: int
) -> None:
    """Shard 1's owner moves to generation 2 and cleans the target; shard 2 (same target
    user, e.g. another target record on the same machine) is still at generation 1. Its
    command keeps running and its new commands start. The negative control is one mark
    for every shard (``shards=1``): shard 2's command is killed and its next refused."""
    one, two = shard_scope(scope, 1, shards), shard_scope(scope, 2, shards)
    first, second = marker_seconds(), marker_seconds()
    tasks = [
        asyncio.create_task(ssh.run(target, sleeper(first, 1, one, 11))),
        asyncio.create_task(ssh.run(target, sleeper(second, 1, two, 12))),
    ]
    try:
        await asyncio.to_thread(
            eventually, lambda: sleeping(first) and sleeping(second), 15, "both sleeps to start"
        )
        mark, killed = await ssh.mark_and_kill_older_generations(target, 2, one)
        await asyncio.to_thread(eventually, lambda: not sleeping(first), 5, "shard 1's to go")
        flag = tmp_path / "ran"
        late = await ssh.run(
            target, ExecRequest(f"touch {flag}", timeout_s=10, generation=1, mark_scope=two)
        )
        outcome = (mark, killed, bool(sleeping(second)), late.status, flag.exists())
        if shards > 1:
            assert outcome == (2, 1, True, "succeeded", True), late
            stale = ExecRequest("true", timeout_s=10, generation=1, mark_scope=one)
            assert refused(await ssh.run(target, stale))  # shard 1's own mark still refuses
        else:
            assert outcome == (2, 2, False, "connect_error", False), late
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kill_all(first, second)


async def test_cleanup_of_an_unreachable_target_raises_and_a_slow_one_times_out(
    ssh: SshExecutor, namespaced_sshd: SshServer, scope: str
) -> None:
    s = namespaced_sshd
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]  # bound, never listened, then released
    gone = SshTarget("gone", s.host, closed, s.user, s.client_private_key, s.host_key_line)
    with pytest.raises(ConnectError, match="connection refused"):
        await ssh.mark_and_kill_older_generations(gone, 2, scope, timeout_s=5)
    # A listener that accepts and never answers: the per-target timeout ends the attempt.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        mute = SshTarget("mute", s.host, port, s.user, s.client_private_key, s.host_key_line)
        with pytest.raises(ConnectError, match=r"did not finish within 0\.5 s"):
            await ssh.mark_and_kill_older_generations(mute, 2, scope, timeout_s=0.5)


async def test_a_local_command_of_an_older_generation_refuses_once_the_mark_passed_it(
    scope: str, tmp_path: Path
) -> None:
    """Locally the run-as user's home holds the mark (here: the test's own user)."""
    local = LocalExecutor(allow_root=True)
    flag = tmp_path / "ran"
    command = f"touch {shlex.quote(str(flag))}"
    before = await local.run(ExecRequest(command, timeout_s=10, generation=1, mark_scope=scope))
    assert before.status == "succeeded" and flag.exists()
    flag.unlink()
    marked = subprocess.run(
        ["/bin/sh", "-c", MARK_SCRIPT, "sh", "2", scope], capture_output=True, text=True, check=True
    )
    assert marked.stdout.strip() == "mark=2"

    old = await local.run(ExecRequest(command, timeout_s=10, generation=1, mark_scope=scope))
    assert refused(old) and not flag.exists(), old
    assert "superseded by 2" in old.stderr.text
    new = await local.run(ExecRequest(command, timeout_s=10, generation=2, mark_scope=scope))
    assert new.status == "succeeded" and flag.exists(), new


async def test_a_command_that_exits_with_the_refusal_code_by_itself_is_just_failed(
    scope: str,
) -> None:
    """The refusal is recognised by its status AND its line on stderr, not the code alone."""
    local = LocalExecutor(allow_root=True)
    result = await local.run(
        ExecRequest(f"exit {SUPERSEDED_EXIT}", timeout_s=10, generation=1, mark_scope=scope)
    )
    assert (result.status, result.exit_code) == ("failed", SUPERSEDED_EXIT)


def test_a_target_whose_scan_could_not_see_or_kill_is_not_reported_clean(
    scope: str, tmp_path: Path
) -> None:
    """Without ps (or grep, tr, sed, kill, Linux's /proc) the scan would find nothing and
    report success: the cleanup refuses before writing anything, so the claims wait."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("grep", "tr", "sed", "kill", "mkdir", "rm"):  # everything but ps
        found = shutil.which(tool)
        if found:
            (tools / tool).symlink_to(found)
    out = subprocess.run(
        ["/bin/sh", "-c", MARK_AND_SCAN_SCRIPT, "sh", "2", scope],
        capture_output=True,
        text=True,
        env={"PATH": str(tools), "HOME": str(tmp_path)},
    )
    assert out.returncode == 4, out
    assert "ps is not on this target's PATH" in out.stderr
    assert "killed=" not in out.stdout and not (tmp_path / ".fleetcron").exists()
    # Control: with ps as well the same script marks and scans (nothing older to kill in
    # a fresh PID namespace).
    (tools / "ps").symlink_to(shutil.which("ps") or "/bin/ps")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the control needs root and unshare(1) for a PID namespace")
    ok = subprocess.run(
        [*UNSHARE_PID, "/bin/sh", "-c", MARK_AND_SCAN_SCRIPT, "sh", "2", scope],
        capture_output=True,
        text=True,
        env={"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert (ok.returncode, ok.stdout.split()) == (0, ["mark=2", "revoked=0", "killed=0"]), ok


def _as_run_target(target: SshTarget, kind: str) -> RunTarget:
    """``target`` as a plan carries it; the key is plain bytes here, so the SSH kind's
    decryption is the identity."""
    key = target.private_key
    return RunTarget(
        name=target.name,
        kind=kind,
        host=target.host,
        port=target.port,
        user=target.user,
        private_key_enc=key.encode() if isinstance(key, str) else key,
        host_key=target.host_key,
    )


@pytest.mark.parametrize("bastion_key", ["pinned", "wrong"])
async def test_active_cleanup_reaches_a_target_through_its_jump_host(
    ssh: SshExecutor,
    target: SshTarget,
    bastion: SshServer,
    sshd_other_host_key: SshServer,
    scope: str,
    bastion_key: str,
) -> None:
    """The takeover's cleanup of a target behind a bastion goes through the bastion, as
    its runs do: the old generation's command is killed and the bastion forwarded the
    cleanup's channel. The control pins a wrong key for the bastion: the cleanup fails
    there, although the target itself is reachable directly, and the command lives on."""
    b1 = SshTarget(
        "b1",
        bastion.host,
        bastion.port,
        bastion.user,
        bastion.client_private_key,
        bastion.host_key_line,
    )
    chained = replace(target, via=(b1,))
    old = marker_seconds()
    task = asyncio.create_task(ssh.run(chained, sleeper(old, 1, scope, 1)))
    # The new owner's executor: a process of its own, none of the old one's connections.
    kind = SshKind(SshExecutor(kill_grace_s=1.0), lambda key: key)
    try:
        await asyncio.to_thread(eventually, lambda: len(sleeping(old)) == 1, 15, "old to start")
        hop = (
            b1
            if bastion_key == "pinned"
            else replace(b1, host_key=sshd_other_host_key.host_key_line)
        )
        plan_target = CleanupTarget(
            42, replace(_as_run_target(target, "ssh"), via=(_as_run_target(hop, "jump"),))
        )
        before = forwarded_to(bastion, target.port)
        outcome = await _clean_target(kind, plan_target, 2, scope, asyncio.Semaphore(1))
        if bastion_key == "wrong":
            assert outcome.mark is None and outcome.error is not None
            assert "b1" in outcome.error, outcome.error
            assert len(sleeping(old)) == 1 and forwarded_to(bastion, target.port) == before
            return
        assert outcome == TargetCleanup(42, mark=2, killed=1)
        assert forwarded_to(bastion, target.port) == before + 1
        await asyncio.to_thread(eventually, lambda: not sleeping(old), 5, "the old to go")
        assert (await asyncio.wait_for(task, 10)).status == "failed"  # SIGKILLed
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kind.close()
        kill_all(old)
