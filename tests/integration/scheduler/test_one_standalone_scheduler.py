"""A standalone installation runs one scheduler per SQLite database: a second ``fleetcron
scheduler`` (or ``serve``) on the same database refuses to start, naming the running one's
pid and the database, and starts once the first has ended. Real processes, a real lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcron.config import Settings
from fleetcron.coordination.standalone import database_file, only_scheduler
from fleetcron.crypto import generate_key
from fleetcron.errors import Conflict
from waiting import eventually


def environment(tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEETCRON_")},
        "FLEETCRON_DATA_DIR": str(tmp_path / "data"),
        "FLEETCRON_MASTER_KEY": generate_key().decode(),
        "FLEETCRON_TICK_S": "0.2",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }


def settings_of(env: dict[str, str]) -> Settings:
    return Settings(data_dir=Path(env["FLEETCRON_DATA_DIR"]))


def start_scheduler(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``fleetcron scheduler`` with its log (stderr) in a file: a pipe nobody reads once it
    started would fill up and block it."""
    with log.open("wb") as out:  # the child has its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "fleetcron", "scheduler"], env=env, stderr=out
        )


def wait_started(proc: subprocess.Popen[bytes], log: Path) -> None:
    def started() -> bool:
        assert proc.poll() is None, f"the scheduler exited:\n{log.read_text()}"
        return "scheduler started" in log.read_text()

    eventually(
        started, 60, lambda: f"the scheduler to start:\n{log.read_text()}", interval=0.1
    )


def test_a_second_scheduler_on_the_same_database_refuses_to_start(tmp_path: Path) -> None:
    env = environment(tmp_path)
    log = tmp_path / "first.log"
    first = start_scheduler(env, log)
    try:
        wait_started(first, log)

        second = subprocess.run(
            [sys.executable, "-m", "fleetcron", "scheduler"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2, second.stderr
        database = database_file(settings_of(env))
        assert database is not None
        assert (
            f"another fleetcron scheduler (pid {first.pid}) is running on {database}"
            in second.stderr
        )
        assert "Traceback" not in second.stderr
        assert first.poll() is None  # the first one is untouched
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)

    # Control: once the first has ended (the kernel dropped its lock), one starts again.
    settings = settings_of(env)
    with (
        only_scheduler(settings),
        pytest.raises(Conflict, match=f"pid {os.getpid()}"),
        only_scheduler(settings),
    ):
        pass


def test_a_cluster_node_takes_no_standalone_lock(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        database_url="postgresql+psycopg://fleetcron@127.0.0.1:1/fleetcron",
    )
    assert database_file(settings) is None
    with only_scheduler(settings), only_scheduler(settings):
        pass
