"""Fan-out: one bulk job on 200 SSH targets, against the usual hand-rolled designs.

One throwaway OpenSSH sshd on 127.0.0.1 (the test fixture's ``running_sshd``, with
``MaxStartups 1000:30:1000`` and ``MaxSessions 1000``) stands for 200 servers. Each of the
200 targets has its own client key, so each needs its own connection and handshake:
fleetcron pools connections by (host, port, user, client key, host key), and the same
200 keys are used by every design. (Distinct addresses would not work: sshd opens at most
16 listen sockets, ``MAX_LISTEN_SOCKS``, and listening on 0.0.0.0 would leave loopback.)

The sshd sets ``HOME`` to an empty directory for sessions (``SetEnv HOME=...``): on this
machine root's login shell is bash, which sources ``~/.bashrc`` for commands started by
sshd, and that file runs ``pyenv init`` (about 100 ms of CPU per session, for every
design alike). ``--login-rc`` keeps the real HOME to show that cost.

Designs, each run in its own process so peak memory is its own, one after the other
(the sshd is left with no session process between two designs):

* ``fleetcron``: a real ``Scheduler``, built as ``fleetcron serve`` builds a standalone one
  (housekeeping, Prometheus metrics), on SQLite in a temporary directory, 200 SSH targets
  and a bulk job ``* * * * *``, the product's defaults (``SshExecutor``: 64 runs in
  flight, 4 per target, 16 handshakes at a time), INFO log lines formatted as in
  ``fleetcron serve`` but written to /dev/null. One ``tick()`` at the minute (the real
  clock shifted to read M + 0 s), then ``await scheduler.idle()``: from the fire to all
  200 runs recorded in the database. The second fire (the next minute) reuses the pooled
  connections.
* ``paramiko-8`` / ``paramiko-64``: a thread pool of 8 / 64; each task connects (pinned
  host key), runs the command, reads its output and exit status, closes.
* ``asyncssh-64``: asyncssh with a semaphore of 64 (pinned host key): connect, run, keep
  the connection; the second round runs the command again over the open connections.
* ``pssh-64``: parallel-ssh's ``ParallelSSHClient`` (libssh2), ``pool_size=64``;
  ``run_command`` then ``join``. (It does not check host keys.)
* ``asyncssh-64-hs16`` (not run by default): ``asyncssh-64`` with at most 16 handshakes
  at a time, as fleetcron's executor does.
* ``fleetcron-followed`` (not run by default): ``fleetcron`` with a follower of every run
  in flight, as a run page open on each: once a second, on a thread of its own (as the web
  app's request threads), ``services.runs.follow_output`` of each live run from its last
  offset (a read of the run row and of the run's live buffer). Its polls are counted.

``--breakdown`` also decomposes a reuse round: ``echo hi`` over 200 already-open
connections, adding fleetcron's pieces one at a time (its ``FLEETCRON_*`` variables sent as
SSH env requests, its process-group wrapper, then ``SshExecutor.run`` itself).

All runs must succeed (and ``echo hi`` must print ``hi``) or the script stops. Client CPU
is the design's process user+sys time over the timed section divided by 200, and in
parentheses the event-loop thread's own share (``time.thread_time``); for fleetcron the
database thread's CPU per fire is printed below the table. Peak
memory is the process's ``ru_maxrss`` (interpreter and imports included); each design's
process is forked by a small ``sh``, as Linux carries the forking process's RSS into a
child's ``ru_maxrss``, even across ``exec``.

Run by hand: ``.venv/bin/python bench/fanout_bench.py [--targets 200]
[--commands "echo hi,sleep 1"] [--designs fleetcron,paramiko-8,...] [--repeat 1]
[--breakdown] [--login-rc]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Usage, loadavg, median, table, wait_for_no_children, work_dir

DESIGNS = ("fleetcron", "paramiko-8", "paramiko-64", "asyncssh-64", "pssh-64")
# Also available: asyncssh-64-hs16 (asyncssh-64 with at most 16 handshakes at a time, as
# fleetcron's executor does).
CAP = 64


def rss_mb() -> float:
    """This process's resident memory now (VmRSS), in MB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def check(outputs: list[tuple[int | None, str]], command: str) -> None:
    """Every run exited 0, and ``echo hi`` printed hi."""
    bad = [o for o in outputs if o[0] != 0 or (command == "echo hi" and o[1].strip() != "hi")]
    if bad:
        raise SystemExit(f"{len(bad)} of {len(outputs)} runs failed; first: {bad[0]}")


