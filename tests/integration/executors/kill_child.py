"""Local active-cleanup scenarios, run inside a PID namespace of their own.

kill_older_generations scans every process of the machine; run on a shared test machine
it would also kill other suites' tagged runs. The test starts this script under
``unshare --pid --fork --kill-child --mount-proc``, where /proc shows only its processes.

Usage: python kill_child.py SCENARIO. Prints one JSON object with what it saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from procs import marker_seconds, sleeping

from fleetcron.executors import ExecRequest, LocalExecutor
from waiting import eventually


def wait_for_sleepers(marker: str, count: int) -> None:
    eventually(
        lambda: len(sleeping(marker)) == count,
        15,
        f"sleep {marker} to run {count} times",
        interval=0.02,
    )


def request(seconds: str, generation: int | None, run_id: int) -> ExecRequest:
    # A child and an orphaned grandchild: the whole group must go.
    return ExecRequest(
        f"(sleep {seconds} &); sleep {seconds}",
        timeout_s=60,
        run_id=run_id,
        generation=generation,
    )


async def runs() -> dict[str, object]:
    local = LocalExecutor(allow_root=True)
    old, new, untagged = marker_seconds(), marker_seconds(), marker_seconds()
    tasks = [
        asyncio.create_task(local.run(request(old, 3, 1))),
        asyncio.create_task(local.run(request(new, 5, 2))),
        asyncio.create_task(local.run(request(untagged, None, 3))),
    ]
    for marker in (old, new, untagged):
        await asyncio.to_thread(wait_for_sleepers, marker, 2)
    killed = await local.kill_older_generations(5)
    old_result = await asyncio.wait_for(tasks[0], 10)
    seen: dict[str, object] = {
        "killed": killed,
        "old_left": len(sleeping(old)),
        "new_left": len(sleeping(new)),
        "untagged_left": len(sleeping(untagged)),
        "old_status": old_result.status,
        "second_sweep": await local.kill_older_generations(3),
    }
    for task in tasks[1:]:
        task.cancel()
    await asyncio.gather(*tasks[1:], return_exceptions=True)
    return seen


async def leftover() -> dict[str, object]:
    """A run whose main process ended at once, leaving a tagged background process in its
    group: the group's leader (timeout) is gone, the leftover is still the run's."""
    local = LocalExecutor(allow_root=True)
    seconds = marker_seconds()
    command = f"sleep {seconds} >/dev/null 2>&1 & echo started"
    result = await local.run(ExecRequest(command, timeout_s=60, run_id=1, generation=2))
    await asyncio.to_thread(wait_for_sleepers, seconds, 1)
    killed = await local.kill_older_generations(3)
    await asyncio.sleep(0.2)
    return {"status": result.status, "killed": killed, "left": len(sleeping(seconds))}


async def by_hand(scenario: str) -> dict[str, object]:
    """A tagged ``sleep`` started by hand: as a group leader ("leader"); as a member of a
    group led by an untagged live shell ("member"); or in this process's group, whose
    pgid lies outside the PID namespace and reads as 0 ("outside")."""
    seconds = marker_seconds()
    env = {**os.environ, "FLEETCRON_GENERATION": "1"}
    if scenario == "member":
        argv = ["/bin/sh", "-c", f"env FLEETCRON_GENERATION=1 sleep {seconds} & wait"]
        env = dict(os.environ)
    else:
        argv = ["sleep", seconds]
    proc = subprocess.Popen(argv, env=env, start_new_session=scenario != "outside")
    await asyncio.to_thread(wait_for_sleepers, seconds, 1)
    killed = await LocalExecutor(allow_root=True).kill_older_generations(9)
    await asyncio.sleep(0.2)
    seen: dict[str, object] = {
        "killed": killed,
        "returncode": proc.poll(),
        "left": len(sleeping(seconds)),
    }
    proc.kill()
    proc.wait()
    for pid in sleeping(seconds):
        os.kill(pid, 9)
    return seen


async def main(scenario: str) -> None:
    if scenario == "runs":
        seen = await runs()
    elif scenario == "leftover":
        seen = await leftover()
    else:
        seen = await by_hand(scenario)
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
