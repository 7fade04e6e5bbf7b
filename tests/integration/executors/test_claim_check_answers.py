"""The documented check (``fleetcron_claim_live``) on each claim file it may meet, run by a
real ``/bin/sh``; the text in docs/high-availability.md is the one the wrapper's users get."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetcron.executors.watchdog import CLAIM_CHECK

DOC = Path(__file__).resolve().parents[3] / "docs" / "high-availability.md"


def uptime_cs() -> int:
    with open("/proc/uptime") as handle:
        return round(float(handle.read().split()[0]) * 100)


def live(content: str | None, tmp_path: Path, *args: str) -> bool:
    claim = tmp_path / "claim"
    if content is not None:
        claim.write_text(content)
    result = subprocess.run(
        ["/bin/sh", "-c", CLAIM_CHECK + 'fleetcron_claim_live "$@"', "sh", *args],
        env={"PATH": "/usr/bin:/bin", "FLEETCRON_CLAIM_FILE": str(claim)},
        check=False,
    )
    return result.returncode == 0


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        (lambda: f"uptime {uptime_cs() + 3000} 3 3:17\n", (), True),
        (lambda: f"uptime {uptime_cs() + 3000} 3 3:17\n", ("20",), True),
        (lambda: f"uptime {uptime_cs() + 3000} 3 3:17\n", ("40",), False),
        (lambda: f"uptime {uptime_cs() - 1} 3 3:17\n", (), False),
        (lambda: f"epoch {int(time.time()) + 30} - -\n", (), True),
        (lambda: f"epoch {int(time.time()) - 1} - -\n", (), False),
        (lambda: "stopped\n", (), False),
        (lambda: "", (), False),
        (lambda: None, (), False),
    ],
    ids=[
        "ahead",
        "ahead-by-more-than-asked",
        "ahead-by-less-than-asked",
        "passed",
        "wall-clock-ahead",
        "wall-clock-passed",
        "stopped",
        "empty",
        "missing",
    ],
)
def test_the_check_says_live_only_before_the_deadline_of_an_unstopped_claim(
    content: Callable[[], str | None], args: tuple[str, ...], expected: bool, tmp_path: Path
) -> None:
    assert live(content(), tmp_path, *args) is expected


def test_the_documentation_gives_the_check_word_for_word() -> None:
    assert CLAIM_CHECK in DOC.read_text()
