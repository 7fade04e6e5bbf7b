"""The wrapper's mark check and the cleanup script, as text (their behaviour on real
processes is in tests/integration/executors/test_generation_mark.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from fleetcron.errors import InvalidInput
from fleetcron.executors import ExecRequest
from fleetcron.executors.watchdog import (
    MARK_AND_SCAN_SCRIPT,
    MARK_SCRIPT,
    REVOKE_SCRIPT,
    SCAN_SCRIPT,
    SUPERSEDED_EXIT,
    guarded_command,
    shard_scope,
    superseded_error,
    watchdog_script,
)


@pytest.mark.parametrize(("offset_s", "runs"), [(-0.5, False), (30.0, True)])
def test_a_local_command_refuses_to_start_past_its_deadline_on_the_boot_clock(
    tmp_path: Path, offset_s: float, runs: bool
) -> None:
    """``not_after`` is read against /proc/uptime by the shell itself, right before the
    command: past it, the command is not started and the refusal is the target's."""
    marker = tmp_path / "ran"
    not_after = time.clock_gettime(time.CLOCK_BOOTTIME) + offset_s
    script = guarded_command(f"touch {marker}", None, None, not_after=not_after)
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=False)
    assert marker.exists() is runs, done
    if runs:
        assert (done.returncode, done.stderr) == (0, "")
    else:
        refusal = superseded_error(done.returncode, done.stderr)
        assert refusal is not None and "deadline passed" in refusal, done


def test_without_a_generation_or_a_scope_the_command_runs_unchecked() -> None:
    assert guarded_command("echo hi", None, "abc") == "echo hi"
    assert guarded_command("echo hi", 3, None) == "echo hi"


def test_the_check_runs_in_the_tagged_group_before_the_command() -> None:
    script = watchdog_script(
        "echo hi", {}, term_after_s=5, kill_grace_s=1, generation=3, mark_scope="abc"
    )
    run = next(line for line in script.splitlines() if line.startswith("FLEETCRON_GENERATION"))
    # Tagged with its generation and its mark scope (the cleanup kills its scope's only).
    assert run.startswith("FLEETCRON_GENERATION=3 FLEETCRON_MARK_SCOPE=abc timeout -s TERM")
    check, command = run.index('"$HOME/.fleetcron/generation-abc"/*'), run.index("eval ")
    assert check < command
    assert f"exit {SUPERSEDED_EXIT}" in run and "-gt 3 ]" in run


def test_a_scope_that_could_escape_its_directory_is_refused() -> None:
    for scope in ("../x", "a b", "", "a/b", "x" * 65, "$(id)"):
        with pytest.raises(ValueError, match="invalid mark scope"):
            guarded_command("true", 1, scope)
        with pytest.raises(InvalidInput) as refused:
            ExecRequest("true", generation=1, mark_scope=scope)
        assert refused.value.field == "mark_scope"


def test_the_refusal_needs_both_its_status_and_its_line() -> None:
    line = "fleetcron: refused by the target: generation 1 superseded by 2; not started\n"
    assert superseded_error(SUPERSEDED_EXIT, "noise\n" + line) == (
        "refused by the target: generation 1 superseded by 2; not started"
    )
    assert superseded_error(SUPERSEDED_EXIT, "something else\n") is None
    assert superseded_error(1, line) is None
    assert superseded_error(None, line) is None


def test_cleanup_writes_the_mark_before_it_scans() -> None:
    assert MARK_AND_SCAN_SCRIPT == MARK_SCRIPT + REVOKE_SCRIPT + SCAN_SCRIPT
    assert MARK_AND_SCAN_SCRIPT.index('echo "mark=') < MARK_AND_SCAN_SCRIPT.index("kill -s KILL")
    # The older claim files are revoked after the mark and before any kill.
    revoke = MARK_AND_SCAN_SCRIPT.index(REVOKE_SCRIPT)
    assert MARK_AND_SCAN_SCRIPT.index('echo "mark=') < revoke
    assert revoke + len(REVOKE_SCRIPT) <= MARK_AND_SCAN_SCRIPT.index("kill -s KILL")
    assert "kill" not in REVOKE_SCRIPT
    # It stops before killing anything when the mark cannot be written.
    assert "exit 3; }" in MARK_SCRIPT and "kill -s" not in MARK_SCRIPT


def test_each_shard_has_its_own_mark_and_one_shard_keeps_the_installations() -> None:
    assert shard_scope("abc", 0, 1) == "abc"
    assert [shard_scope("abc", s, 64) for s in (0, 3, 63)] == ["abc-s0", "abc-s3", "abc-s63"]
    script = watchdog_script(
        "true", {}, term_after_s=5, kill_grace_s=1, generation=2, mark_scope="abc-s3"
    )
    assert '"$HOME/.fleetcron/generation-abc-s3"/*' in script
    assert "FLEETCRON_MARK_SCOPE=abc-s3 timeout" in script
