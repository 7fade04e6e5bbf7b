"""A simulated fleet: N SSH targets served by one asyncssh server process.

OpenSSH forks a process per connection and cannot hold thousands of them on a 2-core
machine, so benchmarks and scale tests use this instead: one Python process serving every
target, each on its own loopback port, each with its own ed25519 host key and accepting
only its own client key (so a client needs one connection and one handshake per target,
as with real servers).

Latency: the kernels here have no ``netem`` queueing discipline, so the delay is put on
the path in user space, inside the simulator, the way toxiproxy's latency toxic works:
every chunk read from a client is held for RTT/2 before the SSH server sees it, and every
chunk the server writes is held for RTT/2 before it reaches the socket, in order (a FIFO
per direction). The TCP handshake itself is not delayed (as with a proxy). With
``loss`` > 0, a chunk is held for an extra retransmission timeout with that probability,
and the chunks behind it wait too (TCP delivers in order). :func:`measure_rtt` checks what
a client sees: an SSH channel open is one round trip.

Commands: an exec request runs as a real ``/bin/sh -c COMMAND`` in a new session (as
sshd does), with pipes to the channel, unless the command is recognised as fleetcron's
remote wrapper (or no wrapper) around a plain ``sleep N`` / ``echo WORDS`` / ``true``:
then it is simulated, with no process. The recogniser is deliberately narrow: a chain
of ``;``/``&&`` commands made of ``export NAME=VALUE``, the ``printf`` of the process
group marker (``$$`` becomes a fake process group above any possible pid), ``exec``,
coreutils ``timeout [-s SIG] [-k D] D`` (honoured: exit 124 when it fires), ``setsid``,
``nohup`` and ``[/bin/]sh -c STRING`` (recursively), ending in the plain command; any
other word, redirection or ``$`` sends the whole line to real ``sh``. ``kill -s SIG --
-PGID`` for a fake process group stops that simulated command (exit signal SIG).
The watchdog's generation-mark check (``fleetcron.executors.watchdog.guarded_command``,
sent in a cluster) is recognised only when it is exactly the text the wrapper writes for
that generation and scope; it is then evaluated against the simulator's ``$HOME`` (where
a real ``sh`` running the active cleanup writes the marks): a mark above the run's
generation refuses the run as the wrapper does (its refusal line, exit 86).

``max_startups`` imitates sshd's ``MaxStartups K``: a connection that arrives while K
connections have not yet authenticated is closed before the banner.

Use from Python (benchmarks, tests)::

    with FleetSim(300, rtt_ms=50, work_dir=tmp) as sim:
        sim.targets        # [SimTarget(name, host, port, host_key, client_key), ...]
        sim.stats()        # counters from the server process
        sim.wait_idle()    # no session, connection or command left

or by hand: ``python bench/fleet_sim.py check --targets 5 --rtt-ms 100`` starts a
simulator and prints the round trip a client measures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from fleetcron.executors.watchdog import (
    GENERATION_VARIABLE,
    MARK_PARENT,
    MARK_SCOPE,
    SCOPE_VARIABLE,
    SUPERSEDED_EXIT,
    SUPERSEDED_PREFIX,
    guarded_command,
)

#: Fake process groups start here: above any Linux pid_max (at most 4,194,304), so a real
#: ``kill -- -PGID`` for one can never reach a real process.
FAKE_PGID_BASE = 1 << 30
#: Extra hold of a "lost" chunk: Linux's minimum retransmission timeout.
RTO_S = 0.2
_SIGNALS = {"TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2"}


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to its hard limit; returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# -- what to simulate ----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A command line recognised as simulatable: what to print and how long to take."""

    marker: str | None = None  # stderr line with "$$" still in it, or None
    steps: tuple[tuple[str, str | float], ...] = ()  # ("sleep", s) / ("echo", text)
    budget_s: float | None = None  # coreutils timeout around the command
    mark_check: tuple[str, int] | None = None  # (scope, generation) of the watchdog's check


@dataclass(frozen=True)
class Kill:
    signal: str
    pgid: int


