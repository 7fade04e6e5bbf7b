"""The local group watchdog ends a run's process group at its deadline without the scheduler.

Each case plays the scheduler's side by hand: it arms a deadline through a
:class:`~fleetcron.executors.local_watch.GroupWatch`, starts a command in a session of its
own with the run's tag, then closes the pipe (the scheduler is gone) and watches the
command's processes through /proc. The negative control tells the watchdog the run is done
and sees the command outlive its deadline: the checks can fail.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Callable

import pytest
from procs import kill_all, marker_seconds, sleeping

from fleetcron.executors.group_watchdog import WATCH_VARIABLE
from fleetcron.executors.local_watch import GroupWatch, boot_clock
from waiting import eventually_async

TERM_S = 1.0
KILL_S = 2.0
TOLERANCE_S = 1.5
"""Slack for a loaded 2-core machine between a deadline and the processes being gone."""


@pytest.fixture
async def watch() -> AsyncIterator[GroupWatch]:
    group_watch = GroupWatch()
    try:
        yield group_watch
    finally:
        group_watch.close()


def start(command: str, key: str) -> subprocess.Popen[bytes]:
    """The command as the local executor starts it: ``/bin/sh -c``, a new session, tagged."""
    return subprocess.Popen(
        ["/bin/sh", "-c", command],
        env={"PATH": os.environ["PATH"], WATCH_VARIABLE: key},
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


async def gone_after(proc: subprocess.Popen[bytes], marker: str, within_s: float) -> float:
    """Seconds until no ``sleep <marker>`` is left (the shell reaped as it goes)."""
    began = boot_clock()

    def gone() -> float | None:
        proc.poll()
        return None if sleeping(marker) else boot_clock() - began

    return await eventually_async(gone, within_s, f"sleep {marker} to be gone", interval=0.05)


async def armed(
    watch: GroupWatch, command: Callable[[str], str], *, pgid: bool
) -> tuple[subprocess.Popen[bytes], str, float]:
    """Arm a run, start it (telling the watchdog its group when ``pgid``), close the pipe."""
    marker = marker_seconds()
    key = watch.key()
    at = boot_clock()
    await watch.arm(key, at + TERM_S, at + KILL_S)
    proc = start(command(marker), key)
    await eventually_async(lambda: sleeping(marker), 10, "the command to start")
    if pgid:
        watch.started(key, proc.pid)
    watch.close()
    return proc, marker, at


async def test_a_run_armed_but_never_reported_started_is_found_by_its_tag(
    watch: GroupWatch,
) -> None:
    """The scheduler died between arming the run and learning its pid."""
    proc, marker, at = await armed(watch, lambda m: f"sleep {m}", pgid=False)
    try:
        await gone_after(proc, marker, KILL_S + TOLERANCE_S)
        assert boot_clock() - at >= TERM_S, "killed before its deadline"
    finally:
        proc.kill()
        proc.wait()


async def test_a_group_ignoring_sigterm_is_killed_at_the_final_deadline(
    watch: GroupWatch,
) -> None:
    proc, marker, at = await armed(watch, lambda m: f"trap '' TERM; sleep {m}", pgid=True)
    try:
        await gone_after(proc, marker, KILL_S + TOLERANCE_S)
        assert boot_clock() - at >= KILL_S, "SIGKILL came before the grace was over"
    finally:
        proc.kill()
        proc.wait()


async def test_leftovers_without_the_tag_are_killed_with_their_group(watch: GroupWatch) -> None:
    """The main process exits at once; its child cleared its environment (no tag) but is
    still in the run's group, which the watchdog ends at the deadline."""
    proc, marker, at = await armed(
        watch, lambda m: f"env -i sleep {m} </dev/null >/dev/null 2>&1 & sleep 0.2", pgid=True
    )
    proc.wait()
    await gone_after(proc, marker, KILL_S + TOLERANCE_S)
    assert boot_clock() - at >= TERM_S, "killed before its deadline"


async def test_negative_control_a_run_reported_done_is_left_alone(watch: GroupWatch) -> None:
    marker = marker_seconds()
    key = watch.key()
    at = boot_clock()
    await watch.arm(key, at + TERM_S, at + KILL_S)
    proc = start(f"sleep {marker}", key)
    try:
        await eventually_async(lambda: sleeping(marker), 10, "the command to start")
        watch.started(key, proc.pid)
        watch.done(key)
        watch.close()
        with pytest.raises(AssertionError, match="timed out"):
            await gone_after(proc, marker, KILL_S + TOLERANCE_S)
        assert sleeping(marker), "the command was ended though its run was done"
    finally:
        proc.kill()
        proc.wait()
        kill_all(marker)
