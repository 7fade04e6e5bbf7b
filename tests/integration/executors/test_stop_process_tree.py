"""Stop and timeout end a run's whole process tree, locally and on a real SSH target.

Each test runs a command that starts processes in the background, reads the run's tree
from /proc while it runs (every process carrying the run's tag), ends the run, and then
lists which of those processes still exist on the target, zombies (``<defunct>``)
included. The target of the SSH tests is this machine's loopback sshd, so the listing
is the target's. The negative controls show that the listing sees a leftover: a process
started outside the run's group and session, and a zombie nobody reaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from process_tree import Proc, leftovers, read, tagged
from procs import marker_seconds, sleeping

from fleetcron.executors import ExecRequest, ExecResult, LocalExecutor, SshExecutor, SshTarget
from fleetcron.executors.output import STOPPED, LiveOutput
from waiting import eventually, eventually_async

GRACE_S = 1.5
#: A grace no stop on a loaded machine comes near: a command that ends on SIGTERM is done
#: long before it, and one kept for the grace would take all of it.
LONG_GRACE_S = 60.0
#: The timeout of a run the test stops: never reached by a stop.
RUN_TIMEOUT_S = 120.0
#: Time for the machine's init to reap an orphan's zombie, on a loaded machine.
REAPED_WITHIN_S = 10.0

Run = Callable[[ExecRequest], Awaitable[ExecResult]]


@dataclass
class Subject:
    kind: str
    run: Run


KINDS = ["local", pytest.param("ssh", marks=pytest.mark.sshd)]


async def executor_of(request: pytest.FixtureRequest, grace_s: float) -> AsyncIterator[Subject]:
    """The subject of ``request.param`` (``local``, ``ssh``) with a kill grace of ``grace_s``."""
    if request.param == "local":
        local = LocalExecutor(kill_grace_s=grace_s, allow_root=True)
        yield Subject("local", local.run)
        return
    target: SshTarget = request.getfixturevalue("target")
    ssh = SshExecutor(kill_grace_s=grace_s)
    try:
        yield Subject("ssh", lambda req: ssh.run(target, req))
    finally:
        await ssh.close()


@pytest.fixture(params=KINDS)
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    async for made in executor_of(request, GRACE_S):
        yield made


@pytest.fixture(params=KINDS)
async def patient_subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    """A subject whose kill grace is :data:`LONG_GRACE_S`."""
    async for made in executor_of(request, LONG_GRACE_S):
        yield made


def run_id() -> int:
    return random.randint(10**9, 10**10)


async def started(rid: int, *markers: str) -> set[int]:
    """The run's tree once every ``sleep <marker>`` is running in it."""

    def all_started() -> set[int] | None:
        tree = tagged(rid)
        if all(
            any(p.pid in {q.pid for q in tree} for p in map(read, sleeping(m)) if p)
            for m in markers
        ):
            return {p.pid for p in tree}
        return None

    return await eventually_async(
        all_started,
        15,
        lambda: f"the run's processes to all start: {tagged(rid)}",
        interval=0.05,
    )


async def stop_after_start(
    subject: Subject, command: str, *markers: str
) -> tuple[ExecResult, set[int], float]:
    """Run ``command``, stop it once its sleeps run: the result, the tree, the stop's time."""
    rid, live = run_id(), LiveOutput()
    task = asyncio.ensure_future(
        subject.run(ExecRequest(command, timeout_s=RUN_TIMEOUT_S, run_id=rid, live=live))
    )
    tree = await started(rid, *markers)
    t0 = time.monotonic()
    live.request_stop()
    result = await task
    return result, tree, time.monotonic() - t0


def describe(left: list[Proc]) -> str:
    return ", ".join(f"{p.pid} {p.comm} state {p.state} ppid {p.ppid}" for p in left)


async def test_stop_ends_the_command_and_its_background_children(subject: Subject) -> None:
    first, second = marker_seconds(), marker_seconds()
    result, tree, _ = await stop_after_start(
        subject, f"sh -c 'sleep {first} & sleep {second}'", first, second
    )
    assert (result.status, result.error) == ("failed", STOPPED)
    assert len(tree) >= 4  # timeout, the shells, the two sleeps
    left = leftovers(tree, REAPED_WITHIN_S)
    assert not left, f"left on the {subject.kind} target after Stop: {describe(left)}"


async def test_stop_sends_sigterm_first_so_the_command_can_clean_up(
    patient_subject: Subject,
) -> None:
    child = marker_seconds()
    result, tree, took = await stop_after_start(
        patient_subject, f"trap 'echo cleaned up; exit 3' TERM; sleep {child} & wait", child
    )
    assert result.status == "failed" and "cleaned up" in result.stdout.text
    assert took < LONG_GRACE_S, "a command that ends on SIGTERM is not kept for the grace"
    assert not leftovers(tree, REAPED_WITHIN_S)


