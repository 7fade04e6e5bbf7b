"""LocalExecutor against real /bin/sh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

from fleetcron.executors import ExecRequest, LocalExecutor

PROBE = Path(__file__).with_name("memory_probe.py")


def marker_seconds() -> str:
    """A unique sleep duration, so pgrep only ever finds this test's processes."""
    return f"600.{uuid.uuid4().int % 10**9:09d}"


def running(seconds: str) -> str:
    """Live ``sleep <seconds>`` processes (the wrapper's own argv also holds the text)."""
    return subprocess.run(
        ["pgrep", "-af", f"^sleep {seconds}$"], capture_output=True, text=True
    ).stdout


async def test_it_captures_stdout_and_stderr_of_a_successful_command() -> None:
    result = await LocalExecutor(allow_root=True).run(
        ExecRequest("echo out; echo err >&2", timeout_s=10)
    )
    assert (result.status, result.exit_code, result.error) == ("succeeded", 0, None)
    assert (result.stdout.head, result.stderr.head) == ("out\n", "err\n")


async def test_it_reports_a_non_zero_exit_as_failed() -> None:
    result = await LocalExecutor(allow_root=True).run(ExecRequest("exit 7", timeout_s=10))
    assert (result.status, result.exit_code) == ("failed", 7)


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