# -- the designs, each run in a child process -------------------------------------------


def run_fleetcron(spec: dict[str, Any], command: str, followed: bool = False) -> dict[str, Any]:
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import insert, select

    from _common import (
        ShiftedClock,
        core_table,
        make_app,
        production_scheduler,
        quiet_production_logging,
        work_dir,
    )
    from fleetcron.app import SYSTEM
    from fleetcron.scheduler.service import Scheduler
    from fleetcron.services.jobs import edit as jobs
    from fleetcron.services.runs import reads as runs_svc
    from fleetcron.store.schema import Run, Target

    quiet_production_logging()
    minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    clock = ShiftedClock(minute - timedelta(seconds=30))
    data_dir = work_dir("fleetcron-fanout-")
    app = make_app(f"sqlite:///{data_dir / 'fleetcron.db'}", data_dir, clock=clock)
    now = clock()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(core_table(Target)),
            [
                {
                    "name": f"web{i:03d}",
                    "kind": "ssh",
                    "host": spec["host"],
                    "port": spec["port"],
                    "user": spec["user"],
                    "private_key_enc": app.master_key.encrypt(key.encode()),
                    "host_key": spec["host_key"],
                    "labels": {"role": "web"},
                    "notes": "",
                    "paired": True,
                    "paired_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
                for i, key in enumerate(spec["keys"])
            ],
        )
    jobs.add_job(app, SYSTEM, "fanout", jobs.JobSpec("* * * * *", command), bulk=True)

    async def fire(scheduler: Scheduler, at: datetime) -> tuple[float, Usage, Usage, float]:
        db0 = await scheduler._in_db(time.thread_time)  # the database thread's own CPU
        u0 = Usage.now()
        clock.restart(at)
        t0 = time.perf_counter()
        stats = await scheduler.tick()
        await scheduler.idle()
        elapsed = time.perf_counter() - t0
        u1 = Usage.now()
        db_cpu = await scheduler._in_db(time.thread_time) - db0
        assert stats.dispatched == len(spec["keys"]), stats
        with app.db.read() as session:
            rows = session.execute(
                select(Run.exit_code, Run.stdout_head).where(Run.scheduled_for == at)
            ).all()
        check([(r.exit_code, r.stdout_head) for r in rows], command)
        if len(rows) != len(spec["keys"]):
            raise SystemExit(f"{len(rows)} runs recorded")
        return elapsed, u0, u1, db_cpu

    polls = 0

    async def follow(scheduler: Scheduler, stop: asyncio.Event) -> None:
        """A run page open on every run in flight: one poll of each per second."""
        nonlocal polls
        offsets: dict[int, int] = {}

        def poll_all() -> None:
            nonlocal polls
            for run_id in list(scheduler.running):
                view = runs_svc.follow_output(
                    app, SYSTEM, run_id, offsets.get(run_id, 0), live=scheduler.live
                )
                offsets[run_id] = view.offset
                polls += 1

        while not stop.is_set():
            await asyncio.to_thread(poll_all)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    async def main() -> dict[str, Any]:
        scheduler: Scheduler = production_scheduler(app)
        await scheduler.start()
        stop = asyncio.Event()
        follower = asyncio.create_task(follow(scheduler, stop)) if followed else None
        assert scheduler.maintenance is not None
        await scheduler._in_db(scheduler.maintenance)  # its first round, as serve() would have
        before = rss_mb()
        first, u0, u1, first_db = await fire(scheduler, minute)
        opened = scheduler.ssh.connections_opened  # type: ignore[union-attr]
        second, v0, v1, second_db = await fire(scheduler, minute + timedelta(minutes=1))
        reopened = scheduler.ssh.connections_opened - opened  # type: ignore[union-attr]
        stop.set()
        if follower is not None:
            await follower
        await scheduler.shutdown()
        note = f"{opened} connections, {reopened} more on reuse"
        return {
            "first_s": first,
            "first_cpu_s": u1.cpu_s - u0.cpu_s,
            "first_loop_cpu_s": u1.thread_s - u0.thread_s,
            "first_db_cpu_s": first_db,
            "second_s": second,
            "second_cpu_s": v1.cpu_s - v0.cpu_s,
            "second_loop_cpu_s": v1.thread_s - v0.thread_s,
            "second_db_cpu_s": second_db,
            "note": note + (f"; {polls} follower polls" if followed else ""),
            "rss_before_mb": before,
        }

    try:
        return asyncio.run(main())
    finally:
        app.close()