async def test_stop_escalates_to_sigkill_after_the_grace(subject: Subject) -> None:
    first, second = marker_seconds(), marker_seconds()
    # Both sleeps inherit the ignored SIGTERM.
    result, tree, took = await stop_after_start(
        subject, f"trap '' TERM; sleep {first} & sleep {second}", first, second
    )
    assert (result.status, result.error) == ("failed", STOPPED)
    # SIGKILL comes after the grace: from the stop, or from the watchdog's timeout(1),
    # whose own kill delay (at least half the grace) starts at the same SIGTERM; never
    # later than the run's own timeout would have ended it (however slow a loaded
    # machine is to deliver the kill and report it).
    assert GRACE_S / 2 * 0.9 <= took < RUN_TIMEOUT_S / 2, took
    left = leftovers(tree, REAPED_WITHIN_S)
    assert not left, f"left on the {subject.kind} target after Stop: {describe(left)}"


async def test_a_timeout_ends_the_tree_even_when_the_main_process_ended_first(
    subject: Subject,
) -> None:
    first, second = marker_seconds(), marker_seconds()
    rid = run_id()
    # The main process exits at once; the background children ignore SIGTERM and close
    # their output, so only the group tells they are there.
    command = f"trap '' TERM; (sleep {first} & sleep {second}) </dev/null >/dev/null 2>&1 & sleep 2"
    task = asyncio.ensure_future(subject.run(ExecRequest(command, timeout_s=1, run_id=rid)))
    tree = await started(rid, first, second)
    result = await task
    assert result.status == "timed_out"
    left = leftovers(tree, REAPED_WITHIN_S)
    assert not left, f"left on the {subject.kind} target after the timeout: {describe(left)}"


async def test_negative_control_a_process_outside_the_group_is_seen_as_left_over(
    subject: Subject,
) -> None:
    inside, outside = marker_seconds(), marker_seconds()
    # setsid leaves the run's process group and session: no group kill reaches it.
    command = f"setsid sleep {outside} & sleep {inside}"
    try:
        result, tree, _ = await stop_after_start(subject, command, inside, outside)
        assert result.error == STOPPED
        escaped = set(sleeping(outside))
        # Whatever the group kill reached goes (its zombies reaped, however slowly on a
        # loaded machine); the escaped process is what the listing still finds.
        assert not leftovers(tree - escaped, REAPED_WITHIN_S)
        left = leftovers(tree, 0)
        assert [p.comm for p in left] == ["sleep"] and sleeping(outside) == [left[0].pid]
        assert sleeping(inside) == []
    finally:
        for pid in sleeping(outside):
            os.kill(pid, signal.SIGKILL)


def pipes_of(pid: int | str) -> set[str]:
    """The pipes (``pipe:[inode]``) among a process's open descriptors."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # a descriptor closed while listing
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("pipe:"):
                found.add(link)
    return found


async def test_a_stopped_run_lets_go_of_the_output_an_escaped_process_still_holds() -> None:
    """The escaped process keeps the run's stdout and stderr open; the stop gives up
    reading them, and closes this side too: a scheduler keeps no descriptor per escaped
    process. The control: while the run goes on, the check sees the shared pipes."""
    local = LocalExecutor(kill_grace_s=GRACE_S, allow_root=True)
    inside, outside = marker_seconds(), marker_seconds()
    live = LiveOutput()
    rid = run_id()
    request = ExecRequest(
        f"setsid sleep {outside} & sleep {inside}", timeout_s=60, run_id=rid, live=live
    )
    running = asyncio.create_task(local.run(request))
    try:
        await started(rid, inside, outside)
        escaped = sleeping(outside)[0]
        assert pipes_of(escaped) & pipes_of("self")  # the control: shared while it runs
        live.request_stop()
        result = await running
        assert result.error == STOPPED
        assert sleeping(outside) == [escaped]  # still alive, still holding its ends
        assert pipes_of(escaped) and not pipes_of(escaped) & pipes_of("self")
    finally:
        running.cancel()
        for pid in sleeping(outside):
            os.kill(pid, signal.SIGKILL)
        await local.close()


def test_negative_control_a_zombie_is_seen_as_left_over() -> None:
    child = subprocess.Popen(["true"])
    try:
        eventually(
            lambda: (read(child.pid) or Proc(0, "", "", 0, 0)).state == "Z",
            10,
            "the exited child to be a zombie",
        )
        left = leftovers({child.pid}, 0.5)
        assert [(p.pid, p.state) for p in left] == [(child.pid, "Z")]
    finally:
        child.wait()
    assert leftovers({child.pid}, 0.5) == []
