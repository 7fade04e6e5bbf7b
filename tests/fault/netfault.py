"""Instruments for the fault suite: a TCP link to PostgreSQL that can be cut, and a watcher
that sees, through /proc, when each executed command's process group is really gone."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


class CuttableLink:
    """A user-space TCP proxy on 127.0.0.1 in front of ``upstream``.

    ``cut()`` stops forwarding in both directions while every socket stays open: the node
    sees a database that no longer answers (no reset, no FIN), as behind a partitioned
    network, not a paused process. ``cut(close=True)`` closes every socket instead;
    ``cut(direction="to_client")`` (or ``"to_server"``) stops one direction only: the
    server still receives what the node sends (a commit happens) but its answers are held,
    or the other way round. ``restore()`` forwards again (bytes held meanwhile are
    delivered then).
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._held: list[socket.socket] = []
        self._upstreams: set[socket.socket] = set()
        #: The sockets whose bytes are not forwarded: all, or one side's (a one-way cut).
        self._stopped: Callable[[socket.socket], bool] = lambda _sock: False
        self._forwarding = True
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="cuttable-link", daemon=True)
        self._thread.start()

    def url_for(self, database_url: str) -> str:
        """``database_url`` with its host:port replaced by this proxy's."""
        host_port = f"{self.upstream[0]}:{self.upstream[1]}"
        if host_port not in database_url:
            raise ValueError(f"{database_url!r} does not name {host_port}")
        return database_url.replace(host_port, f"127.0.0.1:{self.port}")

    def cut(self, *, close: bool = False, direction: str = "both") -> None:
        if direction not in ("both", "to_client", "to_server"):
            raise ValueError(f"direction {direction!r}: allowed both, to_client, to_server")
        with self._lock:
            self._forwarding = False
            if direction == "to_client":
                self._stopped = lambda sock: sock in self._upstreams
            elif direction == "to_server":
                self._stopped = lambda sock: sock not in self._upstreams
            else:
                self._stopped = lambda _sock: True
            for sock in list(self._pairs):
                if self._stopped(sock):
                    with contextlib.suppress(KeyError, ValueError):
                        self._selector.unregister(sock)
            if close:
                for sock in list(self._pairs):
                    sock.close()
                self._pairs.clear()

    def restore(self) -> None:
        with self._lock:
            self._forwarding = True
            self._stopped = lambda _sock: False
            for sock in self._pairs:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.register(sock, selectors.EVENT_READ, None)
            held, self._held = self._held, []
        for client in held:
            self._connect(client)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for sock in [*self._pairs, *self._held, self._listener]:
            sock.close()
        self._selector.close()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
        with self._lock:
            self._pairs[client], self._pairs[upstream] = upstream, client
            self._upstreams.add(upstream)
            if self._forwarding:
                self._selector.register(client, selectors.EVENT_READ, None)
                self._selector.register(upstream, selectors.EVENT_READ, None)

    def _serve(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    with contextlib.suppress(BlockingIOError):
                        client, _ = self._listener.accept()
                        if self._forwarding:
                            self._connect(client)
                        else:
                            self._held.append(client)  # accepted, never answered
                    continue
                self._forward(sock)

    def _forward(self, sock: socket.socket) -> None:
        with self._lock:
            peer = self._pairs.get(sock)
            if peer is None or self._stopped(sock):
                return
        try:
            data = sock.recv(65536)
            if data:
                peer.setblocking(True)
                peer.sendall(data)
                peer.setblocking(False)
                return
        except OSError:
            pass
        with self._lock:
            for s in (sock, peer):
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(s)
                self._pairs.pop(s, None)
                self._upstreams.discard(s)
                s.close()


@dataclass
class _Watched:
    pgid: int | None
    gone_at: float | None = None


@dataclass
class ProcessWatch:
    """Reads the effects file as it grows and watches, every ``poll_s``, whether the process
    group of each started execution still has a live (non-zombie) member in /proc.

    ``gone_at[(slot, target)]`` is the first time the group was seen gone: an upper bound on
    the moment the command stopped, also for commands killed without writing an ``end``
    line. A group already gone when first looked at is gone at that first look.
    """

    effects: Path
    poll_s: float = 0.025
    #: Maps the pid a command wrote (its own view: another PID namespace, for an sshd run
    #: in one) to this process's view; ``None``: the same namespace.
    resolve: Callable[[int], int | None] | None = None
    gone_at: dict[tuple[str, str], float] = field(default_factory=dict)
    _watched: dict[tuple[str, str], _Watched] = field(default_factory=dict)
    _offset: int = 0
    _partial: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _groups: _GroupScan = field(default_factory=lambda: _GroupScan())

    def start(self) -> ProcessWatch:
        self._thread = threading.Thread(target=self._run, name="process-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._step()

    def still_running(self) -> list[tuple[str, str]]:
        return [key for key, w in self._watched.items() if w.gone_at is None]

    def kill_running(self) -> int:
        """SIGKILL the process group of every execution still running (an operator cleaning
        the targets by hand); returns how many groups were signalled."""
        self._step()
        killed = 0
        for watched in self._watched.values():
            if watched.gone_at is None and watched.pgid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(watched.pgid, signal.SIGKILL)
                    killed += 1
        return killed

    def _run(self) -> None:
        while not self._stop.is_set():
            self._step()
            self._stop.wait(self.poll_s)  # a watcher's pace, ended at once by stop()

    def _step(self) -> None:
        self._read_new_starts()
        pending = {k: w for k, w in self._watched.items() if w.gone_at is None}
        if not pending:
            return
        alive = self._groups.live({w.pgid for w in pending.values() if w.pgid is not None})
        now = time.time()
        for key, watched in pending.items():
            if watched.pgid is None or watched.pgid not in alive:
                watched.gone_at = now
                self.gone_at[key] = now

    def _read_new_starts(self) -> None:
        if not self.effects.exists():
            return
        with self.effects.open() as f:
            f.seek(self._offset)
            chunk = f.read()
            self._offset = f.tell()
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        for line in lines:
            parts = line.split()
            if len(parts) < 7 or parts[0] != "start":
                continue
            key = (parts[2], parts[3])
            if key not in self._watched:
                pid: int | None = int(parts[6])
                if self.resolve is not None and pid is not None:
                    pid = self.resolve(pid)
                self._watched[key] = _Watched(_pgid_of(pid) if pid is not None else None)


def _pgid_of(pid: int) -> int | None:
    stat = _stat(pid)
    return None if stat is None or stat[0] == "Z" else stat[1]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, pgid) of a process, or None when it is gone."""
    stat = _stat_of(pid)
    return None if stat is None else (stat.state, stat.pgid)


@dataclass(frozen=True)
class _Stat:
    state: str
    pgid: int
    sid: int


def _stat_of(pid: int) -> _Stat | None:
    """State, process group and session of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(b")") + 2 :].split(maxsplit=4)
    return _Stat(fields[0].decode(), int(fields[2]), int(fields[3]))


@dataclass
class _GroupScan:
    """Which of the watched process groups still have a live (non-zombie) member.

    Every process in /proc is read once, when it first appears; after that only those that
    can be, or become, a member of a watched group are read again at each look: a member
    (it may turn zombie or leave), a group's leader (its pid is the group's id), and any
    process of a watched group's session (only a process of the same session can join a
    group; one that calls setsid leads a group of its own). A process that is neither
    cannot become a member without a new pid (a fork of a member), which is read as new.
    Reading all of /proc at every look (every 25 ms) cost the test process a quarter of a
    core beside a few hundred processes.
    """

    _known: dict[int, _Stat] = field(default_factory=dict)

    def live(self, watched: set[int]) -> set[int]:
        pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        known = {pid: stat for pid, stat in self._known.items() if pid in pids}
        sessions = watched | {s.sid for s in known.values() if s.pgid in watched}
        for pid in pids:
            stat = known.get(pid)
            if stat is None or pid in watched or stat.pgid in watched or stat.sid in sessions:
                fresh = _stat_of(pid)
                if fresh is None:
                    known.pop(pid, None)
                else:
                    known[pid] = fresh
        self._known = known
        return {s.pgid for s in known.values() if s.pgid in watched and s.state != "Z"}