def run_paramiko(spec: dict[str, Any], command: str, workers: int) -> dict[str, Any]:
    import base64
    import io
    from concurrent.futures import ThreadPoolExecutor

    import paramiko

    kind, blob = spec["host_key"].split()
    pinned = paramiko.Ed25519Key(data=base64.b64decode(blob))
    known = f"[{spec['host']}]:{spec['port']}"

    def one(key_text: str) -> tuple[int | None, str]:
        client = paramiko.SSHClient()
        client.get_host_keys().add(known, kind, pinned)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                spec["host"],
                spec["port"],
                username=spec["user"],
                pkey=paramiko.Ed25519Key.from_private_key(io.StringIO(key_text)),
                allow_agent=False,
                look_for_keys=False,
                timeout=60,
                banner_timeout=60,
                auth_timeout=60,
            )
            _, stdout, stderr = client.exec_command(command)
            out = stdout.read().decode()
            stderr.read()
            return stdout.channel.recv_exit_status(), out
        finally:
            client.close()

    before = rss_mb()
    u0 = Usage.now()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outputs = list(pool.map(one, spec["keys"]))
    elapsed = time.perf_counter() - t0
    u1 = Usage.now()
    check(outputs, command)
    return {"first_s": elapsed, "first_cpu_s": u1.cpu_s - u0.cpu_s, "rss_before_mb": before}


async def open_asyncssh(spec: dict[str, Any], key_text: str) -> Any:
    """One asyncssh connection with the pinned host key, as a hand-rolled client makes it."""
    import asyncssh

    return await asyncssh.connect(
        spec["host"],
        spec["port"],
        username=spec["user"],
        client_keys=[asyncssh.import_private_key(key_text)],
        known_hosts=([asyncssh.import_public_key(spec["host_key"])], [], []),
        config=None,
        agent_path=None,
        connect_timeout=60,
    )


