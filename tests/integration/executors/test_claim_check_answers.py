"""The documented check (``fleetcron_claim_live``) on each claim file it may meet, run by a
real ``/bin/sh``; the text in docs/high-availability.md is the one the wrapper's users get."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fleetcron.executors.watchdog import CLAIM_CHECK, CLAIM_DIRECTORY, MARK_SCRIPT, REVOKE_SCRIPT

DOC = Path(__file__).resolve().parents[3] / "docs" / "high-availability.md"


def uptime_cs() -> int:
    with open("/proc/uptime") as handle:
        return round(float(handle.read().split()[0]) * 100)


def live(content: str | None, tmp_path: Path, *args: str) -> bool:
    claim = tmp_path / "claim"
    if content is not None:
        claim.write_text(content)
    return asks(claim, *args)


def asks(claim: Path, *args: str) -> bool:
    """``fleetcron_claim_live ARGS`` with ``FLEETCRON_CLAIM_FILE=claim``: succeeded?"""
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


def test_cleanup_revokes_only_its_installations_older_claims(tmp_path: Path) -> None:
    """The cleanup of generation 2 of installation ``abc`` removes the claim files of
    ``abc``'s older runs, and leaves the current generation's, another installation's, a
    standalone run's, a file of the format without a scope and a symlink."""
    claims = tmp_path / CLAIM_DIRECTORY
    claims.mkdir(parents=True)
    ahead = uptime_cs() + 3000
    files = {
        "run-1": f"uptime {ahead} 1 1:5 abc",
        "pid-77": f"epoch {int(time.time()) + 30} 1 1:6 abc",
        "run-2": f"uptime {ahead} 2 2:7 abc",
        "run-3": f"uptime {ahead} 1 1:8 other",
        "run-4": f"uptime {ahead} - - -",
        "run-5": f"uptime {ahead} 1 1:9",
    }
    for name, line in files.items():
        (claims / name).write_text(line + "\n")
    (claims / "run-6").symlink_to(claims / "run-1")
    assert all(asks(claims / name) for name in files)
    out = subprocess.run(
        ["/bin/sh", "-c", MARK_SCRIPT + REVOKE_SCRIPT, "sh", "2", "abc"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["mark=2", "revoked=2"]
    assert sorted(p.name for p in claims.iterdir()) == ["run-2", "run-3", "run-4", "run-5", "run-6"]
    # The check now answers "not live" for the removed ones, "live" for the others.
    assert not asks(claims / "run-1") and not asks(claims / "pid-77")
    assert all(asks(claims / name) for name in ("run-2", "run-3", "run-4", "run-5"))
