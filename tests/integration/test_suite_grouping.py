"""``make test`` hands each group of tests (tests/conftest.py: those sharing a module- or
package-scoped fixture) to one worker, so that the fixture is set up once: a pytest or
pytest-xdist release that silently drops the groups (pytest 9.2 with pytest-xdist 3.8 did,
pytest-dev/pytest-xdist#1386) spreads them over every worker again, each worker starting
its own servers and browsers. Checked on a module whose tests share a module-scoped sshd."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests/integration/store/test_host_ca.py"
_OPTIONS = ("-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider")
#: The property and API schema plugins, which no test of the module uses.
_UNUSED = ("-p", "no:hypothesispytest", "-p", "no:schemathesis")
_REPORT = re.compile(r"^\[(gw\d+)\] .*PASSED (\S+)\s*$", re.MULTILINE)


def test_tests_sharing_a_module_fixture_run_on_one_worker_as_one_group() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *_OPTIONS, *_UNUSED, MODULE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reports = _REPORT.findall(done.stdout)
    assert len(reports) >= 5, done.stdout[-3000:]
    assert {node_id.rpartition("@")[2] for _, node_id in reports} == {MODULE}, reports
    assert len({worker for worker, _ in reports}) == 1, reports
