"""LocalExecutor against real /bin/sh processes."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from procs import sleeping

from fleetcron.executors import ExecRequest, LocalExecutor
from fleetcron.executors.base import NOT_STARTED_DEADLINE
from fleetcron.executors.local import BASE_PATH, ROOT_REFUSED
from fleetcron.executors.watchdog import MISSING_TIMEOUT, watchdog_script
from waiting import eventually, eventually_async

PROBE = Path(__file__).with_name("memory_probe.py")
#: How long a killed command may take to be gone, on a loaded machine (a wait, not a sleep).
GONE_WITHIN_S = 10.0


def marker_seconds() -> str:
    """A unique sleep duration, so pgrep only ever finds this test's processes."""
    return f"600.{uuid.uuid4().int % 10**9:09d}"


def running(seconds: str) -> str:
    """Live ``sleep <seconds>`` processes (the wrapper's own argv also holds the text)."""
    return subprocess.run(
        ["pgrep", "-af", f"^sleep {seconds}$"], capture_output=True, text=True
    ).stdout


async def test_it_passes_the_request_env_and_a_minimal_environment() -> None:
    request = ExecRequest(
        'printf "%s|%s|%s|%s" "$FLEETCRON_JOB" "$LANG" "$SHELL" "${PYTEST_CURRENT_TEST-unset}"',
        env={"FLEETCRON_JOB": "backup db"},
        timeout_s=10,
    )
    result = await LocalExecutor(allow_root=True).run(request)
    assert result.stdout.head == "backup db|C.UTF-8|/bin/sh|unset"


async def test_it_takes_timestamps_from_the_injected_clock() -> None:
    moments = iter([datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, 0, 1, tzinfo=UTC)])
    result = await LocalExecutor(clock=lambda: next(moments), allow_root=True).run(
        ExecRequest("true")
    )
    assert (result.started_at.minute, result.finished_at.minute) == (0, 1)


async def test_a_timeout_kills_the_whole_process_group_including_grandchildren() -> None:
    child, grandchild = marker_seconds(), marker_seconds()
    # The subshell's background sleep is orphaned at once: only the process group finds it.
    command = f"(sleep {grandchild} &); sleep {child}"
    result = await LocalExecutor(kill_grace_s=1, allow_root=True).run(
        ExecRequest(command, timeout_s=1)
    )
    assert (result.status, result.exit_code) == ("timed_out", None)
    assert running(child) == "" and running(grandchild) == ""


async def test_a_command_ignoring_sigterm_is_killed_after_the_grace_period() -> None:
    child = marker_seconds()
    command = f"trap '' TERM; sleep {child}"
    result = await LocalExecutor(kill_grace_s=0.5, allow_root=True).run(
        ExecRequest(command, timeout_s=0.5)
    )
    assert result.status == "timed_out"
    assert running(child) == ""


