"""executors/child_exit.py: on Python 3.11 a local run's exit reaches the loop that started
it through the process's pidfd, whichever loop and thread that is."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator

import pytest

from fleetcron.executors.child_exit import RunningLoopPidfds, watch_exits_by_pidfd

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="Python 3.12 and later watch children by pidfd already"
)


@pytest.fixture
def restored_watcher() -> Iterator[None]:
    """Put back the process's child watcher after the test."""
    before = asyncio.get_child_watcher()
    yield
    asyncio.set_child_watcher(before)


async def exit_code(code: int) -> int:
    process = await asyncio.create_subprocess_exec("/bin/sh", "-c", f"exit {code}")
    return await asyncio.wait_for(process.wait(), timeout=10)


def in_a_thread_of_its_own(code: int) -> int | BaseException:
    """``exit_code(code)`` run by a new loop in a new thread: its result or its error."""
    outcome: list[int | BaseException] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(exit_code(code)))
        except BaseException as exc:  # reported to the test, not lost in the thread
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    return outcome[0]


@pytest.mark.usefixtures("restored_watcher")
def test_the_watcher_is_installed_once() -> None:
    watch_exits_by_pidfd()
    installed = asyncio.get_child_watcher()
    watch_exits_by_pidfd()
    assert isinstance(installed, RunningLoopPidfds)
    assert asyncio.get_child_watcher() is installed


@pytest.mark.usefixtures("restored_watcher")
def test_exits_reach_each_loop_that_started_a_process() -> None:
    watch_exits_by_pidfd()
    assert asyncio.run(exit_code(3)) == 3
    assert in_a_thread_of_its_own(4) == 4
    assert asyncio.run(exit_code(0)) == 0


@pytest.mark.usefixtures("restored_watcher")
def test_negative_control_a_watcher_bound_to_one_loop_misses_another_loops_children() -> None:
    # Python 3.11's own pidfd watcher, attached to the loop of the first run: a process a
    # later loop starts is handed to the first (closed) loop and its exit never arrives.
    bound = asyncio.PidfdChildWatcher()
    asyncio.set_child_watcher(bound)

    async def first() -> int:
        bound.attach_loop(asyncio.get_running_loop())
        return await exit_code(5)

    assert asyncio.run(first()) == 5
    assert not isinstance(in_a_thread_of_its_own(6), int)
