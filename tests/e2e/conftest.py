"""Running the installed `fleetcron` console script on throwaway data dirs.

A cold start of the script costs ~0.85 s, nearly all of it importing (SQLAlchemy, Alembic,
asyncssh, pydantic, rich), and this machine is shared. So most commands run through a
*zygote*: one helper interpreter imports fleetcron once, then forks a fresh child per command,
and the child runs the console-script file itself (with ``runpy``) under the command's argv,
environment and working directory, stdin from /dev/null (or a pipe of what the test gives)
and its own stdout and stderr. Nothing is faked; only the interpreter start-up is shared.
:func:`run_fleetcron` starts the script cold, for the tests of start-up itself.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import IO, Any

import pytest

from fixtures.postgres import PostgresServer
from waiting import eventually

FLEETCRON = str(Path(sys.executable).with_name("fleetcron"))
ADMIN_PASSWORD = "admin-password-1"
USER_PASSWORD = "user-password-1"

Result = subprocess.CompletedProcess[str]

_ZYGOTE = r"""
import json, os, runpy, sys, traceback

import click

from fleetcron.cli.main import COMMANDS, cli

# The expensive part, done once: the CLI imports a subcommand's modules (SQLAlchemy, Alembic,
# asyncssh, pydantic, rich) only when it is used, so load every one here, before the forks.
for name in COMMANDS:
    cli.get_command(click.Context(cli), name)
# ... and the SSH client, which `fleetcron.executors` loads only when a command reaches a
# target. Then the loaded objects are moved out of the collector's sight, so a child's
# collections do not copy the pages they sit on (about a tenth of a short command's CPU).
import gc
import fleetcron.executors.ssh, fleetcron.executors.ssh_connect  # noqa: E401
# The ORM's mappers are configured on a command's first query (a fifth of a short
# command's CPU): once here, as any long-lived process configures them once.
import fleetcron.store.schema
from sqlalchemy.orm import configure_mappers
configure_mappers()
# Passwords are hashed with argon2id at its smallest cost, as in the web and browser tests:
# at the product's (64 MiB, 3 passes, 0.23 CPU-s a hash or a check) the commands that make
# or check a password (init, user add, passwd) spent a quarter of these tests' CPU. A
# command started cold (`run_fleetcron`, the terminal tests of init, the wheel's) hashes at
# the product's cost, and test_cli_init checks that cost.
from argon2 import PasswordHasher
from fleetcron.services.accounts import users
users._hasher = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
gc.freeze()


