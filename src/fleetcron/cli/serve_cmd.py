"""`fleetcron serve` and `fleetcron scheduler`: the long-running process.

The process is assembled in :mod:`fleetcron.scheduler.assembly`; this module adds the
signals, the web server (uvicorn on a socket of its own) and the click commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Iterator

import click
import uvicorn

from fleetcron import heap
from fleetcron.app import App
from fleetcron.config import Settings, hide_secret_environment, load_settings
from fleetcron.coordination.standalone import only_scheduler
from fleetcron.core.members import Worker
from fleetcron.errors import InvalidInput
from fleetcron.logs import configure_logging
from fleetcron.metrics import Metrics
from fleetcron.scheduler.assembly import build_scheduler, prepare
from fleetcron.scheduler.workers import WorkerGroup, die_with_parent, parse_worker_of
from fleetcron.services.cluster.workers import default_count, usable_cores

log = logging.getLogger(__name__)

#: How long worker 0 waits for the other workers to stop beyond their own grace (seconds).
WORKER_STOP_MARGIN_S = 10.0


class _WebServer(uvicorn.Server):
    """uvicorn without its own signal handling: the process has one stop event."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def listening_socket(host: str, port: int) -> socket.socket:
    """The web UI's socket, with TCP_NODELAY: without it every small response on a
    keep-alive connection waits ~40 ms for the client's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(
            f"listen: cannot listen on {host}:{port}: {exc.strerror}",
            field="listen",
            value=f"{host}:{port}",
            allowed="a free local address and port",
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def parse_listen(value: str) -> tuple[str, int]:

    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(
            f"listen: {value!r} is not HOST:PORT",
            field="listen",
            value=value,
            allowed="e.g. 127.0.0.1:8080",
        )
    return host.strip("[]"), int(port)


async def _run(app: App, listen: tuple[str, int] | None, worker: Worker | None) -> None:
    stop = asyncio.Event()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    metrics = Metrics()
    scheduler = build_scheduler(app, metrics, worker=worker)
    tasks = [asyncio.create_task(scheduler.serve(stop), name="scheduler")]
    group = WorkerGroup(worker.count) if worker is not None and worker.first else None
    if group is not None:
        group.start()
        tasks.append(asyncio.create_task(group.watch(stop), name="workers"))
    server: _WebServer | None = None
    if listen is not None:
        from fleetcron.web.app import create_app

        web = create_app(app, metrics=metrics)
        web.state.scheduler = scheduler
        config = uvicorn.Config(
            web,
            host=listen[0],
            port=listen[1],
            log_config=None,
            access_log=False,
            proxy_headers=False,
            lifespan="off",
        )
        server = _WebServer(config)
        sockets = [listening_socket(*listen)]
        tasks.append(asyncio.create_task(server.serve(sockets=sockets), name="web"))
        log.info("web UI and API on http://%s:%d/", *listen, extra={"action": "web.start"})
    heap.settle()  # before the tasks first run: all that serves is built
    done, _ = await asyncio.wait(
        [*tasks, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    stop.set()
    if server is not None:
        server.should_exit = True
    if group is not None:
        await group.stop(app.settings.shutdown_grace_s + WORKER_STOP_MARGIN_S)
    await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if task in tasks and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


def _main(
    listen: tuple[str, int] | None, workers: int | None, *, worker_of: Worker | None = None
) -> None:
    """Run the process: worker ``worker_of`` of a group started by its worker 0, or the
    process the operator started, with ``workers`` processes (None: the default,
    :func:`~fleetcron.services.cluster.workers.default_count`)."""
    hide_secret_environment()  # re-executes once if a secret is in the environment
    if worker_of is not None:
        die_with_parent()
    settings = load_settings()
    configure_logging(settings.log_format)
    with only_scheduler(settings):
        app, worker = _opened(
            settings,
            worker_of or _group(workers or 1),
            counted=workers is None and worker_of is None,
        )
        try:
            asyncio.run(_run(app, listen, worker))
        finally:
            app.close()


def _opened(
    settings: Settings, worker: Worker | None, *, counted: bool
) -> tuple[App, Worker | None]:
    """The app, opened once under the worker's name (each worker's runs and database
    sessions name it: <node name>/<index>). ``counted``: ``--workers`` was left unset, so
    the count comes from the installation (:func:`~fleetcron.services.cluster.workers.
    default_count`), and the app is opened again under worker 0's name when it is more
    than one."""
    app = prepare(_named(settings, worker) if worker is not None else settings)
    if not counted:
        return app, worker
    try:
        worker = _group(default_count(app, usable_cores()))
    except BaseException:
        app.close()
        raise
    if worker is None:
        return app, None
    app.close()
    return prepare(_named(settings, worker)), worker


def _named(settings: Settings, worker: Worker) -> Settings:
    base = settings.node_name or socket.gethostname()
    return settings.model_copy(update={"node_name": worker.name(base)})


def _group(workers: int) -> Worker | None:
    """Worker 0 of ``workers`` (None for one process: a node's only scheduler)."""
    return Worker(0, workers) if workers > 1 else None


WORKERS_HELP = (
    "Scheduler processes on this machine, each with its own event loop, splitting the "
    "node's shards (cluster on PostgreSQL only; at most the shard count). Default: one per "
    "core this process may use on a cluster sharing PostgreSQL, else 1."
)


@click.command()
@click.option("--workers", type=click.IntRange(1, 1024), default=None, help=WORKERS_HELP)
@click.option("--worker-of", hidden=True, help="Internal: worker I of N, started by worker 0.")
def scheduler(workers: int | None, worker_of: str | None) -> None:
    """Run the scheduler alone (no web UI)."""
    if worker_of is not None:
        _main(None, None, worker_of=parse_worker_of(worker_of))
        return
    _main(None, workers)


@click.command()
@click.option(
    "--listen", default="127.0.0.1:8080", show_default=True, help="HOST:PORT of the web UI."
)
@click.option("--workers", type=click.IntRange(1, 1024), default=None, help=WORKERS_HELP)
def serve(listen: str, workers: int | None) -> None:
    """Run the scheduler, the web UI and the REST API in one process (with several
    workers, the web UI runs in worker 0)."""
    _main(parse_listen(listen), workers)
