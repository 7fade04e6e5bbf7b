"""The live buffer keeps memory bounded under any output rate: 200 MB on stdout and 200 MB
on stderr through ``yes``, followed by a reader every 10 ms, grow the process by less than
8 MiB, locally and over SSH; the same with a buffer that keeps everything (the negative
control) grows it by about what was printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.sshd import SshServer

PROBE = Path(__file__).with_name("live_memory_probe.py")
SIZE = 200_000_000


def probe(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(PROBE), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ).stdout
    report: dict[str, Any] = json.loads(out)
    return report


def test_a_followed_local_run_of_400_mb_of_output_stays_bounded_in_memory() -> None:
    report = probe("local", str(SIZE), "bounded")

    assert report["status"] == "succeeded"
    assert (report["stdout_total"], report["stderr_total"]) == (SIZE, SIZE)
    assert report["live_total"] == 2 * SIZE
    assert "to stderr" in report["live_tail"]  # the end of the stream, in the tail
    assert report["follower_reads"] > 0
    assert report["rss_growth_kib"] < 8 * 1024


def test_the_measurement_sees_a_buffer_that_keeps_everything() -> None:
    """Negative control (smaller, as it really holds everything)."""
    report = probe("local", str(25_000_000), "unbounded")

    assert report["live_total"] == 50_000_000
    assert report["rss_growth_kib"] > 40 * 1024


@pytest.mark.sshd
def test_a_followed_ssh_run_of_400_mb_of_output_stays_bounded_in_memory(
    sshd: SshServer,
) -> None:
    report = probe(
        "ssh", str(SIZE), "bounded", sshd.host, str(sshd.port), sshd.user,
        str(sshd.client_key_path), sshd.host_key_line,
    )  # fmt: skip

    assert report["status"] == "succeeded"
    assert report["live_total"] == 2 * SIZE
    assert report["rss_growth_kib"] < 8 * 1024
