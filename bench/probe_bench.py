"""Cost of the host probe at fleet scale: CPU seconds and connections per minute.

The fleet: ``--targets`` SSH targets (default 5,000) in a SQLite database, each with its own
encrypted client key copy and the pinned host key, all pointing at one small asyncssh
server on loopback that runs in a separate process (so its CPU is not counted as the
prober's; it is reported beside). Every target is due, so one round is what the scheduler
does over one probe interval (default 5 minutes: 1,000 connections a minute).

Measured in the prober's process with ``getrusage`` (user + sys CPU, not wall time: the
machine is shared), three ways of checking that a new connection works:

- ``fleetcron probe round``: ``HostProber.round`` as the scheduler runs it: read the due
  targets, decrypt their keys, fresh connection with the pinned host key and a public-key
  login at most ``--concurrency`` at once (default 50, ``probe_concurrency``), record the
  states;
- ``bare asyncssh connect``: the same connections in a loop with nothing around them (keys
  already decrypted, no database): what the probe adds over the SSH library;
- ``ssh-keyscan`` per target (what a shell script would do; key exchange only, no login,
  one process per target), on ``--keyscan`` targets (default 300), CPU of the children.

Also measured: the rounds between probes, which read every target's last probe to find
the due ones (30 per interval at the default: one every 10 s), when none is due.

Run by hand: ``.venv/bin/python bench/probe_bench.py [--targets 5000] [--concurrency 50]
[--keyscan 300] [--scan-only]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import func, insert, select

from _common import core_table, loadavg, make_app, table, work_dir
from fleetcron.app import App
from fleetcron.core.reach import Reach
from fleetcron.scheduler.probes import HostProber
from fleetcron.store.schema import Target

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
INTERVAL_S = 300.0


# -- the simulated fleet's server --------------------------------------------------------


async def serve(directory: Path) -> None:
    """An asyncssh server on 127.0.0.1 accepting the client key for any user; prints its
    port, then serves until stdin closes."""
    import asyncssh  # after fleetcron, whose warnings filter it needs

    host_key = asyncssh.read_private_key(directory / "host_key")
    authorized = asyncssh.import_authorized_keys((directory / "client_key.pub").read_text())
    server = await asyncssh.create_server(
        asyncssh.SSHServer,
        "127.0.0.1",
        0,
        server_host_keys=[host_key],
        authorized_client_keys=authorized,
        backlog=1024,
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    host_key_line: str
    client_key: bytes

    def cpu_s(self) -> float:
        """The server's CPU so far (user + sys), from /proc."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(directory: Path) -> Server:
    import asyncssh

    host = asyncssh.generate_private_key("ssh-ed25519")
    host.write_private_key(directory / "host_key")
    client = asyncssh.generate_private_key("ssh-ed25519")
    client.write_public_key(directory / "client_key.pub")
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return Server(
        proc,
        port,
        host.export_public_key().decode().strip(),
        client.export_private_key(),
    )


# -- measuring ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    name: str
    connections: int
    cpu_s: float
    wall_s: float
    server_cpu_s: float
    reachable: int

    def row(self) -> list[object]:
        per = self.cpu_s / self.connections * 1000
        per_minute = 5000 / (INTERVAL_S / 60)  # default interval at 5,000 targets
        return [
            self.name,
            self.connections,
            self.reachable,
            f"{self.cpu_s:.2f}",
            f"{per:.2f}",
            f"{self.connections / self.wall_s * 60:,.0f}",
            f"{per * per_minute / 1000:.2f}",
            f"{per * per_minute / 1000 / 60 * 100:.1f} %",
            f"{self.server_cpu_s:.2f}",
        ]


def cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def measured(
    name: str, server: Server, run: Callable[[], Awaitable[tuple[int, int]]]
) -> Measure:
    """Run ``run`` (it answers how many connections it made and how many reached the
    server) and measure it."""
    cpu0, children0, server0, wall0 = (
        cpu(),
        cpu(resource.RUSAGE_CHILDREN),
        server.cpu_s(),
        time.monotonic(),
    )
    connections, reachable = await run()
    wall = time.monotonic() - wall0
    used = cpu() - cpu0 + cpu(resource.RUSAGE_CHILDREN) - children0
    return Measure(name, connections, used, wall, server.cpu_s() - server0, reachable)


# -- the three ways ----------------------------------------------------------------------


def fill(app: App, server: Server, n: int) -> None:
    """``n`` SSH targets on the server, each key encrypted on its own (as pairing stores
    it), none probed yet."""
    now = NOW - timedelta(days=1)
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(core_table(Target)),
            [
                {
                    "id": i + 1,
                    "name": f"host{i:05d}",
                    "kind": "ssh",
                    "host": "127.0.0.1",
                    "port": server.port,
                    "user": "bench",
                    "private_key_enc": app.master_key.encrypt(server.client_key),
                    "host_key": server.host_key_line,
                    "paired": True,
                    "labels": {},
                    "notes": "",
                    "created_at": now,
                    "updated_at": now,
                }
                for i in range(n)
            ],
        )