def _duration(word: str) -> float | None:
    """A coreutils/sleep duration (``1``, ``0.5``, ``2s``, ``1m``), or None."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    scale = units.get(word[-1:])
    number = word[:-1] if scale is not None else word
    try:
        value = float(number)
    except ValueError:
        return None
    if not number or value < 0 or value != value or value == float("inf"):
        return None
    return value * (scale or 1.0)


def _tokens(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def _split_chain(tokens: list[str]) -> list[list[str]] | None:
    """Simple commands joined by ``;`` or ``&&``; None for any other operator."""
    chain: list[list[str]] = [[]]
    for tok in tokens:
        if tok in (";", "&&"):
            chain.append([])
        elif tok and tok[0] in ";&|<>()":
            if tok == ">&" and chain[-1][:1] == ["printf"]:
                chain[-1].append(tok)  # the marker's ">&2"
                continue
            return None
        else:
            chain[-1].append(tok)
    return [c for c in chain if c]


def classify(line: str) -> Plan | Kill | None:
    """What the simulator does with an exec request: a :class:`Plan` to simulate, a
    :class:`Kill` of a simulated process group, or None: run it with real ``/bin/sh``."""
    line = _unwrap_watchdog(line)
    tokens = _tokens(line)
    if tokens is None:
        return None
    kill = _as_kill(tokens)
    if kill is not None:
        return kill
    return _plan(tokens, depth=0)


def _unwrap_watchdog(line: str) -> str:
    """The executor's watchdog wrapper (fleetcron.executors.watchdog) as the equivalent
    one-line form the simulator understands: exports, the pgid marker, then the
    ``timeout ... /bin/sh -c CMD`` it runs. Any other line is returned unchanged."""
    lines = line.split("\n")
    if len(lines) < 6 or "__fc_until() {" not in line or lines[1] != "trap '' HUP INT QUIT TERM":
        return line
    if "__fc_t=$!" not in lines[2:]:
        return line
    exports, run = lines[0], lines[lines.index("__fc_t=$!", 2) - 1]
    if not run.endswith(" &"):
        return line
    run = _untagged(run[: -len(" &")])
    if not run.startswith("timeout "):
        return line
    return f"{exports}printf '%s\\n' \"__fleetcron_pgid__=$$\" >&2; {run}"


def _untagged(run: str) -> str:
    """``run`` without the run's tags the wrapper sets on ``timeout`` (its generation, and
    its mark scope: ``watchdog.tags``)."""
    while True:
        first, _, rest = run.partition(" ")
        name, _, value = first.partition("=")
        generation = name == GENERATION_VARIABLE and value.isdigit()
        scope = name == SCOPE_VARIABLE and MARK_SCOPE.fullmatch(value) is not None
        if not (generation or scope):
            return run
        run = rest


def _as_kill(tokens: list[str]) -> Kill | None:
    words = tokens[:5]
    tail = tokens[5:]
    if tail not in ([], ["2", ">", "/dev/null"]) or len(words) != 5:
        return None
    if words[0] != "kill" or words[1] != "-s" or words[3] != "--" or words[2] not in _SIGNALS:
        return None
    if not words[4].startswith("-") or not words[4][1:].isdigit():
        return None
    pgid = int(words[4][1:])
    return Kill(words[2], pgid) if pgid >= FAKE_PGID_BASE else None


def _plan(tokens: list[str], depth: int) -> Plan | None:
    if depth > 4:
        return None
    chain = _split_chain(tokens)
    if not chain:
        return None
    marker: str | None = None
    for command in chain[:-1]:
        if command[0] == "export" and len(command) > 1:
            if all(_is_assignment(w) for w in command[1:]):
                continue
            return None
        if (
            command[0] == "printf"
            and len(command) == 5
            and command[1] == "%s\\n"
            and command[3:] == [">&", "2"]
            and marker is None
            and "$" not in command[2].replace("$$", "")
        ):
            marker = command[2]
            continue
        return None
    inner = _last(chain[-1], depth)
    if inner is None:
        return None
    if marker is not None and inner.marker is not None:
        return None
    return Plan(marker or inner.marker, inner.steps, inner.budget_s, inner.mark_check)


def _is_assignment(word: str) -> bool:
    name, eq, value = word.partition("=")
    return bool(eq) and name.isidentifier() and "$" not in value and "`" not in value


def _last(words: list[str], depth: int) -> Plan | None:
    """The chain's last command: prefixes (exec, timeout, setsid, nohup), then sh -c or a
    plain command."""
    budget: float | None = None
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("exec", "setsid", "nohup"):
            i += 1
        elif w == "timeout" and budget is None:
            i += 1
            while i < len(words) and words[i] in ("-s", "-k", "--foreground", "--preserve-status"):
                if words[i] in ("--foreground", "--preserve-status"):
                    return None  # changes the exit status: leave it to the real thing
                if words[i] == "-s" and (i + 1 >= len(words) or words[i + 1] not in _SIGNALS):
                    return None
                if words[i] == "-k" and (i + 1 >= len(words) or _duration(words[i + 1]) is None):
                    return None
                i += 2
            if i >= len(words):
                return None
            budget = _duration(words[i])
            if budget is None:
                return None
            i += 1
        else:
            break
    rest = words[i:]
    if len(rest) == 3 and rest[0] in ("/bin/sh", "sh") and rest[1] == "-c":
        script, check = _unguard(rest[2])
        inner_tokens = _tokens(script)
        inner = _plan(inner_tokens, depth + 1) if inner_tokens is not None else None
        if inner is None or (check is not None and inner.mark_check is not None):
            return None
        if budget is not None and inner.budget_s is not None:
            budget = min(budget, inner.budget_s)
        return Plan(
            inner.marker,
            inner.steps,
            budget if budget is not None else inner.budget_s,
            check or inner.mark_check,
        )
    step = _plain(rest)
    return None if step is None else Plan(None, (step,), budget)


_GUARD = re.compile(
    r"__fc_c=(.*?); "
    r'for __fc_m in "\$HOME/' + re.escape(MARK_PARENT) + r'/generation-([A-Za-z0-9_-]{1,64})"/\*; '
    r".*?-gt (\d+) \]; then .*; done; eval .*",
    re.DOTALL,
)


def _unguard(script: str) -> tuple[str, tuple[str, int] | None]:
    """``(command, (scope, generation))`` when ``script`` is exactly the watchdog's
    generation-mark check in front of the command it runs (``__fc_c=COMMAND; <check>;
    eval ...``); else ``(script, None)``."""
    m = _GUARD.fullmatch(script)
    if m is None:
        return script, None
    scope, generation = m.group(2), int(m.group(3))
    words = _tokens(m.group(1))
    if words is None or len(words) != 1:
        return script, None
    if guarded_command(words[0], generation, scope) != script:
        return script, None
    return words[0], (scope, generation)


def superseding_mark(home: str, scope: str, generation: int) -> int | None:
    """What the wrapper's check finds in ``home``: the first mark (in glob order) above
    ``generation``, or None."""
    directory = Path(home) / MARK_PARENT / f"generation-{scope}"
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return None
    for name in names:
        if name.isdigit() and int(name) > generation:
            return int(name)
    return None


def _plain(words: list[str]) -> tuple[str, str | float] | None:
    if words == ["true"]:
        return ("echo", "")
    if len(words) == 2 and words[0] == "sleep":
        seconds = _duration(words[1])
        return None if seconds is None else ("sleep", seconds)
    if words and words[0] == "echo":
        args = words[1:]
        if args[:1] == ["-n"] or any(set(a) & set("$`\\*?[]{}~'\"") for a in args):
            return None
        return ("echo", " ".join(args) + "\n")
    return None


# -- the delay line ------------------------------------------------------------------------


class DelayLine:
    """Calls queued in order, each no earlier than ``delay`` after it was queued."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay_s: float, loss: float) -> None:
        self._loop = loop
        self._delay_s = delay_s
        self._loss = loss
        self._queue: collections.deque[tuple[float, Callable[..., object], tuple[Any, ...]]] = (
            collections.deque()
        )
        self._timer: asyncio.TimerHandle | None = None
        self._last = 0.0

    def push(self, fn: Callable[..., object], *args: Any) -> None:
        if self._delay_s <= 0 and self._loss <= 0 and not self._queue:
            fn(*args)
            return
        due = self._loop.time() + self._delay_s
        if self._loss and random.random() < self._loss:
            due += RTO_S
        # In order: nothing overtakes a chunk held back (head-of-line blocking, as TCP).
        due = max(due, self._last)
        self._last = due
        self._queue.append((due, fn, args))
        if self._timer is None:
            self._timer = self._loop.call_at(due, self._run)

    def _run(self) -> None:
        self._timer = None
        now = self._loop.time()
        while self._queue and self._queue[0][0] <= now:
            _, fn, args = self._queue.popleft()
            fn(*args)
        if self._queue:
            self._timer = self._loop.call_at(self._queue[0][0], self._run)

    def clear(self) -> None:
        self._queue.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class _DelayedTransport(asyncio.Transport):
    """What the SSH server writes to: the real socket, behind a delay line."""

    def __init__(self, real: asyncio.Transport, line: DelayLine) -> None:
        super().__init__()
        self._real = real
        self._line = line
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._line.push(self._write_now, bytes(data))

    def _write_now(self, data: bytes) -> None:
        if not self._real.is_closing():
            self._real.write(data)

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._line.push(self._real.close)

    def abort(self) -> None:
        self._closing = True
        self._line.clear()
        self._real.abort()

    def is_closing(self) -> bool:
        return self._closing or self._real.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._real.get_extra_info(name, default)

    def can_write_eof(self) -> bool:
        return False

    def pause_reading(self) -> None:
        self._real.pause_reading()

    def resume_reading(self) -> None:
        self._real.resume_reading()

    def is_reading(self) -> bool:
        return self._real.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._real.get_write_buffer_size()


