"""fleetcron as users receive it: the sdist and the wheel, installed outside the checkout.

The suite otherwise runs the editable checkout, where every file of ``src/`` is importable
whether or not it is packaged. This test builds the sdist from a copy of the project's
files, builds the wheel from that sdist (as ``python -m build`` does), installs the wheel
into a fresh virtual environment under ``tmp_path`` and runs the README's installed path
from another working directory: ``fleetcron init``, ``fleetcron serve``, the login page and
its stylesheet, a login with the form's fields, a local target and a job added through the
web forms, and a run of ``echo hello`` recorded as succeeded with its output. On
PostgreSQL, ``fleetcron scheduler --workers 2`` starts its second worker with the installed
interpreter, and both register as the node's members.

Builds use the dev venv's setuptools with no build isolation, so nothing is fetched.

Dependencies: the wheel is installed with ``--no-deps``, and a ``.pth`` file in the new
venv appends the dev venv's site-packages to ``sys.path`` for the dependencies (SQLAlchemy,
FastAPI, ...). Installing them from the package registry would take about a minute per run
and need the registry; the ``.pth`` way takes a second. A directory added by a ``.pth``
line is not itself scanned for ``.pth`` files, so the dev venv's editable-install hook
(``__editable__.fleetcron-*.pth``, which puts ``src/`` on the path) is not run: the test
checks that ``fleetcron.__file__`` is inside the new venv and that no entry of
``sys.path`` is inside the checkout. Every command runs with no ``PYTHONPATH`` and a
working directory outside the checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from fixtures.cluster import ClusterNode, MakeNode, approve
from fleetcron.store.schema import ClusterMember
from waiting import eventually

pytestmark = [pytest.mark.wheel, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ADMIN_PASSWORD = "wheel-admin-password-1"
#: Files every install needs at run time, beside the Python modules.
RUNTIME_FILES = (
    "fleetcron/py.typed",
    "fleetcron/web/templates/base.html",
    "fleetcron/web/templates/login.html",
    "fleetcron/web/static/fleetcron.css",
    "fleetcron/web/static/fleetcron.js",
    "fleetcron/store/migrations/env.py",
    "fleetcron/store/migrations/script.py.mako",
    "fleetcron/store/migrations/versions/0001_initial_schema.py",
    "fleetcron/store/sqlite_head.sql",
)


# -- building and installing -----------------------------------------------------------


def _project_copy(dest: Path) -> Path:
    """The files a build reads, without build/, *.egg-info or caches of the checkout (a
    stale build/lib would be packed into the wheel and hide a packaging mistake)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "src",
        dest / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
    )
    return dest


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 180) -> str:
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, (
        f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without PYTHONPATH, virtualenv or FLEETCRON_* variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLEETCRON_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    sdist: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def fleetcron(self) -> str:
        return str(self.bin / "fleetcron")


def _build(work: Path) -> tuple[Path, Path]:
    """Build the sdist from a copy of the project, then the wheel from the sdist."""
    env = clean_env()
    project = _project_copy(work / "project")
    dist = work / "dist"
    dist.mkdir()
    _run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])",
            str(dist),
        ],
        cwd=project,
        env=env,
    )
    (sdist,) = dist.glob("fleetcron-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(work / "unpacked", filter="data")
    (unpacked,) = (work / "unpacked").iterdir()
    # The backend's wheel hook in the unpacked sdist, as `python -m build` calls it (pip
    # would call the same hook after a second's start-up of its own).
    _run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta as b; b.build_wheel(sys.argv[1])",
            str(dist),
        ],
        cwd=unpacked,
        env=env,
    )
    (wheel,) = dist.glob("fleetcron-*.whl")
    return sdist, wheel


