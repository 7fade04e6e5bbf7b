"""Run one request through an executor in a process of its own, so a test can SIGKILL or
SIGSTOP "the scheduler" while the command runs.

Usage: python exec_child.py SPEC_JSON. The spec holds ``mode`` (local|ssh), ``command``,
``timeout_s``, ``watchdog_s``, ``watchdog`` (false: the test-only switch that turns the
watchdog off), and for ssh ``host``, ``port``, ``user``, ``key_file``, ``host_key``.
Prints the result as JSON when the run ends.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from fleetcron.executors import ExecRequest, LocalExecutor, SshExecutor, SshTarget


async def main(spec: dict[str, Any]) -> None:
    request = ExecRequest(
        spec["command"],
        timeout_s=spec["timeout_s"],
        watchdog_s=spec["watchdog_s"],
        run_id=spec.get("run_id"),
        generation=spec.get("generation"),
    )
    if spec["mode"] == "local":
        local = LocalExecutor(kill_grace_s=1.0, allow_root=True, watchdog=spec["watchdog"])
        result = await local.run(request)
    else:
        target = SshTarget(
            "child",
            spec["host"],
            spec["port"],
            spec["user"],
            Path(spec["key_file"]).read_text(),
            spec["host_key"],
        )
        ssh = SshExecutor(kill_grace_s=1.0, watchdog=spec["watchdog"])
        result = await ssh.run(target, request)
        await ssh.close()
    print(json.dumps({"status": result.status, "error": result.error}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
