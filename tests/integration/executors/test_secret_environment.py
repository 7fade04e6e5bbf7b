"""The scheduler's secrets are not in its environment once loaded.

``/proc/<pid>/environ`` shows the environment a process was started with, whatever it
later removes from ``os.environ``; a local command running as the scheduler's user could
read it. ``fleetcron scheduler`` started with ``FLEETCRON_MASTER_KEY`` (and a database URL)
in its environment re-executes itself without them and still uses them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fleetcron.crypto import generate_key
from waiting import eventually


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def start_scheduler(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``fleetcron scheduler`` with its log (stderr) written to ``log``."""
    with log.open("wb") as out:  # the child has its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "fleetcron", "scheduler"], env=env, stderr=out
        )


def started_or_exited(proc: subprocess.Popen[bytes], log: Path) -> str:
    """The scheduler's log once it says it started, or once it has exited."""
    eventually(
        lambda: proc.poll() is not None or "scheduler started" in log.read_text(),
        60,
        lambda: f"the scheduler to start or exit: {log.read_text()}",
        interval=0.1,
    )
    return log.read_text()


def test_the_scheduler_keeps_the_master_key_out_of_its_environment(tmp_path: Path) -> None:
    key = generate_key().decode()
    data_dir = tmp_path / "data"
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEETCRON_")},
        "FLEETCRON_DATA_DIR": str(data_dir),
        "FLEETCRON_MASTER_KEY": key,
        "FLEETCRON_DATABASE_URL": url,
        "FLEETCRON_TICK_S": "0.2",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    proc = start_scheduler(env, tmp_path / "scheduler.log")
    try:
        log = started_or_exited(proc, tmp_path / "scheduler.log")
        assert "scheduler started" in log, log
        environ = environ_of(proc.pid)  # the same pid: exec keeps it
        assert b"FLEETCRON_SECRETS_FD=" in environ  # it did re-execute
        assert key.encode() not in environ
        assert b"FLEETCRON_MASTER_KEY" not in environ
        assert url.encode() not in environ
        # It used the key from the pipe: no key file was created in its place, and the
        # database from the URL is the one it opened.
        assert not (data_dir / "master.key").exists()
        assert (tmp_path / "db.sqlite").exists()
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_process_started_with_the_key_shows_it_in_proc_environ() -> None:
    """Negative control: the check above reads the right place and would see the key."""
    key = generate_key().decode()
    proc = subprocess.Popen(["sleep", "30"], env={"FLEETCRON_MASTER_KEY": key})
    try:
        eventually(
            lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes() == b"sleep\x0030\x00",
            10,
            "sleep to be exec'd",
            interval=0.01,
        )
        assert f"FLEETCRON_MASTER_KEY={key}".encode() in environ_of(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_the_scheduler_keeps_the_replication_peer_dsn_out_of_its_environment(
    tmp_path: Path,
) -> None:
    """The peer's connection string (with its password) is a secret setting too."""
    dsn = "host=10.0.0.6 user=repl password=PEER-DSN-SECRET dbname=fleetcron"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEETCRON_")},
        "FLEETCRON_DATA_DIR": str(tmp_path / "data"),
        "FLEETCRON_REPLICATION_PEER_DSN": dsn,
        "FLEETCRON_TICK_S": "0.2",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    proc = start_scheduler(env, tmp_path / "scheduler.log")
    try:
        log = started_or_exited(proc, tmp_path / "scheduler.log")
        assert "scheduler started" in log, log
        environ = environ_of(proc.pid)
        assert b"FLEETCRON_SECRETS_FD=" in environ
        assert b"PEER-DSN-SECRET" not in environ
        assert b"FLEETCRON_REPLICATION_PEER_DSN" not in environ
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_process_started_with_the_peer_dsn_shows_it_in_proc_environ() -> None:
    """Negative control for the test above: without the re-exec the DSN is readable there."""
    proc = subprocess.Popen(
        ["sleep", "30"], env={"FLEETCRON_REPLICATION_PEER_DSN": "password=PEER-DSN-SECRET"}
    )
    try:
        eventually(
            lambda: Path(f"/proc/{proc.pid}/cmdline").read_bytes() == b"sleep\x0030\x00",
            10,
            "sleep to be exec'd",
            interval=0.01,
        )
        assert b"PEER-DSN-SECRET" in environ_of(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def _scheduler_with_credentials(tmp_path: Path, *, with_key: bool) -> tuple[int | None, str]:
    """Start ``fleetcron scheduler`` as the units in deploy/ do: the master key in a
    read-only credentials directory (systemd's ``LoadCredential=``, ``%d``), named by
    ``FLEETCRON_MASTER_KEY_FILE``. Without the key, the credentials "directory" is a file,
    so that no key can be made in its place (this runs as root, whom modes do not stop).
    Its exit code (None while it runs) and its log."""
    credentials = tmp_path / "credentials"
    if with_key:
        credentials.mkdir()
        (credentials / "master.key").write_bytes(KEY + b"\n")
        (credentials / "master.key").chmod(0o400)
        credentials.chmod(0o500)
    else:
        credentials.write_text("")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FLEETCRON_")},
        "CREDENTIALS_DIRECTORY": str(credentials),
        "FLEETCRON_DATA_DIR": str(tmp_path / "data"),
        "FLEETCRON_MASTER_KEY_FILE": f"{credentials}/master.key",
        "FLEETCRON_TICK_S": "0.2",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    proc = start_scheduler(env, tmp_path / "scheduler.log")
    try:
        log = started_or_exited(proc, tmp_path / "scheduler.log")
        return proc.poll(), log
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if credentials.is_dir():
            credentials.chmod(0o700)


KEY = generate_key()


def test_the_scheduler_reads_its_master_key_from_a_credentials_directory(
    tmp_path: Path,
) -> None:
    code, log = _scheduler_with_credentials(tmp_path, with_key=True)
    assert code is None and "scheduler started" in log, log
    assert (tmp_path / "credentials" / "master.key").read_bytes() == KEY + b"\n"
    assert not (tmp_path / "data" / "master.key").exists()


def test_without_the_credential_the_scheduler_stops_naming_the_key_file(
    tmp_path: Path,
) -> None:
    """Negative control: the start of the test above needs the credential."""
    code, log = _scheduler_with_credentials(tmp_path, with_key=False)
    assert code not in (None, 0) and "scheduler started" not in log, log
    assert "master key" in log and "credentials/master.key" in log, log
