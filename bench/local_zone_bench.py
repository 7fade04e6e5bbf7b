"""CPU of adding local targets: the scheduler host's zone detected for each one, or once.

Adds ``--targets`` local targets (default 200) to a fresh SQLite database with
``add_target``, as ``target add --kind local`` does, twice: with the host's zone detected
for every target (``sh -c DETECT_COMMAND``: a shell, ``timedatectl``, ``head``; what each
local target cost before), and with the detection kept while the zone files are unchanged
(one run for the whole batch). Beside them, what a script would do instead: the detection
command alone, once per target.

CPU is user + sys of this process and of the commands it waited for (``getrusage`` SELF
and CHILDREN), not wall time: the machine is shared.

Run by hand: ``.venv/bin/python bench/local_zone_bench.py [--targets 200]``.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def cpu_s() -> float:
    """User + sys CPU seconds of this process and of the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def add_locals(count: int, prefix: str, work: Path) -> float:
    """CPU seconds per local target of adding ``count`` of them to a fresh database."""
    from fixtures.app import make_settings, seed
    from fleetcron.app import Actor, App
    from fleetcron.core.targets import TargetKind, TargetSpec
    from fleetcron.services.targets import edit as targets

    work.mkdir()
    url = f"sqlite:///{work / 'fleetcron.db'}"
    seed(url, work)
    app = App.open(make_settings(work / "data", url))
    admin = Actor("admin", "admin")
    try:
        start = cpu_s()
        for n in range(count):
            targets.add_target(app, admin, TargetSpec(f"{prefix}{n:04d}", TargetKind.LOCAL))
        return (cpu_s() - start) / count
    finally:
        app.close()


def detection_alone(count: int) -> float:
    """CPU seconds per run of the detection command by itself."""
    from fleetcron.core.target_zones import DETECT_COMMAND

    start = cpu_s()
    for _ in range(count):
        subprocess.run(["sh", "-c", DETECT_COMMAND], capture_output=True, check=False)
    return (cpu_s() - start) / count


def main() -> None:
    import tempfile

    from fleetcron.services.targets import pairing

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=200)
    count = parser.parse_args().targets
    work = Path(tempfile.mkdtemp(prefix="fleetcron-zone-bench-"))
    kept: Callable[[], tuple[str | None, str]] = pairing.local_zone

    def every_time() -> tuple[str | None, str]:
        pairing._last_local_zone = None
        return kept()

    add_locals(5, "warm", work / "warm")  # imports, statement caches
    pairing.local_zone = every_time
    each = add_locals(count, "each", work / "each")
    pairing.local_zone = kept
    pairing._last_local_zone = None
    once = add_locals(count, "once", work / "once")
    alone = detection_alone(count)
    print(f"{count} local targets, CPU ms per target (user+sys, with children)")
    print("| way | CPU ms per target |\n|---|---:|")
    print(f"| detected for each target (before) | {each * 1000:.1f} |")
    print(f"| detected once, kept while the zone files are unchanged | {once * 1000:.1f} |")
    print(f"| the detection command alone, per run | {alone * 1000:.1f} |")


if __name__ == "__main__":
    main()
