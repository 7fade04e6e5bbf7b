"""Node processes forked from a server that imported them once, instead of cold starts.

A cold ``python node_process.py`` spends about 1.2 s of CPU importing fleetcron before it
does anything, and the fault scenarios start well over a hundred nodes. node_server.py
imports it once per pytest process and forks each node from there: every node is still a
process of its own (its own pid, event loop, database sessions; signals, SIGSTOP and SIGKILL
reach it alone), only the interpreter's start-up is shared.

:class:`ForkedNode` answers what the scenarios ask of a ``subprocess.Popen``: ``pid``,
``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``. Its exit code comes from the
server, which reaps it; a reader thread here files each one as it arrives.

What acts only when a program starts cannot be forked: a node whose environment changes a
dynamic loader or interpreter start-up variable (``LD_PRELOAD`` for libfaketime, say) is
started cold, as a ``subprocess.Popen``, which answers the same calls (:class:`NodeProcess`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

SERVER = Path(__file__).with_name("node_server.py")
NODE_PROCESS = SERVER.with_name("node_process.py")
#: Environment variables read when a process starts (by the dynamic loader, the interpreter).
_READ_AT_START = ("LD_", "PYTHON")


class NodeProcess(Protocol):
    """What the scenarios ask of a node process (``subprocess.Popen`` answers it too)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class ForkedNode:
    """One node process forked by the server (the part of ``Popen`` the scenarios use)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = threading.Event()

    def ended(self, code: int) -> None:
        """The server reaped it (called by the reader thread)."""
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"node process {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            # Reaped but not yet reported: there is nothing left to signal.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class NodeForks:
    """The fork server of this pytest process and the nodes it forked."""

    def __init__(self, log: Path) -> None:
        # node_process.py imports tests/waiting.py.
        self._env = {**os.environ, "PYTHONPATH": str(SERVER.parents[1])}
        with log.open("ab") as stderr:
            self._server = subprocess.Popen(
                [sys.executable, str(SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=self._env,
            )
        self._log = log
        self._nodes: dict[int, ForkedNode] = {}
        self._started: queue.Queue[ForkedNode | None] = queue.Queue()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="node-forks", daemon=True)
        self._reader.start()

    def start(self, args: Sequence[str], env: Mapping[str, str], log: Path) -> NodeProcess:
        """A node running ``node_process.py ARGS`` with ``env``, stderr appended to ``log``:
        forked, or started cold when ``env`` changes what acts at start."""
        env = {**env, "PYTHONPATH": self._env["PYTHONPATH"]}
        if any(
            env.get(name) != self._env.get(name)
            for name in {*env, *self._env}
            if name.startswith(_READ_AT_START)
        ):
            return self._cold(args, env, log)
        return self._fork(args, env, log)

    @staticmethod
    def _cold(args: Sequence[str], env: Mapping[str, str], log: Path) -> NodeProcess:
        # The node writes its log through its own copy of the descriptor: ours is closed.
        with log.open("ab") as stderr:
            return subprocess.Popen(
                [sys.executable, str(NODE_PROCESS), *args],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def _fork(self, args: Sequence[str], env: Mapping[str, str], log: Path) -> ForkedNode:
        request = {"args": list(args), "env": dict(env), "log": str(log)}
        with self._lock:
            self._streams()[0].write(json.dumps(request).encode() + b"\n")
            self._streams()[0].flush()
            try:
                node = self._started.get(timeout=60)
            except queue.Empty:
                node = None
        if node is None:
            raise RuntimeError(f"the node fork server stopped:\n{self._log.read_text()}")
        return node

    def close(self) -> None:
        """End the server: it kills the nodes still running, reports them and exits."""
        self._streams()[0].close()
        try:
            self._server.wait(timeout=30)
        finally:
            self._reader.join(timeout=30)
            self._streams()[1].close()

    def _streams(self) -> tuple[IO[bytes], IO[bytes]]:
        assert self._server.stdin is not None and self._server.stdout is not None
        return self._server.stdin, self._server.stdout

    def _read(self) -> None:
        for line in self._streams()[1]:
            kind, number, *code = line.decode().split()
            if kind == "pid":
                node = self._nodes[int(number)] = ForkedNode(int(number))
                self._started.put(node)
            else:
                self._nodes.pop(int(number)).ended(int(code[0]))
        # The server is gone: a start waiting for it fails, and no node it left is waited for
        # in vain (it had no chance to report them: they are killed and reported here).
        self._started.put(None)
        for pid, node in self._nodes.items():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            node.ended(-signal.SIGKILL)