def run_asyncssh(spec: dict[str, Any], command: str, handshakes: int = CAP) -> dict[str, Any]:
    import asyncssh  # noqa: F401 - imported before the timed section, as the others are

    async def main() -> dict[str, Any]:
        slots = asyncio.Semaphore(CAP)
        connecting = asyncio.Semaphore(handshakes)

        async def connect_and_run(key_text: str) -> tuple[Any, tuple[int | None, str]]:
            async with slots:
                async with connecting:
                    conn = await open_asyncssh(spec, key_text)
                result = await conn.run(command, check=False)
                return conn, (result.exit_status, str(result.stdout))

        async def run_again(conn: Any) -> tuple[int | None, str]:
            async with slots:
                result = await conn.run(command, check=False)
                return result.exit_status, str(result.stdout)

        before = rss_mb()
        u0 = Usage.now()
        t0 = time.perf_counter()
        pairs = await asyncio.gather(*(connect_and_run(k) for k in spec["keys"]))
        first = time.perf_counter() - t0
        u1 = Usage.now()
        check([p[1] for p in pairs], command)
        conns = [p[0] for p in pairs]
        v0 = Usage.now()
        t0 = time.perf_counter()
        outputs = await asyncio.gather(*(run_again(c) for c in conns))
        second = time.perf_counter() - t0
        v1 = Usage.now()
        check(outputs, command)
        for conn in conns:
            conn.close()
        await asyncio.gather(*(c.wait_closed() for c in conns))
        return {
            "first_s": first,
            "first_cpu_s": u1.cpu_s - u0.cpu_s,
            "first_loop_cpu_s": u1.thread_s - u0.thread_s,
            "second_s": second,
            "second_cpu_s": v1.cpu_s - v0.cpu_s,
            "second_loop_cpu_s": v1.thread_s - v0.thread_s,
            "rss_before_mb": before,
        }

    return asyncio.run(main())


def run_breakdown(spec: dict[str, Any], rounds: int = 5) -> dict[str, Any]:
    """Where a reuse round's time goes: ``echo hi`` over already-open connections, adding
    fleetcron's pieces one at a time (median of ``rounds``)."""
    from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
    from fleetcron.executors.ssh import wrap_command

    env = {
        "FLEETCRON_RUN_ID": "12345",
        "FLEETCRON_NODE": "scheduler-1",
        "FLEETCRON_JOB": "fanout",
        "FLEETCRON_TARGET": "web000",
        "FLEETCRON_SCHEDULED_FOR": "2026-03-02T09:30:00+00:00",
    }

    async def main() -> dict[str, Any]:
        conns = await asyncio.gather(*(open_asyncssh(spec, k) for k in spec["keys"]))
        targets = [
            SshTarget(f"web{i:03d}", spec["host"], spec["port"], spec["user"], k, spec["host_key"])
            for i, k in enumerate(spec["keys"])
        ]
        executor = SshExecutor()
        await asyncio.gather(*(executor.run(t, ExecRequest("true")) for t in targets))
        slots = asyncio.Semaphore(CAP)

        def over_conn(line: str, with_env: bool) -> Any:
            async def one(i: int) -> tuple[int | None, str]:
                async with slots:
                    r = await conns[i].run(line, env=env if with_env else {}, check=False)
                    return r.exit_status, str(r.stdout)

            return one

        async def through_executor(i: int) -> tuple[int | None, str]:
            r = await executor.run(targets[i], ExecRequest("echo hi", env=env))
            return r.exit_code, r.stdout.text

        steps = [
            ("asyncssh `conn.run`", over_conn("echo hi", False)),
            ("+ 5 FLEETCRON_* variables (SSH env requests)", over_conn("echo hi", True)),
            ("+ process-group wrapper", over_conn(wrap_command("echo hi"), False)),
            ("+ wrapper and variables", over_conn(wrap_command("echo hi"), True)),
            ("`SshExecutor.run` (pool, caps, output)", through_executor),
        ]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in steps}
        for _ in range(rounds):
            for name, step in steps:
                await asyncio.sleep(0.5)
                u0 = Usage.now()
                t0 = time.perf_counter()
                outputs = await asyncio.gather(*(step(i) for i in range(len(conns))))
                elapsed = time.perf_counter() - t0
                u1 = Usage.now()
                check(list(outputs), "echo hi")
                times[name].append((elapsed, u1.cpu_s - u0.cpu_s))
        await executor.close()
        for conn in conns:
            conn.close()
        return {
            "steps": [
                [name, median([t for t, _ in v]), median([c for _, c in v])]
                for name, v in times.items()
            ]
        }

    return asyncio.run(main())