class _DelayedProtocol(asyncio.Protocol):
    """The socket's protocol: holds every inbound chunk for RTT/2 before the SSH server
    sees it; refuses connections above the MaxStartups-like limit."""

    def __init__(self, sim: Simulator, make_inner: Callable[[], asyncio.Protocol]) -> None:
        self._sim = sim
        self._make_inner = make_inner
        self._inner: asyncio.Protocol | None = None
        self._in: DelayLine | None = None
        self._out: DelayLine | None = None
        self.authenticated = False
        self.counted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sim = self._sim
        assert isinstance(transport, asyncio.Transport)
        if sim.max_startups is not None and sim.unauthenticated >= sim.max_startups:
            sim.counters["refused_startups"] += 1
            transport.close()  # as sshd does: no banner, the client sees the connection drop
            return
        sim.counters["connections"] += 1
        sim.connections_open += 1
        sim.unauthenticated += 1
        self.counted = True
        loop = asyncio.get_running_loop()
        half = sim.rtt_s / 2
        self._in = DelayLine(loop, half, sim.loss)
        self._out = DelayLine(loop, half, sim.loss)
        self._inner = self._make_inner()
        setattr(self._inner, "_fleet_sim_link", self)  # noqa: B010 - read by _Server
        self._inner.connection_made(_DelayedTransport(transport, self._out))

    def auth_done(self) -> None:
        if self.counted and not self.authenticated:
            self.authenticated = True
            self._sim.unauthenticated -= 1

    def data_received(self, data: bytes) -> None:
        if self._inner is not None and self._in is not None:
            self._in.push(self._inner.data_received, data)

    def eof_received(self) -> bool | None:
        if self._inner is not None and self._in is not None:
            self._in.push(self._inner.eof_received)
        return True  # keep our half open; the SSH layer closes when it is done

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.counted:
            return
        self.counted = False
        self._sim.connections_open -= 1
        if not self.authenticated:
            self._sim.unauthenticated -= 1
        assert self._in is not None and self._out is not None and self._inner is not None
        self._out.clear()
        inner = self._inner
        self._in.push(inner.connection_lost, exc)

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


