"""SshExecutor against a real OpenSSH sshd on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.sshd import ClientKey, SshServer, generate_client_key
from fleetcron.executors import ExecRequest, ExecResult, SshExecutor, SshTarget
from fleetcron.executors.base import NOT_STARTED_DEADLINE
from fleetcron.executors.output import STOPPED, LiveOutput
from fleetcron.executors.watchdog import split_budget
from waiting import eventually_async

TargetFactory = Callable[..., SshTarget]

pytestmark = pytest.mark.sshd

PROBE = Path(__file__).with_name("memory_probe.py")


def marker_seconds() -> str:
    """A unique sleep duration, so pgrep only ever finds this test's processes."""
    return f"600.{uuid.uuid4().int % 10**9:09d}"


def running(seconds: str) -> str:
    """Live ``sleep <seconds>`` processes (the wrapper's own argv also holds the text)."""
    return subprocess.run(
        ["pgrep", "-af", f"^sleep {seconds}$"], capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def stranger_key(tmp_path_factory: pytest.TempPathFactory) -> ClientKey:
    return generate_client_key(tmp_path_factory.mktemp("stranger"))


async def test_a_timeout_kills_the_remote_process_group(
    executor: SshExecutor, target: SshTarget
) -> None:
    child, grandchild = marker_seconds(), marker_seconds()
    # Closing the channel alone would leave both sleeps running on the target.
    command = f"(sleep {grandchild} &); sleep {child}"
    result = await executor.run(target, ExecRequest(command, timeout_s=2))
    assert (result.status, result.exit_code) == ("timed_out", None)
    assert running(child) == "" and running(grandchild) == ""


async def test_a_remote_command_ignoring_sigterm_is_killed_after_the_grace_period(
    executor: SshExecutor, target: SshTarget
) -> None:
    child = marker_seconds()
    result = await executor.run(target, ExecRequest(f"trap '' TERM; sleep {child}", timeout_s=1))
    assert result.status == "timed_out"
    assert running(child) == ""


async def test_a_closed_port_is_a_connect_error(
    executor: SshExecutor, sshd: SshServer, free_port: int
) -> None:
    target = SshTarget(
        "gone", "127.0.0.1", free_port, sshd.user, sshd.client_private_key, sshd.host_key_line
    )
    result = await executor.run(target, ExecRequest("true"))
    assert (result.status, result.exit_code) == ("connect_error", None)
    assert result.error is not None and result.error.startswith("connection refused")


async def test_a_key_the_server_does_not_accept_is_an_authentication_failure(
    executor: SshExecutor, sshd: SshServer, stranger_key: ClientKey, make_target: TargetFactory
) -> None:
    result = await executor.run(
        make_target(sshd, key=stranger_key.private_key), ExecRequest("true")
    )
    assert result.status == "connect_error"
    assert result.error is not None
    assert result.error.startswith(f"authentication failed for user {sshd.user}")


async def test_a_host_key_mismatch_fails_before_running_the_command(
    executor: SshExecutor,
    sshd: SshServer,
    sshd_other_host_key: SshServer,
    tmp_path: Path,
    make_target: TargetFactory,
) -> None:
    marker = tmp_path / "ran"
    impostor = make_target(sshd_other_host_key, host_key=sshd.host_key_line)
    result = await executor.run(impostor, ExecRequest(f"touch {marker}"))
    assert result.status == "connect_error"
    assert result.error is not None
    expected = sshd.host_key_fingerprint
    presented = sshd_other_host_key.host_key_fingerprint
    assert result.error.startswith(f"host key mismatch: expected {expected}, got {presented}")
    assert not marker.exists()


async def test_a_second_run_on_the_same_target_reuses_the_connection(
    executor: SshExecutor, target: SshTarget
) -> None:
    await executor.run(target, ExecRequest("true"))
    await executor.run(target, ExecRequest("true"))
    assert executor.connections_opened == 1


async def test_concurrent_runs_on_one_target_share_one_handshake(
    executor: SshExecutor, target: SshTarget
) -> None:
    results = await asyncio.gather(*(executor.run(target, ExecRequest("true")) for _ in range(8)))
    assert {r.status for r in results} == {"succeeded"}
    assert executor.connections_opened == 1


async def test_a_connection_closed_by_the_server_is_replaced(
    executor: SshExecutor, target: SshTarget
) -> None:
    await executor.run(target, ExecRequest("true"))
    # Kill this connection's sshd child on the target: the next run must reconnect.
    # The command's parent is the watchdog's timeout(1), whose parent is the login shell.
    shell = "$(ps -o ppid= -p $PPID)"
    await executor.run(target, ExecRequest(f"kill -9 $(ps -o ppid= -p {shell})"))
    result = await executor.run(target, ExecRequest("echo back"))
    assert (result.status, result.stdout.head) == ("succeeded", "back\n")
    assert executor.connections_opened == 2


async def test_the_per_target_cap_bounds_runs_in_flight(
    sshd: SshServer, tmp_path: Path, make_target: TargetFactory
) -> None:
    log = tmp_path / "log"
    executor = SshExecutor(per_target_concurrency=2)
    command = f"echo start >> {log}; sleep 0.3; echo end >> {log}"
    try:
        await asyncio.gather(
            *(executor.run(make_target(sshd), ExecRequest(command)) for _ in range(6))
        )
    finally:
        await executor.close()
    in_flight, peak = 0, 0
    for line in log.read_text().split():
        in_flight += 1 if line == "start" else -1
        peak = max(peak, in_flight)
    assert peak == 2


def test_huge_remote_output_stays_bounded_in_memory(sshd: SshServer) -> None:
    args = [sshd.host, str(sshd.port), sshd.user, str(sshd.client_key_path), sshd.host_key_line]
    out = subprocess.run(
        [sys.executable, str(PROBE), "ssh", str(200_000_000), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ).stdout
    report = json.loads(out)
    assert report["status"] == "succeeded"
    assert (report["stdout_total"], report["stderr_total"]) == (200_000_000, 200_000_000)
    assert (report["stdout_kept"], report["stderr_kept"], report["truncated"]) == (8192, 8192, True)
    assert report["rss_growth_kib"] < 8 * 1024


@dataclass
class Holder:
    """A run holding its target's only slot until :meth:`release` (an operator's stop)."""

    task: asyncio.Task[ExecResult]
    live: LiveOutput

    async def release(self) -> None:
        self.live.request_stop()
        assert (await self.task).error == STOPPED


async def hold_the_slot(executor: SshExecutor, target: SshTarget) -> Holder:
    """Start a run that holds the slot, once its command runs on the target."""
    seconds, live = marker_seconds(), LiveOutput()
    task = asyncio.create_task(
        executor.run(target, ExecRequest(f"sleep {seconds}", timeout_s=120, live=live))
    )
    await eventually_async(lambda: running(seconds), 30, "the slot holder's command to run")
    return Holder(task, live)


async def test_a_run_whose_budget_is_spent_waiting_for_a_slot_is_not_started(
    target: SshTarget, tmp_path: Path
) -> None:
    one_at_a_time = SshExecutor(per_target_concurrency=1, kill_grace_s=0.5)
    marker = tmp_path / "ran"
    try:
        holder = await hold_the_slot(one_at_a_time, target)
        late = asyncio.create_task(
            one_at_a_time.run(target, ExecRequest(f"touch {marker}", watchdog_s=1.0))
        )
        await asyncio.sleep(1.0)  # at least the whole budget spent waiting for the slot
        await holder.release()
        result = await late
        assert (result.status, result.error) == ("connect_error", NOT_STARTED_DEADLINE)
        assert not marker.exists()
    finally:
        await one_at_a_time.close()


#: The late run's budget, and how long it waits for the slot at least.
BUDGET_S, QUEUED_S = 6.0, 2.0


async def test_the_time_spent_queueing_comes_off_the_remote_budget(target: SshTarget) -> None:
    """The limit the run reports is what was left of its budget once it had the slot:
    at most the budget less the (at least) 2 s it waited, however long a loaded machine
    took to connect; the budget in full would give a limit a whole 2 s longer."""
    grace = 0.5
    one_at_a_time = SshExecutor(per_target_concurrency=1, kill_grace_s=grace)
    seconds = marker_seconds()
    try:
        holder = await hold_the_slot(one_at_a_time, target)
        request = ExecRequest(f"sleep {seconds}", timeout_s=60, watchdog_s=BUDGET_S)
        late = asyncio.create_task(one_at_a_time.run(target, request))
        await asyncio.sleep(QUEUED_S)  # the slot is given back no earlier than this
        await holder.release()
        result = await late
        assert result.status == "timed_out"
        error = result.error or ""
        assert error.startswith("claim deadline reached after "), error
        limit = float(error.removeprefix("claim deadline reached after ").split(" s")[0])
        left_term_after, _ = split_budget(BUDGET_S - QUEUED_S, grace)
        whole_term_after, _ = split_budget(BUDGET_S, grace)
        assert 0 < limit <= left_term_after < whole_term_after - QUEUED_S / 2, error
        assert running(seconds) == ""
    finally:
        await one_at_a_time.close()