def run_pssh(spec: dict[str, Any], command: str) -> dict[str, Any]:
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig

    config = [
        HostConfig(port=spec["port"], user=spec["user"], private_key=k.encode())
        for k in spec["keys"]
    ]
    before = rss_mb()
    u0 = Usage.now()
    t0 = time.perf_counter()
    client = ParallelSSHClient(
        [spec["host"]] * len(spec["keys"]),
        host_config=config,
        pool_size=CAP,
        num_retries=1,
        timeout=60,
    )
    output = client.run_command(command)
    client.join(output)
    results = [(o.exit_code, "\n".join(o.stdout)) for o in output]
    elapsed = time.perf_counter() - t0
    u1 = Usage.now()
    check(results, command)
    return {
        "first_s": elapsed,
        "first_cpu_s": u1.cpu_s - u0.cpu_s,
        "first_loop_cpu_s": u1.thread_s - u0.thread_s,  # gevent: one thread does it all
        "rss_before_mb": before,
    }


def child(design: str, command: str, spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    if design == "fleetcron":
        result = run_fleetcron(spec, command)
    elif design == "fleetcron-followed":
        result = run_fleetcron(spec, command, followed=True)
    elif design.startswith("paramiko-"):
        result = run_paramiko(spec, command, int(design.split("-")[1]))
    elif design == "asyncssh-64":
        result = run_asyncssh(spec, command)
    elif design == "asyncssh-64-hs16":
        result = run_asyncssh(spec, command, handshakes=16)
    elif design == "breakdown":
        result = run_breakdown(spec)
    elif design == "pssh-64":
        result = run_pssh(spec, command)
    else:
        raise SystemExit(f"unknown design {design}")
    result["maxrss_mb"] = Usage.now().maxrss_mb
    status = Path("/proc/self/status").read_text()
    result["vmhwm_mb"] = int(status.split("VmHWM:")[1].split()[0]) / 1024
    print(json.dumps(result))


# -- the parent: one sshd, every design in turn ------------------------------------------


def results_table(
    results: dict[tuple[str, str], list[dict[str, Any]]],
    commands: list[str],
    designs: list[str],
    n: int,
) -> str:
    def med(rs: list[dict[str, Any]], key: str) -> float:
        return median([r[key] for r in rs])

    def cpu(rs: list[dict[str, Any]], which: str) -> str:
        total = f"{med(rs, which + '_cpu_s') / n * 1000:.1f}"
        if which + "_loop_cpu_s" in rs[0]:
            total += f" ({med(rs, which + '_loop_cpu_s') / n * 1000:.1f})"
        return total

    rows = []
    for command in commands:
        base = results.get((command, "asyncssh-64"))
        slow = results.get((command, "paramiko-8"))
        for design in designs:
            rs = results[(command, design)]
            first = med(rs, "first_s")
            reuse = "second_s" in rs[0]
            vs_base = reuse and base is not None and "second_s" in base[0]
            rows.append(
                [
                    f"`{command}`",
                    design,
                    f"{first:.2f}",
                    f"{first / med(base, 'first_s'):.2f}x" if base else "",
                    f"{med(slow, 'first_s') / first:.1f}x" if slow else "",
                    cpu(rs, "first"),
                    f"{med(rs, 'rss_before_mb'):.0f} → {med(rs, 'maxrss_mb'):.0f}",
                    f"{med(rs, 'second_s'):.2f}" if reuse else "-",
                    f"{med(rs, 'second_s') / med(base, 'second_s'):.2f}x" if vs_base else "-",  # type: ignore[arg-type]
                    cpu(rs, "second") if reuse else "-",
                ]
            )
    return table(
        [
            "command",
            "design",
            "first fire s",
            "vs asyncssh-64",
            "paramiko-8 / this",
            "CPU ms / dispatch (loop thread)",
            "RSS MB before → peak",
            "reuse fire s",
            "reuse vs asyncssh-64",
            "reuse CPU ms / dispatch (loop thread)",
        ],
        rows,
        right=2,
    )


def in_child(design: str, command: str, spec_path: Path) -> dict[str, Any]:
    # sh forks the design's process (the command is not its last one, so it does not
    # exec it): the design's ru_maxrss then starts from sh's RSS, not from ours.
    proc = subprocess.run(
        [
            "/bin/sh",
            "-c",
            '"$@"; exit $?',
            "sh",
            sys.executable,
            __file__,
            "--child",
            design,
            "--command",
            command,
            "--spec",
            str(spec_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{design} / {command} failed:\n{proc.stdout}\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--commands", default="echo hi,sleep 1")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--login-rc", action="store_true", help="keep root's HOME (and rc)")
    parser.add_argument(
        "--breakdown", action="store_true", help="also decompose a reuse round, step by step"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--command", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.command, args.spec)
        return

    import asyncssh

    from fixtures.sshd import running_sshd

    n = args.targets
    commands = args.commands.split(",")
    designs = [d for d in args.designs.split(",") if d]
    print(f"load average at start: {loadavg()}")
    print(f"{n} targets (one client key each) on one loopback sshd; cap {CAP} runs in flight")
    keys = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(n)]
    work = work_dir("fleetcron-fanout-bench-")
    settings = {"MaxStartups": "1000:30:1000", "MaxSessions": "1000"}
    if not args.login_rc:
        (work / "home").mkdir()
        settings["SetEnv"] = f"HOME={work / 'home'}"
    print(f"session HOME: {'the real one (rc files run)' if args.login_rc else 'an empty dir'}")
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with running_sshd(
        work / "sshd",
        authorized_keys=[k.export_public_key("openssh").decode() for k in keys],
        settings=settings,
    ) as server:
        spec_path = work / "spec.json"
        spec_path.write_text(
            json.dumps(
                {
                    "host": server.host,
                    "port": server.port,
                    "user": server.user,
                    "host_key": server.host_key_line,
                    "keys": [k.export_private_key("openssh").decode() for k in keys],
                }
            )
        )
        spec_path.chmod(0o600)
        for round_ in range(args.repeat):
            for command in commands:
                for design in designs:
                    wait_for_no_children(server.pid)
                    time.sleep(1)
                    r = in_child(design, command, spec_path)
                    results.setdefault((command, design), []).append(r)
                    print(
                        f"  #{round_ + 1} {command!r:10} {design:12} {r['first_s']:6.2f} s"
                        + (f", reuse {r['second_s']:.2f} s" if "second_s" in r else "")
                        + (f" ({r['note']})" if "note" in r else "")
                        + f", RSS {r['maxrss_mb']:.0f} MB (VmHWM {r['vmhwm_mb']:.0f})",
                        flush=True,
                    )
        breakdown = None
        if args.breakdown:
            wait_for_no_children(server.pid)
            time.sleep(1)
            breakdown = in_child("breakdown", "echo hi", spec_path)
        wait_for_no_children(server.pid)

    if results:
        print()
        if args.repeat > 1:
            print(f"median of {args.repeat} rounds")
        print(results_table(results, commands, designs, n))
        for command in commands:
            fleet = results.get((command, "fleetcron"))
            if fleet:
                print(
                    f"fleetcron database thread CPU, `{command}`: "
                    f"first fire {median([r['first_db_cpu_s'] for r in fleet]) * 1000:.0f} ms, "
                    f"reuse fire {median([r['second_db_cpu_s'] for r in fleet]) * 1000:.0f} ms"
                )
    if breakdown is not None:
        print()
        print("reuse breakdown: `echo hi` over open connections, median of 5 rounds")
        print(
            table(
                ["step", "wall s", "client CPU ms / run"],
                [[name, f"{t:.3f}", f"{c / n * 1000:.2f}"] for name, t, c in breakdown["steps"]],
            )
        )
    print(f"\nload average at end: {loadavg()}")


if __name__ == "__main__":
    main()