class _Tunnel:
    """asyncssh's listener hook (``listen(tunnel=...)``): asyncssh hands us the factory of
    its server connections, we put the delay line between them and the socket."""

    def __init__(self, sim: Simulator, host: str) -> None:
        self._sim = sim
        self._host = host
        self.server: asyncio.Server | None = None

    async def create_server(
        self, session_factory: Callable[[str, int], asyncio.Protocol], host: str, port: int
    ) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: _DelayedProtocol(self._sim, lambda: session_factory("", 0)),
            self._host,
            port,
            backlog=4096,
            reuse_address=True,
        )
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def wait_closed(self) -> None:
        if self.server is not None:
            await self.server.wait_closed()


# -- the SSH side ----------------------------------------------------------------------------


class _Server(asyncssh.SSHServer):
    def __init__(self, sim: Simulator, index: int) -> None:
        self._sim = sim
        self._index = index
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn

    def auth_completed(self) -> None:
        self._sim.counters["authenticated"] += 1
        link = getattr(self._conn, "_fleet_sim_link", None)
        if link is not None:
            link.auth_done()

    def session_requested(self) -> asyncssh.SSHServerSession[bytes]:
        return _Session(self._sim, self._index)


class _Session(asyncssh.SSHServerSession[bytes]):
    def __init__(self, sim: Simulator, index: int) -> None:
        self._sim = sim
        self._index = index
        self._chan: asyncssh.SSHServerChannel[bytes] | None = None
        self._command: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._pgid: int | None = None
        self._stdin: list[bytes] = []
        self._stdin_eof = False
        sim.sessions_open += 1
        self._open = True

    def connection_made(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        self._chan = chan

    def shell_requested(self) -> bool:
        return False

    def exec_requested(self, command: str) -> bool:
        self._command = command
        return True

    def session_started(self) -> None:
        assert self._command is not None
        sim = self._sim
        sim.counters["execs"] += 1
        sim.execs_by_target[self._index] += 1
        what = classify(self._command)
        if isinstance(what, Kill):
            sim.counters["kills_simulated"] += 1
            victim = sim.simulated.get(what.pgid)
            if victim is not None:
                victim.cancel(what.signal)
            self._finish(0 if victim is not None else 1)
        elif isinstance(what, Plan):
            sim.counters["execs_simulated"] += 1
            self._task = asyncio.create_task(self._simulate(what))
        else:
            sim.counters["execs_real"] += 1
            self._task = asyncio.create_task(self._real(self._command))

    async def _simulate(self, plan: Plan) -> None:
        sim = self._sim
        pgid = sim.new_pgid()
        sim.simulated[pgid] = self
        self._pgid = pgid
        try:
            chan = self._chan
            assert chan is not None
            if plan.marker is not None:
                chan.write_stderr((plan.marker.replace("$$", str(pgid)) + "\n").encode())
            if plan.mark_check is not None:
                scope, generation = plan.mark_check
                mark = superseding_mark(sim.home, scope, generation)
                if mark is not None:
                    sim.counters["refused_superseded"] += 1
                    chan.write_stderr(
                        f"{SUPERSEDED_PREFIX}generation {generation} superseded by {mark}; "
                        "the command was not started\n".encode()
                    )
                    self._finish(SUPERSEDED_EXIT)
                    return
            try:
                async with asyncio.timeout(plan.budget_s):
                    for kind, value in plan.steps:
                        if kind == "sleep":
                            assert isinstance(value, float)
                            await asyncio.sleep(value)
                        else:
                            assert isinstance(value, str)
                            chan.write(value.encode())
            except TimeoutError:
                self._finish(124)  # coreutils timeout
            else:
                self._finish(0)
        except asyncio.CancelledError:
            self._finish_signal(self._killed_by or "KILL")
        finally:
            sim.simulated.pop(pgid, None)

    _killed_by: str | None = None

    def cancel(self, signame: str) -> None:
        self._killed_by = signame
        if self._task is not None:
            self._task.cancel()

    async def _real(self, command: str) -> None:
        sim = self._sim
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # as sshd: the shell's pid is the process group
                env=sim.session_env,
                cwd=sim.home,
            )
        except OSError as exc:
            sim.counters["spawn_errors"] += 1
            assert self._chan is not None
            self._chan.write_stderr(f"fleet_sim: cannot start /bin/sh: {exc}\n".encode())
            self._finish(127)
            return
        self._proc = proc
        sim.real[proc.pid] = proc
        try:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            for chunk in self._stdin:
                proc.stdin.write(chunk)
            if self._stdin_eof:
                proc.stdin.close()
            chan = self._chan
            assert chan is not None

            async def pump(stream: asyncio.StreamReader, write: Callable[[bytes], None]) -> None:
                while chunk := await stream.read(65536):
                    if not chan.is_closing():
                        write(chunk)

            await asyncio.gather(
                pump(proc.stdout, chan.write), pump(proc.stderr, chan.write_stderr)
            )
            code = await proc.wait()
        finally:
            sim.real.pop(proc.pid, None)
        if code < 0:
            names = {s.value: s.name.removeprefix("SIG") for s in signal.Signals}
            self._finish_signal(names.get(-code, "KILL"))
        else:
            self._finish(code)

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        proc = self._proc
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.write(data)
        elif proc is None:
            self._stdin.append(data)

    def eof_received(self) -> bool:
        self._stdin_eof = True
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()
        return True

    def signal_received(self, signal_name: str) -> None:
        if self._pgid is not None:
            self.cancel(signal_name)
        elif self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, AttributeError):
                self._proc.send_signal(getattr(signal, "SIG" + signal_name))

    def _finish(self, code: int) -> None:
        chan = self._chan
        if chan is not None and not chan.is_closing():
            chan.exit(code)
        self._closed()

    def _finish_signal(self, signame: str) -> None:
        chan = self._chan
        if chan is not None and not chan.is_closing():
            chan.exit_with_signal(signame)
        self._closed()

    def connection_lost(self, exc: Exception | None) -> None:
        # The client closed the channel: like sshd, leave the command running (a real
        # process gets EOF/EPIPE on its pipes, a simulated one runs its course).
        self._closed()

    def _closed(self) -> None:
        if self._open:
            self._open = False
            self._sim.sessions_open -= 1