def run(request):
    if request["umask"] is not None:
        os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["stdin"] is None:
        stdin = os.open(os.devnull, os.O_RDONLY)
    else:  # a pipe, as `subprocess.run(input=...)` gives (small: it fits the pipe's buffer)
        stdin, writer = os.pipe()
        os.write(writer, request["stdin"].encode())
        os.close(writer)
    os.dup2(stdin, 0)
    os.close(stdin)
    for fd, path, flags in (
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = [request["script"], *request["args"]]
    code = 0
    try:
        runpy.run_path(request["script"], run_name="__main__")
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        os._exit(run(json.loads(line)))
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


def environment(workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The calling environment without any FLEETCRON_* setting, plus the data dir at
    ``workdir/data`` and passwords, so that nothing prompts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETCRON_")}
    env.update(
        FLEETCRON_DATA_DIR=str(workdir / "data"),
        FLEETCRON_ADMIN_PASSWORD=ADMIN_PASSWORD,
        FLEETCRON_PASSWORD=USER_PASSWORD,
        # The tests run their commands on local targets (off by default in a real install).
        FLEETCRON_ALLOW_LOCAL_TARGETS="true",
        FLEETCRON_LOCAL_ALLOW_ROOT="true",
        FLEETCRON_LOCAL_JOB_ROLE="operator",
        COLUMNS="200",  # rich fits tables to this width when stdout is not a terminal
    )
    env.update(extra or {})
    return env


def run_fleetcron(*args: str, workdir: Path, env: Mapping[str, str] | None = None) -> Result:
    """Start ``fleetcron ARGS`` cold, in ``workdir``, with its data dir at ``workdir/data``."""
    return subprocess.run(
        [FLEETCRON, *args],
        cwd=workdir,
        env=environment(workdir, env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_until_started(process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the ``fleetcron scheduler`` ``process`` says in ``log`` that it started:
    a fixture that only spawned it races the tests' bounds (``--wait`` gives up when no
    scheduler starts the run within 5 s), and on a loaded machine start-up alone can take
    that long."""

    def started() -> bool:
        assert process.poll() is None, log.read_text()
        return "scheduler started" in log.read_text()

    eventually(started, 60, lambda: f"the scheduler to start: {log.read_text()}", interval=0.1)


class Zygote:
    """An interpreter with fleetcron imported that forks one child per command."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._numbers = count()
        self._log = scratch / "zygote.log"
        with self._log.open("w") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _ZYGOTE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=environment(scratch),
                text=True,
            )

    def run(
        self,
        *args: str,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        unset: Collection[str] = (),
        umask: int | None = None,
    ) -> Result:
        """Like :func:`run_fleetcron`, in a child forked from the zygote: ``stdin`` is piped
        to it (else it reads /dev/null), the variables named in ``unset`` are taken out
        of its environment, and ``umask`` (else the zygote's, which is pytest's) is its
        umask."""
        number = next(self._numbers)
        stdout, stderr = self._scratch / f"{number}.out", self._scratch / f"{number}.err"
        environ = environment(workdir, env)
        for name in unset:
            environ.pop(name, None)
        request = {
            "script": FLEETCRON,
            "args": list(args),
            "cwd": str(workdir),
            "env": environ,
            "stdin": stdin,
            "umask": umask,
            "stdout": str(stdout),
            "stderr": str(stderr),
        }
        to_zygote, from_zygote = self._pipes()
        to_zygote.write(json.dumps(request) + "\n")
        to_zygote.flush()
        reply = from_zygote.readline()
        if not reply:
            raise RuntimeError(f"the zygote stopped:\n{self._log.read_text()}")
        return subprocess.CompletedProcess(
            [FLEETCRON, *args], int(reply), stdout.read_text(), stderr.read_text()
        )

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self._process.stdin is not None and self._process.stdout is not None
        return self._process.stdin, self._process.stdout

    def close(self) -> None:
        """End the zygote (its stdin closed) and close our end of its stdout."""
        to_zygote, from_zygote = self._pipes()
        to_zygote.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise
        finally:
            from_zygote.close()


@pytest.fixture(scope="session")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    the_zygote = Zygote(tmp_path_factory.mktemp("zygote"))
    yield the_zygote
    the_zygote.close()


@dataclass
class Fleet:
    """A working directory (data dir ``data/``) and the commands run in it."""

    workdir: Path
    zygote: Zygote
    #: the last result of each command line run, by command line
    results: dict[str, Result] = field(default_factory=dict, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def run(self, command: str, **env: str) -> Result:
        """Run one command line (shell-quoted, without ``fleetcron``); keep its result."""
        result = self.zygote.run(*shlex.split(command), workdir=self.workdir, env=env)
        self.results[command] = result
        return result

    def ok(self, command: str, **env: str) -> str:
        """Run a command that must succeed; its stdout."""
        return succeeded(self.run(command, **env))

    def json(self, command: str, **env: str) -> Any:
        """Run a command that must succeed and print JSON; the parsed JSON."""
        return json.loads(self.ok(command, **env))

    def ran(self, command: str) -> Result:
        """The result of a command line run earlier."""
        return self.results[command]


class FleetTemplates:
    """Fleets set up once per worker by their commands, then copied for each test that
    asks: its data dir, and on PostgreSQL its database (``CREATE DATABASE ... TEMPLATE``).
    For tests that each need the same fleet, to change it or to read it: ``init`` alone
    migrates a fresh database and hashes the admin's password at the product's cost (0.6
    CPU-s on SQLite, more than a second on PostgreSQL with the server's share), and the
    commands after it cost a fork of the zygote each."""

    def __init__(self, root: Path, zygote: Zygote) -> None:
        self._root = root
        self._zygote = zygote
        #: (name, backend) -> the template fleet and, on PostgreSQL, its database
        self._made: dict[tuple[str, str], tuple[Fleet, str | None]] = {}

    def copy(
        self,
        name: str,
        commands: Sequence[str],
        workdir: Path,
        server: PostgresServer | None = None,
    ) -> tuple[Fleet, dict[str, str]]:
        """A fleet in ``workdir`` as ``commands`` (run with :meth:`Fleet.ok`) leave it, on
        SQLite or on ``server``; with the environment its commands need (the database)."""
        backend = "sqlite" if server is None else "postgres"
        if (name, backend) not in self._made:
            self._made[name, backend] = self._make(name, commands, server)
        template, database = self._made[name, backend]
        shutil.copytree(template.data_dir, workdir / "data")
        env: dict[str, str] = {}
        if server is not None and database is not None:
            copied = f"{name}_{uuid.uuid4().hex[:12]}"
            env["FLEETCRON_DATABASE_URL"] = server.create_database(copied, template=database)
        # The copy's history: what each command of the setup printed.
        return Fleet(workdir, self._zygote, dict(template.results)), env

    def _make(
        self, name: str, commands: Sequence[str], server: PostgresServer | None
    ) -> tuple[Fleet, str | None]:
        workdir = self._root / f"{name}-{'sqlite' if server is None else 'postgres'}"
        workdir.mkdir()
        env: dict[str, str] = {}
        database = None
        if server is not None:
            database = f"{name}_template"
            env["FLEETCRON_DATABASE_URL"] = server.create_database(database)
        fleet = Fleet(workdir, self._zygote)
        for command in commands:
            fleet.ok(command, **env)
        if server is not None and database is not None:
            server.disconnect(database)  # a template may have no session open
        return fleet, database


@pytest.fixture(scope="session")
def fleet_templates(tmp_path_factory: pytest.TempPathFactory, zygote: Zygote) -> FleetTemplates:
    return FleetTemplates(tmp_path_factory.mktemp("fleet-templates"), zygote)


def describe(result: Result) -> str:
    return (
        f"`fleetcron {shlex.join(result.args[1:])}` exited {result.returncode}\n"
        f"stdout: {result.stdout}\nstderr: {result.stderr}"
    )


def succeeded(result: Result) -> str:
    """The stdout of a command that must have succeeded."""
    assert result.returncode == 0, describe(result)
    assert "Traceback" not in result.stderr, describe(result)
    return result.stdout


def assert_refused(result: Result, *fragments: str, exit_code: int = 2) -> None:
    """The command failed with ``exit_code`` and one ``error: ...`` message on stderr that
    contains every fragment; nothing on stdout and no traceback."""
    assert result.returncode == exit_code, describe(result)
    assert result.stderr.startswith("error: "), describe(result)
    for fragment in fragments:
        assert fragment in result.stderr, describe(result)
    assert result.stdout == "", describe(result)
    assert "Traceback" not in result.stderr, describe(result)