def _install(work: Path, wheel: Path) -> Path:
    """A new venv outside the checkout with the wheel (and, via .pth, the dev deps)."""
    env = clean_env()
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work, env=env)
    python = venv / "bin" / "python"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-cache-dir",
            "-q",
            str(wheel),
        ],
        cwd=work,
        env=env,
    )
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=work,
            env=env,
        ).strip()
    )
    dev_site = sysconfig.get_paths()["purelib"]
    (purelib / "zz_fleetcron_test_dependencies.pth").write_text(dev_site + "\n")
    return venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    assert not work.resolve().is_relative_to(ROOT)
    sdist, wheel = _build(work)
    return Installed(_install(work, wheel), wheel, sdist)


# -- what was built --------------------------------------------------------------------


def test_wheel_and_sdist_hold_the_runtime_files(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as archive:
        in_wheel = set(archive.namelist())
    with tarfile.open(installed.sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for name in RUNTIME_FILES:
        assert name in in_wheel, f"{name} is not in {installed.wheel.name}"
        assert f"src/{name}" in in_sdist, f"src/{name} is not in {installed.sdist.name}"
    # Every template and static file of the source tree is shipped, not just the ones named.
    source = ROOT / "src"
    for folder in ("fleetcron/web/templates", "fleetcron/web/static"):
        for path in (source / folder).iterdir():
            assert f"{folder}/{path.name}" in in_wheel, f"{folder}/{path.name} not shipped"
    versions = source / "fleetcron/store/migrations/versions"
    for path in versions.glob("*.py"):
        assert f"fleetcron/store/migrations/versions/{path.name}" in in_wheel


def test_the_installed_package_is_the_wheel_not_the_checkout(
    installed: Installed, tmp_path: Path
) -> None:
    probe = (
        "import json, sys, fleetcron, fastapi; "
        "print(json.dumps({'file': fleetcron.__file__, 'path': sys.path, "
        "'fastapi': fastapi.__file__}))"
    )
    out = _run([str(installed.bin / "python"), "-c", probe], cwd=tmp_path, env=clean_env())
    seen = json.loads(out)
    assert Path(seen["file"]).resolve().is_relative_to(installed.venv.resolve()), seen["file"]
    inside_checkout = [
        entry for entry in seen["path"] if entry and Path(entry).resolve().is_relative_to(ROOT)
    ]
    # The dev venv's site-packages lives in the checkout (.venv/); nothing else may.
    dev_site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert [Path(e).resolve() for e in inside_checkout] in ([], [dev_site]), inside_checkout
    assert not any(Path(e).resolve() == (ROOT / "src").resolve() for e in seen["path"])
    # the dependencies do come from the dev venv, through the .pth line
    assert Path(seen["fastapi"]).resolve().is_relative_to(dev_site)


# -- running what was installed --------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Forms(HTMLParser):
    """Every form of a page with the values a browser would submit unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, list[tuple[str, str]]] = {}
        self.links: list[dict[str, str]] = []
        self._form: list[tuple[str, str]] | None = None
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "link":
            self.links.append(a)
        elif tag == "form":
            self._form = self.forms.setdefault(a.get("action", ""), [])
        elif self._form is None or "name" not in a:
            return
        elif tag == "input":
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            if kind not in ("submit", "button", "reset"):
                self._form.append((a["name"], a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "textarea":
            self._textarea, self._text = a["name"], ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._form is not None and self._textarea is not None:
            self._form.append((self._textarea, self._text))
            self._textarea = None
        elif tag == "form":
            self._form = None


def parse_page(html: str) -> _Forms:
    parser = _Forms()
    parser.feed(html)
    return parser


def submit(client: httpx.Client, page: str, action: str, **values: str) -> httpx.Response:
    """Fetch ``page``, fill the form posting to ``action`` like a user would (changing only
    ``values``) and post it; the response is not followed."""
    shown = client.get(page)
    assert shown.status_code == 200, (page, shown.status_code, shown.text[:2000])
    forms = parse_page(shown.text).forms
    assert action in forms, f"no form posting to {action} on {page}: {sorted(forms)}"
    fields = [(k, v) for k, v in forms[action] if k not in values]
    fields += list(values.items())
    return client.post(action, data=dict(_merged(fields)))


def _merged(fields: list[tuple[str, str]]) -> Iterator[tuple[str, Any]]:
    grouped: dict[str, list[str]] = {}
    for key, value in fields:
        grouped.setdefault(key, []).append(value)
    for key, values in grouped.items():
        yield key, values if len(values) > 1 else values[0]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _start_serve(installed: Installed, cwd: Path, env: dict[str, str]) -> Server:
    port = _free_port()
    log = cwd / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [installed.fleetcron, "serve", "--listen", f"127.0.0.1:{port}"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"serve exited {process.returncode}:\n{log.read_text()}")
        try:
            return httpx.get(server.base + "/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        eventually(answers, 60, lambda: f"serve to answer:\n{log.read_text()}", interval=0.2)
    except BaseException:
        server.stop()
        raise
    return server


def _finished_on_the_page(client: httpx.Client, job: str) -> bool:
    """Whether the runs page lists runs of ``job``, none of them queued or running."""
    page = client.get("/runs", params={"job": job})
    assert page.status_code == 200, page.text[:2000]
    statuses = re.findall(r'<tr data-run="\d+" data-status="([a-z_]+)"', page.text)
    return bool(statuses) and not {"queued", "running"} & set(statuses)


def test_init_serve_login_and_a_local_job_from_the_installed_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data = tmp_path / "data"
    env = clean_env(
        {
            "PATH": f"{installed.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "FLEETCRON_DATA_DIR": str(data),
            "FLEETCRON_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "FLEETCRON_TICK_S": "0.2",
            # local targets are an admin-enabled feature; this smoke test runs on one
            "FLEETCRON_ALLOW_LOCAL_TARGETS": "true",
            # and local commands refuse to run as root unless allowed (CI runs as root)
            "FLEETCRON_LOCAL_ALLOW_ROOT": "true",
        }
    )

    def cli(*args: str) -> str:
        return _run([installed.fleetcron, *args], cwd=elsewhere, env=env, timeout=120)

    init = cli("init")
    assert f"data dir:    {data}" in init
    assert (data / "fleetcron.db").is_file()

    server = _start_serve(installed, elsewhere, env)
    try:
        with httpx.Client(
            base_url=server.base,
            timeout=30,
            headers={"Origin": server.base, "Sec-Fetch-Site": "same-origin"},
        ) as client:
            login = client.get("/login")
            assert login.status_code == 200, login.text[:2000]
            assert "text/html" in login.headers["content-type"]
            page = parse_page(login.text)
            (css,) = [link["href"] for link in page.links if link.get("rel") == "stylesheet"]
            style = client.get(css)
            assert style.status_code == 200
            assert style.headers["content-type"].startswith("text/css")
            shipped = installed.venv.glob("lib/python*/site-packages/fleetcron/web/static")
            assert style.content == (next(shipped) / "fleetcron.css").read_bytes()

            logged_in = submit(
                client, "/login", "/login", username="admin", password=ADMIN_PASSWORD
            )
            assert logged_in.status_code == 303, logged_in.text[:2000]
            assert client.get("/").status_code == 200

            added = submit(client, "/targets/new", "/targets/new", name="here", kind="local")
            assert added.status_code == 303, added.text[:3000]
            assert added.headers["location"].endswith("/targets/here")
            job = submit(
                client,
                "/targets/here",
                "/targets/here/jobs",
                name="hello",
                schedule="0 0 1 1 *",
                command="echo hello",
            )
            assert job.status_code == 303, job.text[:3000]
            ran = submit(client, "/targets/here", "/targets/here/jobs/hello/run")
            assert ran.status_code == 303, ran.text[:3000]

            # Waited for on the runs page (each `fleetcron` command here starts cold, about
            # 1.2 CPU-s), then read once through the command line.
            eventually(
                lambda: _finished_on_the_page(client, "hello"),
                60,
                lambda: f"the run of hello to finish:\n{server.log.read_text()}",
                interval=0.3,
            )
            runs = json.loads(cli("runs", "list", "--job", "hello", "--json"))["runs"]
            (run,) = runs
            assert (run["status"], run["exit_code"], run["target"]) == ("succeeded", 0, "here")
            shown = json.loads(cli("runs", "show", str(run["id"]), "--json"))
            assert shown["stdout"]["head"] == "hello\n"
            run_page = client.get(f"/runs/{run['id']}")
            assert run_page.status_code == 200
            assert "hello" in run_page.text and "succeeded" in run_page.text
    except AssertionError as exc:
        server.stop()
        raise AssertionError(f"{exc}\n--- serve log:\n{server.log.read_text()[-6000:]}") from exc
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log, log


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _worker_of(pid: int) -> tuple[int, list[str]] | None:
    """The pid and command line of the ``--worker-of`` process ``pid`` started, if any."""
    for child in _children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if "--worker-of" in argv:
            return child, argv
    return None


def _members(node: ClusterNode) -> set[str]:
    with node.app.db.read() as session:
        return {
            f"{n}/{w}"
            for n, w in session.execute(select(ClusterMember.node_id, ClusterMember.worker))
        }


@pytest.mark.postgres
def test_one_worker_per_core_from_the_installed_wheel(
    installed: Installed, make_node: MakeNode, migrated: str, tmp_path: Path
) -> None:
    """``fleetcron scheduler`` (no ``--workers``) from the installed wheel on a PostgreSQL
    cluster starts one worker per usable core: worker 0 starts the others with the
    installed interpreter (never the checkout's), all register as members of the node,
    and they stop with worker 0."""
    cores = len(os.sched_getaffinity(0))
    assert cores >= 2, f"this test needs a machine with 2 cores or more; this one has {cores}"
    workers = min(cores, 4)  # at most the shard count
    node = make_node("alpha", shards=4)
    approve(node)
    settings = node.app.settings
    assert settings.machine_id_file is not None and settings.master_key is not None
    env = clean_env(
        {
            "FLEETCRON_DATABASE_URL": migrated,
            "FLEETCRON_CLUSTER": "true",
            "FLEETCRON_ENDPOINT": str(settings.endpoint),
            "FLEETCRON_MACHINE_ID_FILE": str(settings.machine_id_file),
            "FLEETCRON_MASTER_KEY": settings.master_key.get_secret_value(),
            "FLEETCRON_DATA_DIR": str(settings.data_dir),
            "FLEETCRON_NODE_NAME": "alpha",
            "FLEETCRON_LEASE_S": "30",
            "FLEETCRON_LEASE_RENEW_S": "1",
            "FLEETCRON_TICK_S": "0.2",
        }
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with open(tmp_path / "workers.log", "ab") as log:
        parent = subprocess.Popen(
            [installed.fleetcron, "scheduler"],
            cwd=elsewhere,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        child, argv = eventually(
            lambda: _worker_of(parent.pid),
            60,
            lambda: "worker 1 started; log: " + (tmp_path / "workers.log").read_text()[-2000:],
        )
        assert argv[argv.index("--worker-of") + 1].endswith(f"/{workers}")
        assert Path(argv[0]).is_relative_to(installed.venv), argv  # its interpreter
        me = node.identity.node_id
        every = {f"{me}/{i}" for i in range(workers)}
        eventually(
            lambda: every <= _members(node),
            60,
            lambda: (
                f"all {workers} workers registered: {_members(node)}; log: "
                + (tmp_path / "workers.log").read_text()[-2000:]
            ),
        )
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=60) == 0
        eventually(lambda: not Path(f"/proc/{child}").exists(), 30, "worker 1 stopped")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