# -- the server process ---------------------------------------------------------------------


@dataclass
class Simulator:
    """The server process's state: settings, counters and what is running."""

    rtt_s: float
    loss: float
    max_startups: int | None
    home: str
    counters: collections.Counter[str] = field(default_factory=collections.Counter)
    connections_open: int = 0
    unauthenticated: int = 0
    sessions_open: int = 0
    execs_by_target: list[int] = field(default_factory=list)
    simulated: dict[int, _Session] = field(default_factory=dict)
    real: dict[int, asyncio.subprocess.Process] = field(default_factory=dict)
    session_env: dict[str, str] = field(default_factory=dict)
    _next_pgid: int = FAKE_PGID_BASE

    def new_pgid(self) -> int:
        self._next_pgid += 1
        return self._next_pgid

    def stats(self) -> dict[str, Any]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            **{k: self.counters[k] for k in _COUNTERS},
            "connections_open": self.connections_open,
            "unauthenticated": self.unauthenticated,
            "sessions_open": self.sessions_open,
            "running_simulated": len(self.simulated),
            "running_real": len(self.real),
            "execs_by_target": list(self.execs_by_target),
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "children_cpu_s": kids.ru_utime + kids.ru_stime,
            "maxrss_mb": ru.ru_maxrss / 1024,
        }


