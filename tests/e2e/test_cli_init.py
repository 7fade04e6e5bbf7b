"""`fleetcron init`: the first admin's password from a terminal prompt, stdin or a file,
never needed on the command line; all or nothing; safe to run again.

Each test looks at what is left in the data dir (:func:`leftovers`); the controls show the
look finds files when they are there."""

from __future__ import annotations

import hashlib
import os
import pty
import select
import time
from pathlib import Path

import pytest
from argon2 import PasswordHasher

from e2e.conftest import FLEETCRON, Zygote, environment
from e2e.test_cli_passwords import fleetcron, stored_hash
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.services import setup

HASHER = PasswordHasher()
NO_ENV_PASSWORD = {"FLEETCRON_ADMIN_PASSWORD": ""}


def leftovers(workdir: Path) -> list[str]:
    """Every file and directory under the data dir (none when it does not exist)."""
    data = workdir / "data"
    return sorted(str(p.relative_to(workdir)) for p in [data, *data.rglob("*")] if p.exists())


def fingerprint(workdir: Path) -> dict[str, str]:
    data = workdir / "data"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.iterdir()}


def on_a_terminal(workdir: Path, answers: list[bytes], *args: str) -> tuple[int, bytes]:
    """Run ``fleetcron init ARGS`` on a pseudo-terminal, answering each prompt in turn
    (``b"\\x04"``: end of input); the exit code and what the terminal showed."""
    environ = environment(workdir)
    environ.pop("FLEETCRON_ADMIN_PASSWORD")
    pid, fd = pty.fork()
    if pid == 0:  # the child: fleetcron on the terminal
        os.chdir(workdir)
        os.execve(FLEETCRON, [FLEETCRON, "init", *args], environ)
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
        if transcript.count(b": ") > answered and answered < len(answers):
            os.write(fd, answers[answered])
            answered += 1
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), transcript


def test_in_a_terminal_init_asks_for_the_password_twice(tmp_path: Path) -> None:
    code, transcript = on_a_terminal(tmp_path, [b"typed-on-a-tty-1\n", b"typed-on-a-tty-1\n"])

    assert code == 0, transcript
    assert b"Password for the first admin" in transcript
    assert b"typed-on-a-tty-1" not in transcript  # not echoed
    assert b"admin user:  admin (created)" in transcript
    stored = stored_hash(tmp_path, "admin")
    assert HASHER.verify(stored, "typed-on-a-tty-1")
    # Started cold, as a user starts it: hashed at the product's cost (argon2id, 64 MiB, 3
    # passes), not at the smallest cost the zygote's commands use.
    assert stored.startswith("$argon2id$") and not HASHER.check_needs_rehash(stored), stored
    cheapest = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
    assert HASHER.check_needs_rehash(cheapest.hash("x"))  # the check can fail


def test_in_a_terminal_an_abandoned_prompt_fails_and_leaves_nothing(tmp_path: Path) -> None:
    """Once "Aborted." with exit 0 after creating the database and the master key."""
    code, transcript = on_a_terminal(tmp_path, [b"\x04"])

    assert code == 1, transcript
    assert b"Aborted." in transcript
    assert leftovers(tmp_path) == []


def test_a_piped_password_is_read_with_password_stdin(tmp_path: Path, zygote: Zygote) -> None:
    result = fleetcron(zygote, tmp_path, "init", "--password-stdin", stdin="piped-password-1\n",
                       **NO_ENV_PASSWORD)  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "command line" not in result.stderr
    assert HASHER.verify(stored_hash(tmp_path, "admin"), "piped-password-1")


def test_a_piped_password_without_password_stdin_is_refused_before_anything_is_made(
    tmp_path: Path, zygote: Zygote
) -> None:
    """Once exit 2 after creating the database and the master key."""
    result = fleetcron(zygote, tmp_path, "init", stdin="piped-password-1\n", **NO_ENV_PASSWORD)

    assert result.returncode == 2, result.stderr
    assert "--password-stdin" in result.stderr and "Traceback" not in result.stderr
    assert leftovers(tmp_path) == []


