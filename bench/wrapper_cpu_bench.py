"""CPU of the per-run wrapper on the executing machine, against a bare ``sh -c true``.

Each design runs ``true`` ``N`` times, one after the other, through ``/bin/sh -c`` in a
session of its own as the local executor starts it; reported is the children's CPU time
(user + sys, ``getrusage(RUSAGE_CHILDREN)``) per run, so the machine's load changes the
figures little. Designs: the bare shell; the plain wrapper (tests' negative controls);
the watchdog wrapper as a standalone run gets it (no claim file: no run id); with the
claim file removed by the executor (a local run as the scheduler's user); with the claim
file removed by the wrapper's ``rm`` (SSH targets, another run-as user).

Run by hand: ``.venv/bin/python bench/wrapper_cpu_bench.py [N] [rounds]
[--before=OTHER/src/fleetcron/executors/watchdog.py]`` (the wrapper of another checkout,
e.g. the one before the claim file, as one more design; without it that row runs ``true``).
"""

from __future__ import annotations

import importlib.util
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from fleetcron.executors.watchdog import plain_script, watchdog_script

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.expanduser("~")}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def per_run(script: Callable[[int], str], n: int) -> float:
    start = children_cpu()
    for i in range(n):
        subprocess.run(
            ["/bin/sh", "-c", script(i)],
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            check=True,
        )
    return (children_cpu() - start) / n


def load(path: str | None) -> Any:
    """The ``watchdog`` module of another checkout (``--before PATH``: its file), which
    imports nothing of fleetcron."""
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("watchdog_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


BASE_ID = 9 * 10**12
"""Run ids of the benchmark's claim files (far above any real run's)."""


def watchdog(run_id: int | None, *, remove: bool) -> str:
    return watchdog_script(
        "true",
        {"FLEETCRON_RUN_ID": str(run_id)},
        term_after_s=60,
        kill_grace_s=5,
        run_id=run_id,
        remove_claim_file=remove,
    )


def unlinked(i: int) -> str:
    """The claim file left for the executor to remove (removed after each design)."""
    return watchdog(BASE_ID + i, remove=False)


def designs(previous: Any) -> dict[str, Callable[[int], str]]:
    def before(i: int) -> str:
        if previous is None:
            return "true"
        script = previous.watchdog_script(
            "true", {"FLEETCRON_RUN_ID": str(BASE_ID + i)}, term_after_s=60, kill_grace_s=5
        )
        return str(script)

    return {
        "bare sh -c true": lambda i: "true",
        "plain wrapper (no watchdog)": lambda i: plain_script("true", {}),
        "watchdog before the claim file (--before)": before,
        "watchdog + claim file, executor unlinks": unlinked,
        "watchdog + claim file, wrapper runs rm": lambda i: watchdog(BASE_ID + i, remove=True),
    }


def remove_left_claim_files() -> None:
    claims = os.path.join(ENV["HOME"], ".fleetcron", "claims")
    for entry in os.listdir(claims):
        if entry.startswith(f"run-{str(BASE_ID)[:4]}"):
            os.unlink(os.path.join(claims, entry))


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--before=")]
    given = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--before=")]
    table = designs(load(given[0] if given else None))
    n = int(args[0]) if args else 300
    rounds = int(args[1]) if len(args) > 1 else 3
    print(f"{'design':<44} " + " ".join(f"{'round ' + str(r + 1):>10}" for r in range(rounds)))
    results: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(rounds):
        for name, script in table.items():
            results[name].append(per_run(script, n))
            if script is unlinked:
                remove_left_claim_files()
    for name, values in results.items():
        print(f"{name:<44} " + " ".join(f"{v * 1000:>7.2f} ms" for v in values))


if __name__ == "__main__":
    main()