_COUNTERS = (
    "connections",
    "authenticated",
    "refused_startups",
    "execs",
    "execs_simulated",
    "execs_real",
    "kills_simulated",
    "refused_superseded",
    "spawn_errors",
)


async def serve(config: dict[str, Any], ready_path: Path, control_path: Path) -> None:
    """Serve every target of ``config`` until SIGTERM or SIGINT."""
    limit = raise_fd_limit()
    if sys.version_info < (3, 12) and hasattr(asyncio, "PidfdChildWatcher"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            watcher = asyncio.PidfdChildWatcher()
            watcher.attach_loop(asyncio.get_running_loop())
            asyncio.set_child_watcher(watcher)
    home = Path(config["home"])
    home.mkdir(parents=True, exist_ok=True)
    sim = Simulator(
        rtt_s=config["rtt_ms"] / 1000,
        loss=config["loss"],
        max_startups=config.get("max_startups"),
        home=str(home),
        execs_by_target=[0] * len(config["targets"]),
        session_env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "USER": config["user"],
            "LOGNAME": config["user"],
            "SHELL": "/bin/sh",
            "LANG": "C.UTF-8",
        },
    )
    tunnels: list[_Tunnel] = []
    ports: list[int] = []
    for index, t in enumerate(config["targets"]):
        tunnel = _Tunnel(sim, t["host"])
        await asyncssh.listen(
            t["host"],
            t.get("port", 0),
            tunnel=tunnel,
            server_factory=lambda i=index: _Server(sim, i),
            server_host_keys=[asyncssh.import_private_key(t["host_private_key"])],
            authorized_client_keys=asyncssh.import_authorized_keys(t["client_public_key"]),
            encoding=None,
            allow_pty=True,  # Ansible asks for one (ssh -tt); no pty is really made
            agent_forwarding=False,
            x11_forwarding=False,
            login_timeout=120,
            keepalive_interval=0,
        )
        assert tunnel.server is not None
        ports.append(tunnel.server.sockets[0].getsockname()[1])
        tunnels.append(tunnel)

    async def control(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while line := await reader.readline():
                if line.strip() == b"stats":
                    writer.write(json.dumps(sim.stats()).encode() + b"\n")
                    await writer.drain()
        writer.close()

    control_server = await asyncio.start_unix_server(control, str(control_path))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tmp = ready_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"ports": ports, "pid": os.getpid(), "fd_limit": limit}))
    tmp.rename(ready_path)
    try:
        await stop.wait()
    finally:
        control_server.close()
        for tunnel in tunnels:
            tunnel.close()
        # Anything still running is ours: end it (by process group, as it was started).
        for pid in list(sim.real):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for session in list(sim.simulated.values()):
            session.cancel("KILL")
        await asyncio.sleep(0)


# -- the client-side handle -------------------------------------------------------------------


@dataclass(frozen=True)
class SimTarget:
    """One simulated target as a client sees it."""

    name: str
    host: str
    port: int
    user: str
    host_key: str  # "ssh-ed25519 AAAA..." (what fleetcron pins)
    client_key: str  # the client's private key, OpenSSH format


class SimControl:
    """A connection to a running simulator's control socket (any process may open one);
    given several paths joined by ``os.pathsep`` (a :class:`FleetSims`), one to each, their
    counters added up."""

    def __init__(self, path: str | Path) -> None:
        self._socks: list[tuple[socket.socket, Any]] = []
        for one in str(path).split(os.pathsep):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(one)
            self._socks.append((sock, sock.makefile("rb")))

    def stats(self) -> dict[str, Any]:
        """The server processes' counters now (see :meth:`Simulator.stats`), added up
        (``execs_by_target`` in target order, ``maxrss_mb`` the largest)."""
        parts = []
        for sock, file in self._socks:
            sock.sendall(b"stats\n")
            line = file.readline()
            if not line:
                raise RuntimeError("the fleet simulator closed its control socket")
            parts.append(json.loads(line))
        return merged_stats(parts)

    def close(self) -> None:
        for sock, file in self._socks:
            file.close()
            sock.close()


