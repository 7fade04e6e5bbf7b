"""What a command pays to ask whether its claim is still live, on the target.

Measures CPU time (user + sys of the shells, from ``getrusage(RUSAGE_CHILDREN)``) and wall
time, on this machine, for:

* ``fleetcron_claim_live`` (:data:`~fleetcron.executors.watchdog.CLAIM_CHECK`) called
  ``N`` times inside one ``/bin/sh``, the way a command asks between two of its effects;
* the same check in a fresh ``/bin/sh -c`` each time (a command written in another
  language shelling out for it);
* the naive alternative, ``[ "$(date +%s)" -lt "$deadline" ]``, in one shell (a process
  per check).

Run by hand: ``.venv/bin/python bench/claim_check_bench.py [N]``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleetcron.executors.watchdog import CLAIM_CHECK


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], env: dict[str, str], repeat: int = 1) -> tuple[float, float]:
    cpu0, wall0 = children_cpu(), time.perf_counter()
    for _ in range(repeat):
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return children_cpu() - cpu0, time.perf_counter() - wall0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    with tempfile.TemporaryDirectory() as tmp:
        claim = Path(tmp) / "claim"
        with open("/proc/uptime") as handle:
            up = float(handle.read().split()[0])
        claim.write_text(f"uptime {int(up * 100) + 3600 * 100} 3 3:17 abc123\n")
        env = {**os.environ, "FLEETCRON_CLAIM_FILE": str(claim)}
        loop = f"i=0; while [ $i -lt {n} ]; do i=$((i + 1)); {{check}} || exit 1; done"
        inside = loop.replace("{check}", "fleetcron_claim_live")
        naive = loop.replace("{check}", f'[ "$(date +%s)" -lt {int(time.time()) + 3600} ]')
        empty = loop.replace("{check}", ":")
        base_cpu, base_wall = measure(["/bin/sh", "-c", CLAIM_CHECK + empty], env)
        cases = {
            "fleetcron_claim_live, in the command's shell": (CLAIM_CHECK + inside, n, 1),
            "naive date +%s check, in the command's shell": (naive, n, 1),
            "fleetcron_claim_live in a fresh sh -c": (
                CLAIM_CHECK + "fleetcron_claim_live",
                1,
                n // 10,
            ),
        }
        print(f"{'check':<48} {'CPU/check':>12} {'wall/check':>12}")
        for name, (script, per_run, repeat) in cases.items():
            cpu, wall = measure(["/bin/sh", "-c", script], env, repeat)
            if per_run > 1:  # take off the loop itself
                cpu, wall = cpu - base_cpu, wall - base_wall
            checks = per_run * repeat
            print(f"{name:<48} {cpu / checks * 1e6:>9.1f} µs {wall / checks * 1e6:>9.1f} µs")


if __name__ == "__main__":
    main()