async def probe_round(app: App) -> tuple[int, int]:
    """Rounds at NOW until none is due (a round takes at most ``ROUND_MAX`` targets)."""
    prober = HostProber(
        app,
        lambda token: app.master_key.decrypt(token).reveal(),
        lambda: NOW,
        started_at=NOW - timedelta(seconds=INTERVAL_S),  # every target's slot has passed
    )
    probed = 0
    while made := await prober.round(NOW):
        probed += made
    with app.db.read() as session:
        reachable = session.scalar(
            select(func.count()).select_from(Target).where(Target.reach == Reach.REACHABLE)
        )
    return probed, int(reachable or 0)


async def bare_connects(server: Server, n: int, concurrency: int) -> tuple[int, int]:
    import asyncssh

    key = asyncssh.import_private_key(server.client_key)
    pinned = asyncssh.import_public_key(server.host_key_line)
    gate = asyncio.Semaphore(concurrency)

    async def one() -> int:
        async with gate:
            conn = await asyncssh.connect(
                "127.0.0.1",
                server.port,
                username="bench",
                client_keys=[key],
                known_hosts=([pinned], [], []),
                config=None,
                agent_path=None,
                preferred_auth="publickey",
            )
            conn.close()
            await conn.wait_closed()
            return 1

    return n, sum(await asyncio.gather(*(one() for _ in range(n))))


async def keyscans(server: Server, n: int, concurrency: int) -> tuple[int, int]:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> int:
        async with gate:
            proc = await asyncio.create_subprocess_exec(
                "ssh-keyscan",
                "-t",
                "ed25519",
                "-p",
                str(server.port),
                "127.0.0.1",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await proc.communicate()
            return 1 if b"ssh-ed25519" in out else 0

    return n, sum(await asyncio.gather(*(one() for _ in range(n))))


def due_scans(app: App, rounds: int) -> float:
    """CPU seconds of ``rounds`` reads of the due targets when none is due (every target
    was probed at NOW): what the rounds between probes cost."""
    from fleetcron.services.targets.reach import due_probes

    with app.db.engine.begin() as conn:
        conn.execute(core_table(Target).update().values(reach="reachable", reach_at=NOW))
    started = cpu()
    for _ in range(rounds):
        assert due_probes(app, NOW, interval_s=INTERVAL_S) == []
    return cpu() - started


async def bench(args: argparse.Namespace) -> list[Measure]:
    directory = work_dir("fleetcron-probe-bench-")
    server = start_server(directory)
    try:
        app = make_app(
            f"sqlite:///{directory / 'bench.db'}",
            directory / "data",
            lambda: NOW,
            probe_interval_s=INTERVAL_S,
            probe_concurrency=args.concurrency,
            probe_timeout_s=30.0,
        )
        fill(app, server, args.targets)
        rounds = round(INTERVAL_S / 10)
        print(
            f"reading the due targets when none is due, {rounds} rounds (one interval's "
            f"worth at {args.targets} targets): {due_scans(app, rounds):.2f} CPU s"
        )
        if args.scan_only:
            app.close()
            return []
        with app.db.engine.begin() as conn:
            conn.execute(core_table(Target).update().values(reach=None, reach_at=None))
        results = [
            await measured("fleetcron probe rounds", server, functools.partial(probe_round, app)),
            await measured(
                "bare asyncssh connect",
                server,
                functools.partial(bare_connects, server, args.targets, args.concurrency),
            ),
        ]
        if args.keyscan and shutil.which("ssh-keyscan"):
            results.append(
                await measured(
                    "ssh-keyscan per target",
                    server,
                    functools.partial(keyscans, server, args.keyscan, args.concurrency),
                )
            )
        app.close()
        return results
    finally:
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        server.proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--keyscan", type=int, default=300)
    parser.add_argument("--scan-only", action="store_true", help="only the reads of due targets")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.serve))
        return
    print(f"load average before: {loadavg()}")
    results = asyncio.run(bench(args))
    print(f"load average after: {loadavg()}")
    if not results:
        return
    print(
        table(
            [
                "method",
                "connections",
                "reachable",
                "CPU s",
                "CPU ms / connection",
                "connections / min (wall)",
                "CPU s / min at 5,000 targets / 5 min",
                "of one core",
                "server CPU s",
            ],
            [m.row() for m in results],
        )
    )


if __name__ == "__main__":
    main()