def merged_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several simulator processes' counters as one's."""
    result: dict[str, Any] = dict(parts[0])
    for part in parts[1:]:
        for key, value in part.items():
            if key == "maxrss_mb":
                result[key] = max(result[key], value)
            else:
                result[key] = result[key] + value
    return result


class FleetSim:
    """Starts the simulator in its own process; a context manager.

    Args:
        targets: how many targets.
        rtt_ms: round-trip time every connection sees (half each way).
        loss: probability that a chunk is held an extra 200 ms (a retransmission).
        max_startups: refuse connections above this many unauthenticated ones at once.
        work_dir: where keys and the spec go (a temporary directory if None, removed on
            exit). The control socket goes to a short directory of its own in the
            temporary directory: a socket's path is limited to 107 bytes, which a test's
            ``tmp_path`` with a long name can exceed.
        host: the loopback address every target listens on (one port each).
    """

    def __init__(
        self,
        targets: int,
        *,
        rtt_ms: float = 0.0,
        loss: float = 0.0,
        max_startups: int | None = None,
        work_dir: Path | None = None,
        host: str = "127.0.0.1",
        name_format: str = "sim{:04d}",
    ) -> None:
        if targets < 1:
            raise ValueError(f"targets must be at least 1, got {targets}")
        if rtt_ms < 0:
            raise ValueError(f"rtt_ms must be >= 0, got {rtt_ms}")
        if not 0 <= loss < 1:
            raise ValueError(f"loss must be in [0, 1), got {loss}")
        self.n = targets
        self.rtt_ms = rtt_ms
        self.loss = loss
        self.max_startups = max_startups
        self.host = host
        self._name_format = name_format
        self._own_dir = work_dir is None
        self.work_dir = (
            Path(tempfile.mkdtemp(prefix="fleet-sim-")) if work_dir is None else work_dir
        )
        self.targets: list[SimTarget] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self._control: SimControl | None = None
        self.control_path: Path | None = None
        self._socket_dir: Path | None = None

    def __enter__(self) -> FleetSim:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout_s: float = 120.0) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        user = _user()
        host_keys = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(self.n)]
        client_keys = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(self.n)]
        config = {
            "rtt_ms": self.rtt_ms,
            "loss": self.loss,
            "max_startups": self.max_startups,
            "user": user,
            "home": str(self.work_dir / "home"),
            "targets": [
                {
                    "host": self.host,
                    "host_private_key": h.export_private_key("openssh").decode(),
                    "client_public_key": c.export_public_key("openssh").decode(),
                }
                for h, c in zip(host_keys, client_keys, strict=True)
            ],
        }
        config_path = self.work_dir / "sim-config.json"
        config_path.touch(0o600)
        config_path.write_text(json.dumps(config))
        ready = self.work_dir / "ready.json"
        self._socket_dir = Path(tempfile.mkdtemp(prefix="fleet-sim-sock-"))
        control = self._socket_dir / "control.sock"
        ready.unlink(missing_ok=True)
        log = open(self.work_dir / "sim.log", "wb")  # noqa: SIM115 - closed below
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "serve",
                    "--config",
                    str(config_path),
                    "--ready",
                    str(ready),
                    "--control",
                    str(control),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"fleet simulator exited with {self.proc.returncode}:\n"
                    + (self.work_dir / "sim.log").read_text()[-4000:]
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"fleet simulator not ready after {timeout_s:g} s")
            time.sleep(0.05)
        ports = json.loads(ready.read_text())["ports"]
        self.targets = [
            SimTarget(
                name=self._name_format.format(i),
                host=self.host,
                port=port,
                user=user,
                host_key=" ".join(h.export_public_key("openssh").decode().split()[:2]),
                client_key=c.export_private_key("openssh").decode(),
            )
            for i, (h, c, port) in enumerate(zip(host_keys, client_keys, ports, strict=True))
        ]
        self.control_path = control
        self._control = SimControl(control)

    def stats(self) -> dict[str, Any]:
        """The server process's counters now (see :meth:`Simulator.stats`)."""
        assert self._control is not None, "not started"
        return self._control.stats()

    def wait_idle(self, timeout_s: float = 60.0, connections: bool = True) -> dict[str, Any]:
        """Wait until no command runs and no session (and, by default, no connection) is
        open; returns the stats then. Raises TimeoutError with the stats if not."""
        deadline = time.monotonic() + timeout_s
        while True:
            s = self.stats()
            busy = s["running_simulated"] + s["running_real"] + s["sessions_open"]
            if connections:
                busy += s["connections_open"]
            if not busy:
                return s
            if time.monotonic() > deadline:
                raise TimeoutError(f"fleet simulator still busy: {s}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def spec(self) -> dict[str, Any]:
        """The targets as plain data (for a benchmark's child process)."""
        return {
            "targets": [asdict(t) for t in self.targets],
            "rtt_ms": self.rtt_ms,
            "control": str(self.control_path),
        }


class FleetSims:
    """N targets served by ``processes`` simulators side by side, each with a share (its
    own process, so its own open-file limit and core): one process holds a listening
    socket and an accepted connection per target, so past about half the hard open-file
    limit the targets need more than one. The same interface as :class:`FleetSim`."""

    def __init__(self, targets: int, *, processes: int, work_dir: Path, **kwargs: Any) -> None:
        if not 1 <= processes <= targets:
            raise ValueError(f"processes must be in [1, {targets}], got {processes}")
        shares = [targets // processes + (k < targets % processes) for k in range(processes)]
        width = len(str(targets))
        self.sims = [
            FleetSim(
                share,
                work_dir=work_dir / f"sim{k}",
                name_format=f"sim{k}-{{:0{width}d}}",
                **kwargs,
            )
            for k, share in enumerate(shares)
        ]
        self.targets: list[SimTarget] = []
        self._control: SimControl | None = None

    def __enter__(self) -> FleetSims:
        try:
            for sim in self.sims:
                sim.start()
        except BaseException:
            self.stop()
            raise
        self.targets = [t for sim in self.sims for t in sim.targets]
        self._control = SimControl(self.control_path)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def control_path(self) -> str:
        return os.pathsep.join(str(sim.control_path) for sim in self.sims)

    def stats(self) -> dict[str, Any]:
        assert self._control is not None, "not started"
        return self._control.stats()

    def wait_idle(self, timeout_s: float = 60.0, connections: bool = True) -> dict[str, Any]:
        return merged_stats([sim.wait_idle(timeout_s, connections) for sim in self.sims])

    def stop(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        for sim in self.sims:
            sim.stop()

    def spec(self) -> dict[str, Any]:
        return {
            "targets": [asdict(t) for t in self.targets],
            "rtt_ms": self.sims[0].rtt_ms,
            "control": self.control_path,
        }


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


async def connect(target: SimTarget, **kwargs: Any) -> asyncssh.SSHClientConnection:
    """An asyncssh client connection to ``target`` with its pinned host key and own key."""
    return await asyncssh.connect(
        target.host,
        target.port,
        username=target.user,
        client_keys=[asyncssh.import_private_key(target.client_key)],
        known_hosts=([asyncssh.import_public_key(target.host_key)], [], []),
        config=None,
        agent_path=None,
        **kwargs,
    )


async def measure_rtt(target: SimTarget, samples: int = 5) -> dict[str, float]:
    """What a client sees, each the minimum over ``samples``: the handshake (TCP connect,
    key exchange, authentication), an SSH global request and its reply (one round trip;
    asyncssh's internal ``_make_global_request``, as its keepalives use) and ``true`` over
    the open connection (channel open, exec request, exit: two round trips)."""
    t0 = time.perf_counter()
    conn = await connect(target)
    handshake = time.perf_counter() - t0
    pings, execs = [], []
    async with conn:
        for _ in range(samples):
            t1 = time.perf_counter()
            await conn._make_global_request(b"fleet-sim-ping@fleetcron")
            pings.append(time.perf_counter() - t1)
        for _ in range(samples):
            t1 = time.perf_counter()
            result = await conn.run("true", check=False)
            execs.append(time.perf_counter() - t1)
            if result.exit_status != 0:
                raise RuntimeError(f"`true` on {target.name} exited {result.exit_status}")
    return {
        "handshake_ms": handshake * 1000,
        "round_trip_ms": min(pings) * 1000,
        "exec_true_ms": min(execs) * 1000,
    }


@contextlib.contextmanager
def running(targets: int, **kwargs: Any) -> Iterator[FleetSim]:
    """``with running(300, rtt_ms=50) as sim:``: a started :class:`FleetSim`."""
    with FleetSim(targets, **kwargs) as sim:
        yield sim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="(internal) the server process")
    s.add_argument("--config", required=True)
    s.add_argument("--ready", required=True)
    s.add_argument("--control", required=True)
    c = sub.add_parser("check", help="start a simulator and measure the round trip")
    c.add_argument("--targets", type=int, default=5)
    c.add_argument("--rtt-ms", type=float, default=100.0)
    c.add_argument("--loss", type=float, default=0.0)
    args = parser.parse_args()
    if args.cmd == "serve":
        config = json.loads(Path(args.config).read_text())
        asyncio.run(serve(config, Path(args.ready), Path(args.control)))
        return
    with FleetSim(args.targets, rtt_ms=args.rtt_ms, loss=args.loss) as sim:
        for t in sim.targets[:3]:
            m = asyncio.run(measure_rtt(t))
            print(
                f"{t.name} {t.host}:{t.port}: configured RTT {args.rtt_ms:g} ms, "
                f"measured round trip {m['round_trip_ms']:.1f} ms, "
                f"`true` {m['exec_true_ms']:.1f} ms (2 round trips), "
                f"handshake {m['handshake_ms']:.1f} ms"
            )
        print(json.dumps({k: v for k, v in sim.stats().items() if k != "execs_by_target"}))


if __name__ == "__main__":
    main()