def test_huge_local_output_stays_bounded_in_memory() -> None:
    out = subprocess.run(
        [sys.executable, str(PROBE), "local", str(200_000_000)],
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


async def test_cancelling_at_spawn_time_never_leaves_the_command_running() -> None:
    """The cancel lands at every point of process start-up in turn (0 to 40 loop steps
    after the call): the command is never left behind and the cancel never waits for it."""
    local = LocalExecutor(allow_root=True)
    seconds = marker_seconds()
    cancelled = 0
    for steps in range(41):
        task = asyncio.create_task(local.run(ExecRequest(f"sleep {seconds}", timeout_s=60)))
        for _ in range(steps):
            await asyncio.sleep(0)  # sleep-in-loop: one loop step, the point of the cancel
        task.cancel()
        # Before the fix a cancel inside the spawn waited for the command's whole 60 s.
        done, _ = await asyncio.wait({task}, timeout=10)
        assert done, f"the cancel after {steps} steps waited for the command"
        cancelled += task.cancelled()
        eventually(
            lambda: not sleeping(seconds),
            GONE_WITHIN_S,
            f"the command to be gone after {steps} steps",
        )
    assert cancelled == 41


async def test_a_cancel_does_not_depend_on_the_wrapper_reporting_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loaded machine may deliver the wrapper's report of the command's group late, or
    the group may not exist yet when it is reported: the cancel finds the command's
    group by itself and never waits for the command to end."""
    monkeypatch.setattr("fleetcron.executors.local.PGID_MARKER", b"__no_report_arrives__=")
    seconds = marker_seconds()
    task = asyncio.create_task(
        LocalExecutor(allow_root=True).run(ExecRequest(f"sleep {seconds}", timeout_s=60))
    )
    await eventually_async(lambda: sleeping(seconds), 10, "the command to start", interval=0.05)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done and task.cancelled(), "the cancel waited for the command"
    eventually(lambda: not sleeping(seconds), GONE_WITHIN_S, "the command to be gone")


async def test_a_request_with_no_budget_left_is_not_started(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    request = ExecRequest(f"touch {marker}", watchdog_s=1e-9)
    result = await LocalExecutor(allow_root=True).run(request)
    assert (result.status, result.error) == ("connect_error", NOT_STARTED_DEADLINE)
    assert not marker.exists()


async def test_a_budget_measured_before_a_pause_counts_from_its_measurement(
    tmp_path: Path,
) -> None:
    """The scheduler measured 50 s of budget 100 s ago and was paused since (SIGSTOP, a
    stalled VM): the run is not started. The same budget measured now runs (the control)."""
    marker = tmp_path / "ran"
    executor = LocalExecutor(allow_root=True)
    stale = ExecRequest(f"touch {marker}", watchdog_s=50, budget_from=time.monotonic() - 100)
    result = await executor.run(stale)
    assert (result.status, result.error) == ("connect_error", NOT_STARTED_DEADLINE)
    assert not marker.exists()
    assert (await executor.run(replace(stale, budget_from=time.monotonic()))).status == "succeeded"
    assert marker.exists()


@pytest.mark.parametrize("paused", [True, False])
async def test_a_scheduler_paused_just_before_starting_a_run_does_not_start_it_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paused: bool
) -> None:
    """Everything before the spawn is done (budget planned, deadline handed to the
    watchdog, claim file written), then the whole process stops for longer than the
    budget, as under SIGSTOP: when it resumes, the command itself sees the deadline passed
    on the boot clock and refuses to start. Without the pause it runs (the control)."""
    marker = tmp_path / "ran"
    watched = LocalExecutor._watched

    async def stopped_after(self: LocalExecutor, *args: Any) -> tuple[str | None, str]:
        result = await watched(self, *args)
        if paused:
            time.sleep(1.5)  # the event loop stopped with everything else: no await
        return result

    monkeypatch.setattr(LocalExecutor, "_watched", stopped_after)
    request = ExecRequest(f"touch {marker}", timeout_s=60, watchdog_s=1.0, generation=4)
    result = await LocalExecutor(kill_grace_s=0.2, allow_root=True).run(request)
    assert marker.exists() is not paused
    if paused:
        assert result.status == "connect_error", result
        assert result.error is not None and "deadline passed" in result.error, result
    else:
        assert result.status == "succeeded", result


async def test_a_budget_shorter_than_the_timeout_ends_the_run_as_timed_out() -> None:
    seconds = marker_seconds()
    request = ExecRequest(f"sleep {seconds}", timeout_s=60, watchdog_s=1.0)
    result = await LocalExecutor(kill_grace_s=5, allow_root=True).run(request)
    assert result.status == "timed_out"
    assert result.error is not None and result.error.startswith("claim deadline reached")
    # The budget (1 s), not the 60 s timeout, ended it, however late a loaded machine
    # delivered the signals.
    assert result.duration_ms < 30_000
    assert sleeping(seconds) == []


async def test_root_is_refused_unless_allowed_naming_the_settings(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    marker = tmp_path / "ran"
    result = await LocalExecutor().run(ExecRequest(f"touch {marker}"))
    assert (result.status, result.error) == ("connect_error", ROOT_REFUSED)
    assert "local_run_as" in ROOT_REFUSED and "FLEETCRON_LOCAL_ALLOW_ROOT" in ROOT_REFUSED
    assert not marker.exists()
    allowed = await LocalExecutor(allow_root=True).run(ExecRequest(f"touch {marker}"))
    assert allowed.status == "succeeded" and marker.exists()


async def test_commands_run_as_the_configured_user_and_cannot_read_the_data_dir() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    # pytest's own temporary directories are 0700: use one others can traverse, so that
    # only the data dir's own mode (0700, as fleetcron creates it) keeps the user out.
    parent = Path(tempfile.mkdtemp(prefix="fleetcron-runas-"))
    try:
        parent.chmod(0o755)
        (parent / "public").write_text("public")
        data_dir = parent / "data"
        data_dir.mkdir(mode=0o700)
        (data_dir / "master.key").write_text("secret")
        command = (
            f'id -un; echo "$HOME|$USER"; cat {parent}/public; echo; '
            f"cat {data_dir}/master.key; ls {data_dir}"
        )
        result = await LocalExecutor(run_as="nobody").run(ExecRequest(command, timeout_s=10))
        lines = result.stdout.head.splitlines()
        assert lines[:3] == ["nobody", f"{pwd.getpwnam('nobody').pw_dir}|nobody", "public"]
        assert "secret" not in result.stdout.text
        assert result.stderr.text.count("Permission denied") == 2
        assert result.status == "failed"
        # Negative control: as root the same command reads the key.
        root = await LocalExecutor(allow_root=True).run(ExecRequest(command, timeout_s=10))
        assert "secret" in root.stdout.text
    finally:
        shutil.rmtree(parent)


async def test_an_unknown_run_as_user_fails_the_run_with_a_clear_error() -> None:
    result = await LocalExecutor(run_as="no-such-user-fc").run(ExecRequest("true"))
    assert result.status == "connect_error"
    assert result.error == (
        "local_run_as names user 'no-such-user-fc', which does not exist on this machine"
    )


async def test_a_timeout_still_kills_the_group_of_a_command_running_as_another_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    seconds = marker_seconds()
    command = f"(sleep {seconds} &); sleep {seconds}"
    result = await LocalExecutor(run_as="nobody", kill_grace_s=0.5).run(
        ExecRequest(command, timeout_s=0.5)
    )
    assert result.status == "timed_out"
    eventually(
        lambda: not sleeping(seconds), GONE_WITHIN_S, "the command and its orphan to be gone"
    )


async def test_a_scheduler_that_is_not_root_cannot_switch_users_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Running the suite as an unprivileged user is not possible here: pretend to be one.
    monkeypatch.setattr("fleetcron.executors.local.os.geteuid", lambda: os.getuid() + 4242)
    monkeypatch.setattr(
        "fleetcron.executors.local.RunAs.current",
        classmethod(lambda cls: cls("deploy", 4242, 4242, "/", ())),
    )
    marker = tmp_path / "ran"
    result = await LocalExecutor(run_as="nobody").run(ExecRequest(f"touch {marker}"))
    assert (result.status, result.error) == (
        "connect_error",
        "local_run_as is 'nobody', but the scheduler runs as 'deploy', not root: only root "
        "can run commands as another user",
    )
    assert not marker.exists()


def test_without_timeout_on_the_path_the_wrapper_refuses_to_start_the_command(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    script = watchdog_script(
        f"touch {marker}", {"PATH": str(tmp_path)}, term_after_s=5, kill_grace_s=1
    )
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stderr.strip()) == (127, MISSING_TIMEOUT)
    assert not marker.exists()
    # Negative control: with coreutils on the PATH the same wrapper runs it.
    script = watchdog_script(f"touch {marker}", {"PATH": BASE_PATH}, term_after_s=5, kill_grace_s=1)
    assert subprocess.run(["/bin/sh", "-c", script], capture_output=True).returncode == 0
    assert marker.exists()
