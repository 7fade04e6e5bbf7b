"""Passwords reach the CLI from a file, stdin or a prompt, never only from the command line;
and the local root can restore an admin when none can log in."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from argon2 import PasswordHasher

from e2e.conftest import FLEETCRON, Zygote, environment

HASHER = PasswordHasher()


def fleetcron(
    zygote: Zygote, workdir: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``fleetcron ARGS`` in ``workdir``, forked from the zygote, with ``stdin`` piped to it;
    a variable given as ``""`` is taken out of its environment."""
    unset = [name for name, value in env.items() if value == ""]
    given = {name: value for name, value in env.items() if value != ""}
    return zygote.run(*args, workdir=workdir, env=given, stdin=stdin, unset=unset)


def stored_hash(workdir: Path, name: str) -> str:
    import sqlite3

    with sqlite3.connect(workdir / "data" / "fleetcron.db") as db:
        row = db.execute("SELECT password_hash FROM users WHERE name = ?", (name,)).fetchone()
    assert row is not None, f"no user {name}"
    return str(row[0])


def role_of(workdir: Path, name: str) -> str | None:
    import sqlite3

    with sqlite3.connect(workdir / "data" / "fleetcron.db") as db:
        row = db.execute("SELECT role FROM users WHERE name = ?", (name,)).fetchone()
    return None if row is None else str(row[0])


def initialized(zygote: Zygote, tmp_path: Path) -> Path:
    secret = tmp_path / "admin.pw"
    secret.write_text("from-a-file-123\n")
    result = fleetcron(zygote, tmp_path, "init", "--admin-password-file", str(secret))
    assert result.returncode == 0, result.stderr
    assert HASHER.verify(stored_hash(tmp_path, "admin"), "from-a-file-123")
    return tmp_path


def test_init_and_user_add_read_the_password_from_a_file_or_stdin(
    tmp_path: Path, zygote: Zygote
) -> None:
    initialized(zygote, tmp_path)
    from_stdin = fleetcron(
        zygote, tmp_path, "user", "add", "sam", "--password-file", "-", stdin="typed-on-stdin-1\n"
    )
    secret = tmp_path / "pw"
    secret.write_text("in-a-file-4567\nsecond line ignored\n")
    from_file = fleetcron(zygote, tmp_path, "user", "passwd", "sam", "--password-file", str(secret))

    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_file.returncode == 0, from_file.stderr
    assert HASHER.verify(stored_hash(tmp_path, "sam"), "in-a-file-4567")


def test_without_any_password_source_the_cli_says_how_to_give_one(
    tmp_path: Path, zygote: Zygote
) -> None:
    initialized(zygote, tmp_path)
    result = fleetcron(zygote, tmp_path, "user", "add", "sam", FLEETCRON_PASSWORD="")
    missing = fleetcron(
        zygote, tmp_path, "user", "add", "sam", "--password-file", str(tmp_path / "no")
    )

    assert result.returncode == 2
    assert "--password-file" in result.stderr and "Traceback" not in result.stderr
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    assert role_of(tmp_path, "sam") is None


def test_in_a_terminal_the_cli_asks_twice(tmp_path: Path, zygote: Zygote) -> None:
    initialized(zygote, tmp_path)
    environ = environment(tmp_path)
    environ.pop("FLEETCRON_PASSWORD")
    pid, fd = pty.fork()
    if pid == 0:  # the child: fleetcron on the terminal
        os.chdir(tmp_path)
        os.execve(FLEETCRON, [FLEETCRON, "user", "add", "tia"], environ)
    transcript = b""
    answered = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        transcript += chunk
        if transcript.count(b":") > answered and answered < 2:
            os.write(fd, b"prompted-pass-1\n")
            answered += 1
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0, transcript
    assert b"Password" in transcript and b"prompted-pass-1" not in transcript
    assert HASHER.verify(stored_hash(tmp_path, "tia"), "prompted-pass-1")


def test_the_local_root_restores_an_admin_when_none_is_left(tmp_path: Path, zygote: Zygote) -> None:
    import sqlite3

    initialized(zygote, tmp_path)
    with sqlite3.connect(tmp_path / "data" / "fleetcron.db") as db:
        db.execute("UPDATE users SET role = 'viewer'")  # what the race used to leave
    before = fleetcron(zygote, tmp_path, "user", "role", "admin", "admin")
    restored = fleetcron(zygote, tmp_path, "user", "recover-admin", "admin")
    created = fleetcron(
        zygote,
        tmp_path,
        "user",
        "recover-admin",
        "rescue",
        "--password-file",
        "-",
        stdin="rescue-pw-12\n",
    )
    audit = fleetcron(zygote, tmp_path, "audit", "list", "--json", "--action", "user.recover-admin")

    assert before.returncode != 0  # no admin to act as
    assert restored.returncode == 0, restored.stderr
    assert created.returncode == 0, created.stderr
    assert (role_of(tmp_path, "admin"), role_of(tmp_path, "rescue")) == ("admin", "admin")
    assert '"actor": "local-root"' in audit.stdout