def test_the_password_comes_from_a_file_and_a_bad_file_makes_nothing(
    tmp_path: Path, zygote: Zygote
) -> None:
    empty, short = tmp_path / "empty.pw", tmp_path / "short.pw"
    empty.write_text("\n")
    short.write_text("short\n")
    refused = [
        fleetcron(zygote, tmp_path, "init", "--admin-password-file", str(path), **NO_ENV_PASSWORD)
        for path in (empty, short, tmp_path / "absent.pw")
    ]
    assert [r.returncode for r in refused] == [2, 2, 2], [r.stderr for r in refused]
    assert leftovers(tmp_path) == []

    good = tmp_path / "admin.pw"
    good.write_text("from-a-file-123\n")
    result = fleetcron(
        zygote, tmp_path, "init", "--admin-password-file", str(good), **NO_ENV_PASSWORD
    )
    assert result.returncode == 0, result.stderr
    assert HASHER.verify(stored_hash(tmp_path, "admin"), "from-a-file-123")
    # Negative control: the same look finds what a successful init made.
    assert {"data/fleetcron.db", "data/master.key"} <= set(leftovers(tmp_path))


def test_the_password_on_the_command_line_still_works_with_a_warning(
    tmp_path: Path, zygote: Zygote
) -> None:
    result = fleetcron(
        zygote, tmp_path, "init", "--admin-password", "on-the-line-12", **NO_ENV_PASSWORD
    )
    helped = fleetcron(zygote, tmp_path, "init", "--help")

    assert result.returncode == 0, result.stderr
    assert "--admin-password puts a secret on the command line" in result.stderr
    assert "--admin-password-file FILE" in result.stderr
    assert HASHER.verify(stored_hash(tmp_path, "admin"), "on-the-line-12")
    assert "--password-stdin" in helped.stdout
    assert "--admin-password " not in helped.stdout  # hidden: not advertised


def test_init_again_changes_nothing_and_refuses_a_password(tmp_path: Path, zygote: Zygote) -> None:
    first = fleetcron(zygote, tmp_path, "init", "--password-stdin", stdin="first-password-1\n")
    assert first.returncode == 0, first.stderr
    before = fingerprint(tmp_path)
    again = fleetcron(zygote, tmp_path, "init")
    given = [
        fleetcron(zygote, tmp_path, "init", "--password-stdin", stdin="second-password-1\n"),
        fleetcron(zygote, tmp_path, "init", "--admin-password", "second-password-1"),
    ]

    assert again.returncode == 0, again.stderr
    assert "nothing changed" in again.stdout and "created" not in again.stdout
    for refused in given:
        assert refused.returncode == 2, refused.stderr
        assert "fleetcron user passwd" in refused.stderr
    assert fingerprint(tmp_path) == before
    assert HASHER.verify(stored_hash(tmp_path, "admin"), "first-password-1")


def test_a_failure_while_creating_the_master_key_leaves_nothing(
    tmp_path: Path, zygote: Zygote
) -> None:
    (tmp_path / "a-file").write_text("")
    key_file = str(tmp_path / "a-file" / "master.key")
    result = fleetcron(
        zygote,
        tmp_path,
        "init",
        "--password-stdin",
        stdin="some-password-1\n",
        FLEETCRON_MASTER_KEY_FILE=key_file,
    )

    assert result.returncode == 1, result.stderr
    assert "cannot create the master key" in result.stderr and "Traceback" not in result.stderr
    assert leftovers(tmp_path) == []


def test_a_failure_after_the_database_is_made_leaves_nothing(
    tmp_path: Path, zygote: Zygote
) -> None:
    """The admin is refused after the schema and the master key exist: both go again."""
    result = fleetcron(zygote, tmp_path, "init", "--admin", "Not A Name", "--password-stdin",
                       stdin="some-password-1\n")  # fmt: skip

    assert result.returncode == 2, result.stderr
    assert "name: 'Not A Name' is not a valid name" in result.stderr
    assert leftovers(tmp_path) == []
    retried = fleetcron(zygote, tmp_path, "init", "--password-stdin", stdin="some-password-1\n")
    assert retried.returncode == 0, retried.stderr


@pytest.mark.parametrize("undo", [True, False], ids=["undone", "control-not-undone"])
def test_a_failure_injected_mid_init_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, undo: bool
) -> None:
    """In-process: the admin's creation fails (the database down at the last step). The
    control plants an init that does not undo and sees the look find its debris."""
    from fleetcron.errors import StoreError

    def failing_add_user(*_args: object, **_kwargs: object) -> None:
        raise StoreError("database error: injected")

    for name in [n for n in os.environ if n.startswith("FLEETCRON_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("FLEETCRON_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FLEETCRON_ADMIN_PASSWORD", "some-password-1")
    monkeypatch.setattr(setup, "add_user", failing_add_user)
    if not undo:
        monkeypatch.setattr(setup.Made, "undo", lambda self, app: None)

    code = run_cli(cli, ["init"])

    assert code == 1
    if undo:
        assert leftovers(tmp_path) == []
    else:
        assert {"data/fleetcron.db", "data/master.key"} <= set(leftovers(tmp_path))
