"""The fork server of the fault scenarios' node processes (see node_forks.py).

usage: python node_server.py   (tests/ on PYTHONPATH)

It imports node_process.py (all of fleetcron a node loads) once, then reads one JSON request
per line on stdin: ``{"args": [...], "env": {...}, "log": PATH}``. For each it forks a child
that becomes the node: that environment, stdin and stdout on /dev/null, stderr appended to
``log``, then ``node_process.entry(args)``, exactly what ``python node_process.py ARGS``
runs. It answers ``pid PID`` at once and ``exit PID CODE`` when it has reaped the child
(``CODE`` as ``Popen.returncode``: ``-N`` for a child ended by signal N).

One thread only (a child of a multi-threaded process inherits locks held by the other
threads): a selector waits for stdin and for SIGCHLD, through the signal wake-up pipe.
When stdin closes, the server kills the nodes still running and ends.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import selectors
import signal
import sys
import traceback
from typing import Any

import node_process

# The database driver, loaded on a node's first connection (0.05 CPU-s each): before the forks.
import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401
from sqlalchemy.orm import configure_mappers

# The SSH executor is loaded only when a node first reaches an SSH target: load it before
# the forks too. Then move what is loaded out of the collector's sight, so a child's
# collections do not copy the pages those objects sit on.
import fleetcron.executors.ssh
import fleetcron.executors.ssh_connect
import fleetcron.store.schema  # noqa: F401

configure_mappers()  # else done on each node's first query: once here
gc.freeze()


def _become_node(request: dict[str, Any], private_fds: list[int]) -> int:
    """In the child: the request's process, from the standard streams on; its exit code."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in private_fds:
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, os.devnull, os.O_WRONLY),
        (2, request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own streams)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.argv = [node_process.__file__, *request["args"]]
    code = 0
    try:
        node_process.entry(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _say(line: str) -> None:
    with contextlib.suppress(BrokenPipeError):  # the harness is gone: nobody to tell
        os.write(1, line.encode() + b"\n")


def _reap(children: set[int]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        children.discard(pid)
        _say(f"exit {pid} {os.waitstatus_to_exitcode(status)}")


def serve() -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: set[int] = set()
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                continue
            data = os.read(0, 1 << 16)
            if not data:
                _stop(children)
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    os._exit(_become_node(json.loads(line), [wake_r, wake_w]))
                children.add(pid)
                _say(f"pid {pid}")
        _reap(children)


def _stop(children: set[int]) -> None:
    """Stdin closed: no node outlives the server."""
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in children:
        _say(f"exit {pid} {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}")


if __name__ == "__main__":
    serve()
