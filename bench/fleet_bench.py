"""Fleet scale: one bulk job on N simulated SSH targets at a given round trip, fleetcron
against the designs users would otherwise reach for.

The targets are served by the fleet simulator (``bench/fleet_sim.py``): one asyncssh
server process, each target on its own loopback port with its own host key and accepting
only its own client key, every byte delayed RTT/2 each way inside the simulator. ``sleep``
and ``echo`` commands are simulated there (no process), so the server side costs little
and the client is what is measured. Before the designs run, a client measures the round
trip it sees (an SSH global request and its reply) against the configured one.

Each design runs in its own process (so peak memory is its own), one after the other, the
simulator left with no connection, session or command between two; each does two fires of
the same command on all N targets: the **first** over new connections, then the
**pooled** one over whatever connections it kept.

* ``fleetcron``: a real ``Scheduler`` built as ``fleetcron serve`` builds a standalone one
  (``_common.production_scheduler``: housekeeping, Prometheus metrics, INFO log lines
  formatted and written to /dev/null) on SQLite, a bulk job ``* * * * *`` on the N
  targets, the product's executor as the scheduler builds it from the settings:
  ``ssh_max_concurrency`` runs in flight (``--cap``, the product's default unless given),
  4 per target, ``ssh_max_connecting`` handshakes at a time (``--handshakes``, the product's default
  unless given), a pool of ``ssh_max_connections`` (``--pool``, the product's default
  unless given). Timed from ``tick()`` at the minute (the real clock shifted to read
  M + 0 s) to ``idle()``: all N runs recorded in the database.
* ``fleetcron-pool``: the same with the pool sized to the fleet (``--pool max(N, cap)``),
  kept so that older tables can be compared; the default pool already holds 10,000.
* ``fleetcron-w1``, ``fleetcron-w2`` (any ``fleetcron-wN``; not in the default list): a
  cluster installation on a throwaway PostgreSQL (64 shards, ``--shards``; one approved node
  owning every shard; each target with its shard) whose node runs N scheduler processes
  side by side, each built as ``fleetcron scheduler --workers N`` builds worker I
  (``build_scheduler(app, worker=Worker(I, N))``; ``bench/fleet_cluster.py``). The node's
  caps are the bare loop's, split among its workers (``--worker-caps split``: cap / N runs
  in flight and handshakes / N each; ``each``: every worker with the full caps). The
  workers' clocks read M at one start instant the parent names, then M + 30 min at the
  next, each worker running the scheduler's loop beside the fires; a fire is timed from
  that instant to the last worker's runs recorded, its CPU summed over the workers and
  given per worker, PostgreSQL's CPU and transactions printed beside it, the workers'
  coordination transactions apart (``--placement members``: the members placement).
  ``--sim-processes K`` serves the targets from K simulator processes (one holds two
  descriptors per target).
* ``asyncssh``: bare asyncssh with the same caps: at most ``--cap`` runs in flight and
  ``--handshakes`` handshakes at a time, connect (pinned host key), run, keep every
  connection; a handshake dropped by the server is retried as fleetcron does (backoff from
  0.2 s doubling to at most 10 s, jittered, the handshake slot given back while waiting,
  for up to 60 s).
* ``asyncssh-aes``: the same bare loop offering fleetcron's cipher order (AES-GCM first,
  ``fleetcron.executors.ssh_connect.CIPHERS``) instead of asyncssh's default
  (ChaCha20-Poly1305 first): what the cipher alone is worth. The ratios stay against
  ``asyncssh``, the loop a user writes.
* ``pssh``: parallel-ssh's ``ParallelSSHClient(pool_size=cap)`` (libssh2 over gevent),
  ``run_command`` then ``join``; the second fire reuses its clients. It does not check
  host keys.
* ``ansible``: ``ansible all -m raw -a CMD -f 50`` (ansible-core, OpenSSH client, pinned
  host keys in a known_hosts file, one key file per target); its second fire reuses the
  OpenSSH ControlPersist masters of the first.

Columns: wall time from the fire to all runs done (recorded, for fleetcron); p50 and p99
dispatch lateness (from the fire to the moment the run's command was sent: fleetcron's
recorded ``started_at`` minus ``scheduled_for``, the same point in bare asyncssh;
parallel-ssh and Ansible do not expose it); client CPU per dispatch (the design's process
user+sys, in parentheses the event-loop thread's and, for fleetcron, the database
thread's share, and for fleetcron and asyncssh the garbage collector's, in any thread,
with the number of full collections in the fire; Ansible: its process tree's,
waited-for children included); peak RSS (``ru_maxrss``; for Ansible the largest
proportional set size summed over its process tree, sampled every 0.2 s, as its forks
share most pages); connections opened (counted
by the simulator); errors by kind (runs that did not succeed, handshakes retried, and
connections the simulator refused at its MaxStartups-like limit).

Run by hand::

    .venv/bin/python bench/fleet_bench.py --targets 1000 --rtt-ms 100 --command "sleep 1" \\
        --designs fleetcron,fleetcron-pool,asyncssh,pssh,ansible

Its last lines: ``fleetcron vs asyncssh: X.XXx (pooled fire, N targets, R ms)``, then each
fleetcron design's first and pooled fire against asyncssh's, with issue 29's goal for
``fleetcron-w2`` (pooled <= 1.0x, first <= 0.8x). The workers at 5,000 targets::

    .venv/bin/python bench/fleet_bench.py --targets 5000 --rtt-ms 100 --command "sleep 1" \\
        --designs fleetcron,fleetcron-w1,fleetcron-w2,asyncssh

``--profile DIR`` records the fleetcron design with py-spy (raw collapsed stacks, all
threads) and prints where its samples went.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Usage, loadavg, percentile, table, work_dir
from fleet_sim import FleetSim, FleetSims, SimControl, SimTarget, measure_rtt, raise_fd_limit

DESIGNS = ("fleetcron", "fleetcron-pool", "asyncssh", "asyncssh-aes", "pssh", "ansible")
#: ``fleetcron-wN``: a cluster node on PostgreSQL whose shards N worker processes execute
#: (``bench/fleet_cluster.py``); not in the default list.
WORKERS_DESIGN = re.compile(r"fleetcron-w([1-9][0-9]?)")
ANSIBLE_FORKS = 50


def rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def error_kind(text: str) -> str:
    """An error message with its hosts, ports and numbers taken out, to count by kind."""
    return re.sub(r"\d+(\.\d+)*", "N", text.strip().splitlines()[0] if text.strip() else "?")[:120]


def targets_of(spec: dict[str, Any]) -> list[SimTarget]:
    return [SimTarget(**t) for t in spec["targets"]]


def sim_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    keys = ("connections", "refused_startups", "execs", "execs_simulated", "execs_real", "cpu_s")
    return {k: after[k] - before[k] for k in keys}


def lateness(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"late_p50_s": None, "late_p99_s": None}
    return {"late_p50_s": percentile(values, 50), "late_p99_s": percentile(values, 99)}


# -- fleetcron -----------------------------------------------------------------------------


def target_row(app: Any, t: SimTarget, now: Any) -> dict[str, Any]:
    """A simulated target as fleetcron's ``targets`` row (paired, its client key
    encrypted with the installation's master key, its host key pinned)."""
    return {
        "name": t.name,
        "kind": "ssh",
        "host": t.host,
        "port": t.port,
        "user": t.user,
        "private_key_enc": app.master_key.encrypt(t.client_key.encode()),
        "host_key": t.host_key,
        "labels": {"role": "sim"},
        "notes": "",
        "paired": True,
        "paired_at": now,
        "created_at": now,
        "updated_at": now,
    }


def run_fleetcron(spec: dict[str, Any], command: str, opts: dict[str, Any]) -> dict[str, Any]:
    import logging
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import event, insert, select

    from _common import (
        ShiftedClock,
        core_table,
        make_app,
        production_scheduler,
        quiet_production_logging,
    )
    from fleetcron.app import SYSTEM
    from fleetcron.executors import SshExecutor
    from fleetcron.scheduler.service import Scheduler
    from fleetcron.services.jobs import edit as jobs
    from fleetcron.store.schema import Run, Target

    targets = targets_of(spec)
    n = len(targets)
    cap = opts["cap"]
    quiet_production_logging()
    retries = collections.Counter[str]()

    class CountRetries(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            action = getattr(record, "action", None)
            if action in ("ssh.connect_retry", "ssh.kill_failed"):
                retries[action] += 1
            return True

    logging.getLogger().handlers[0].addFilter(CountRetries())
    minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    clock = ShiftedClock(minute - timedelta(seconds=30))
    data_dir = work_dir("fleetcron-fleet-")
    pool = max(n, cap) if opts["design"] == "fleetcron-pool" else opts.get("pool")
    app = make_app(
        f"sqlite:///{data_dir / 'fleetcron.db'}",
        data_dir,
        clock=clock,
        ssh_max_concurrency=cap,
        ssh_max_connecting=opts["handshakes"],
        **({"ssh_max_connections": pool} if pool else {}),
    )
    now = clock()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(core_table(Target)),
            [target_row(app, t, now) for t in targets],
        )
    jobs.add_job(app, SYSTEM, "fleet", jobs.JobSpec("* * * * *", command), bulk=True)
    control = SimControl(spec["control"])
    # Write transactions: the claim and the recording must stay batched.
    commits = collections.Counter[str]()
    event.listen(app.db.engine, "commit", lambda conn: commits.update(["commit"]))

    async def fire(scheduler: Scheduler, at: datetime) -> dict[str, Any]:
        c0 = commits["commit"]
        db0 = await scheduler._in_db(time.thread_time)
        s0 = control.stats()
        r0 = dict(retries)
        u0 = Usage.now()
        clock.restart(at)
        t0 = time.perf_counter()
        stats = await scheduler.tick()
        await scheduler.idle()
        elapsed = time.perf_counter() - t0
        u1 = Usage.now()
        db_cpu = await scheduler._in_db(time.thread_time) - db0
        s1 = control.stats()
        with app.db.read() as session:
            rows = session.execute(
                select(Run.status, Run.error, Run.started_at, Run.scheduled_for).where(
                    Run.scheduled_for == at
                )
            ).all()
        errors = collections.Counter(
            f"{r.status}: {error_kind(r.error or '')}" for r in rows if r.status != "succeeded"
        )
        if len(rows) != n:
            errors["runs not recorded"] += n - len(rows)
        for action, count in retries.items():
            if count - r0.get(action, 0):
                errors[f"({action}, retried)"] += count - r0.get(action, 0)
        late = [
            (r.started_at.replace(tzinfo=UTC) - r.scheduled_for.replace(tzinfo=UTC)).total_seconds()
            for r in rows
            if r.started_at is not None
        ]
        return {
            "wall_s": elapsed,
            "dispatched": stats.dispatched,
            "ok": sum(r.status == "succeeded" for r in rows),
            "cpu_s": u1.cpu_s - u0.cpu_s,
            "loop_cpu_s": u1.thread_s - u0.thread_s,
            "db_cpu_s": db_cpu,
            "gc_cpu_s": u1.gc_s - u0.gc_s,
            "gc_full": u1.gc_full - u0.gc_full,
            "transactions": commits["commit"] - c0,
            "errors": dict(errors),
            "sim": sim_delta(s0, s1),
            **lateness(late),
        }

    async def main() -> dict[str, Any]:
        scheduler: Scheduler = production_scheduler(app)
        assert isinstance(scheduler.ssh, SshExecutor)
        await scheduler.start()
        assert scheduler.maintenance is not None
        await scheduler._in_db(scheduler.maintenance)  # its first round, as serve() would have
        before = rss_mb()
        first = await fire(scheduler, minute)
        pooled = await fire(scheduler, minute + timedelta(minutes=1))
        assert scheduler.ssh is not None
        retried = scheduler.ssh.connect_retries
        await scheduler.shutdown()
        await scheduler.ssh.close()
        return {
            "first": first,
            "pooled": pooled,
            "rss_before_mb": before,
            "connect_retries": retried,
        }

    try:
        return asyncio.run(main())
    finally:
        control.close()
        app.close()


# -- bare asyncssh --------------------------------------------------------------------------


def cipher_options(design: str) -> dict[str, Any]:
    """``asyncssh-aes`` offers fleetcron's cipher order; ``asyncssh`` asyncssh's own."""
    if design != "asyncssh-aes":
        return {}
    from fleetcron.executors.ssh_connect import CIPHERS

    return {"encryption_algs": CIPHERS}


def run_asyncssh(spec: dict[str, Any], command: str, opts: dict[str, Any]) -> dict[str, Any]:
    import random

    import asyncssh

    targets = targets_of(spec)
    control = SimControl(spec["control"])
    retryable = (asyncssh.ConnectionLost, ConnectionResetError, BrokenPipeError)

    async def main() -> dict[str, Any]:
        slots = asyncio.Semaphore(opts["cap"])
        connecting = asyncio.Semaphore(opts["handshakes"])
        conns: dict[int, Any] = {}
        keys = {}
        for i, t in enumerate(targets):  # parsed once, as fleetcron's executor caches them
            keys[i] = (
                asyncssh.import_private_key(t.client_key),
                asyncssh.import_public_key(t.host_key),
            )

        async def open_conn(i: int, errors: collections.Counter[str]) -> Any:
            t = targets[i]
            delay = 0.2
            deadline = time.monotonic() + 60
            while True:
                async with connecting:
                    try:
                        return await asyncssh.connect(
                            t.host,
                            t.port,
                            username=t.user,
                            client_keys=[keys[i][0]],
                            known_hosts=([keys[i][1]], [], []),
                            config=None,
                            agent_path=None,
                            connect_timeout=60,
                            **cipher_options(opts["design"]),
                        )
                    except retryable:
                        pass
                wait = delay * random.uniform(0.5, 1.0)
                if time.monotonic() + wait >= deadline:
                    raise asyncssh.ConnectionLost("handshake dropped until the budget was spent")
                errors["(handshake dropped, retried)"] += 1
                await asyncio.sleep(wait)
                delay = min(delay * 2, 10.0)

        async def one(
            i: int, t0: float, late: list[float], errors: collections.Counter[str]
        ) -> bool:
            async with slots:
                try:
                    conn = conns.get(i)
                    if conn is None:
                        conn = conns[i] = await open_conn(i, errors)
                    late.append(time.perf_counter() - t0)
                    result = await conn.run(command, check=False)
                except (OSError, asyncssh.Error) as exc:
                    errors[f"{type(exc).__name__}: {error_kind(str(exc))}"] += 1
                    return False
                if result.exit_status != 0:
                    errors[f"exit {result.exit_status}"] += 1
                return bool(result.exit_status == 0)

        async def fire() -> dict[str, Any]:
            late: list[float] = []
            errors: collections.Counter[str] = collections.Counter()
            s0 = control.stats()
            u0 = Usage.now()
            t0 = time.perf_counter()
            ok = await asyncio.gather(*(one(i, t0, late, errors) for i in range(len(targets))))
            elapsed = time.perf_counter() - t0
            u1 = Usage.now()
            return {
                "wall_s": elapsed,
                "ok": sum(ok),
                "cpu_s": u1.cpu_s - u0.cpu_s,
                "loop_cpu_s": u1.thread_s - u0.thread_s,
                "gc_cpu_s": u1.gc_s - u0.gc_s,
                "gc_full": u1.gc_full - u0.gc_full,
                "errors": dict(errors),
                "sim": sim_delta(s0, control.stats()),
                **lateness(late),
            }

        before = rss_mb()
        first = await fire()
        pooled = await fire()
        for conn in conns.values():
            conn.close()
        await asyncio.gather(*(c.wait_closed() for c in conns.values()))
        return {"first": first, "pooled": pooled, "rss_before_mb": before}

    try:
        return asyncio.run(main())
    finally:
        control.close()


# -- parallel-ssh ---------------------------------------------------------------------------


def run_pssh(spec: dict[str, Any], command: str, opts: dict[str, Any]) -> dict[str, Any]:
    from pssh.clients import ParallelSSHClient
    from pssh.config import HostConfig

    targets = targets_of(spec)
    control = SimControl(spec["control"])
    client = ParallelSSHClient(
        [t.host for t in targets],
        host_config=[
            HostConfig(port=t.port, user=t.user, private_key=t.client_key.encode()) for t in targets
        ],
        pool_size=opts["cap"],
        num_retries=3,
        timeout=60,
    )

    def fire() -> dict[str, Any]:
        s0 = control.stats()
        u0 = Usage.now()
        t0 = time.perf_counter()
        output = client.run_command(command, stop_on_errors=False)
        client.join(output)
        errors: collections.Counter[str] = collections.Counter()
        ok = 0
        for o in output:
            if o.exception is not None:
                errors[f"{type(o.exception).__name__}: {error_kind(str(o.exception))}"] += 1
            elif o.exit_code != 0:
                errors[f"exit {o.exit_code}"] += 1
            else:
                ok += 1
        elapsed = time.perf_counter() - t0
        u1 = Usage.now()
        return {
            "wall_s": elapsed,
            "ok": ok,
            "cpu_s": u1.cpu_s - u0.cpu_s,
            "loop_cpu_s": u1.thread_s - u0.thread_s,  # gevent: one thread does it all
            "errors": dict(errors),
            "sim": sim_delta(s0, control.stats()),
            **lateness([]),
        }

    before = rss_mb()
    try:
        first = fire()
        pooled = fire()
    finally:
        control.close()
    return {"first": first, "pooled": pooled, "rss_before_mb": before}


# -- Ansible --------------------------------------------------------------------------------


def tree_of(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(stat[stat.rindex(")") + 2 :].split()[1])].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(parents.get(p, []))
    return found


def tree_pss_mb(pid: int) -> float:
    """Proportional set size summed over a process tree: forks share most of their pages,
    which a sum of RSS would count once per fork."""
    total = 0
    for p in tree_of(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            total += int(rollup.split("\nPss:")[1].split()[0])
    return total / 1024


def run_ansible(spec: dict[str, Any], command: str, opts: dict[str, Any]) -> dict[str, Any]:
    import resource

    targets = targets_of(spec)
    control = SimControl(spec["control"])
    work = work_dir("fleetcron-fleet-ansible-")
    keys = work / "keys"
    keys.mkdir(mode=0o700)
    known = work / "known_hosts"
    known.write_text("".join(f"[{t.host}]:{t.port} {t.host_key}\n" for t in targets))
    lines = ["[fleet]"]
    for t in targets:
        key = keys / t.name
        key.touch(0o600)
        key.write_text(t.client_key)
        lines.append(
            f"{t.name} ansible_host={t.host} ansible_port={t.port} "
            f"ansible_ssh_private_key_file={key}"
        )
    lines += [
        "[fleet:vars]",
        f"ansible_user={targets[0].user}",
        "ansible_ssh_common_args='-o UserKnownHostsFile="
        f"{known} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes'",
    ]
    inventory = work / "inventory.ini"
    inventory.write_text("\n".join(lines) + "\n")
    cp_dir = work / "cp"
    cp_dir.mkdir()
    env = {
        **os.environ,
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(cp_dir),
        "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=300s",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_HOME": str(work / "home"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_TIMEOUT": "60",
    }
    ansible = str(Path(sys.executable).with_name("ansible"))

    def fire() -> dict[str, Any]:
        s0 = control.stats()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [
                ansible,
                "fleet",
                "-i",
                str(inventory),
                "-m",
                "raw",
                "-a",
                command,
                "-f",
                str(ANSIBLE_FORKS),
                "-o",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        peak = [0.0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], tree_pss_mb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, _ = proc.communicate(timeout=1800)
        elapsed = time.perf_counter() - t0
        done.set()
        sampler.join()
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        errors: collections.Counter[str] = collections.Counter()
        ok = 0
        for line in out.splitlines():
            m = re.match(r"^(\S+) \| (\S+)", line)
            if m is None:
                continue
            if m.group(2) in ("CHANGED", "SUCCESS") and "rc=0" in line:
                ok += 1
            else:
                errors[f"{m.group(2)}: {error_kind(line.split('|', 2)[-1])}"] += 1
        if ok + sum(errors.values()) < len(targets):
            errors["no result line"] += len(targets) - ok - sum(errors.values())
        return {
            "wall_s": elapsed,
            "ok": ok,
            "cpu_s": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime),
            "errors": dict(errors),
            "sim": sim_delta(s0, control.stats()),
            "tree_rss_mb": peak[0],
            **lateness([]),
        }

    try:
        first = fire()
        pooled = fire()
    finally:
        control.close()
        stop_control_masters(cp_dir)
    return {
        "first": first,
        "pooled": pooled,
        "rss_before_mb": 0.0,
        "peak_tree_rss_mb": max(first["tree_rss_mb"], pooled["tree_rss_mb"]),
    }


def stop_control_masters(cp_dir: Path) -> None:
    """End the OpenSSH ControlPersist masters this benchmark's Ansible runs left, by pid
    (each one's command line names our control directory)."""
    me = str(cp_dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            if cmdline.startswith("ssh") and me in cmdline:
                os.kill(int(entry.name), signal.SIGTERM)


# -- the child process and the parent -------------------------------------------------------


def child(design: str, command: str, spec_path: str, opts: dict[str, Any]) -> None:
    raise_fd_limit()
    spec = json.loads(Path(spec_path).read_text())
    opts = {**opts, "design": design}
    if design in ("fleetcron", "fleetcron-pool"):
        result = run_fleetcron(spec, command, opts)
    elif WORKERS_DESIGN.fullmatch(design):
        from fleet_cluster import run_fleetcron_workers

        result = run_fleetcron_workers(spec, command, opts)
    elif design in ("asyncssh", "asyncssh-aes"):
        result = run_asyncssh(spec, command, opts)
    elif design == "pssh":
        result = run_pssh(spec, command, opts)
    elif design == "ansible":
        result = run_ansible(spec, command, opts)
    else:
        raise SystemExit(f"unknown design {design}")
    result["maxrss_mb"] = result.get("peak_tree_rss_mb") or Usage.now().maxrss_mb
    Path(opts["result"]).write_text(json.dumps(result))


def in_child(
    design: str, command: str, spec_path: Path, opts: dict[str, Any], profile: Path | None
) -> dict[str, Any]:
    result_path = spec_path.with_name(f"result-{design}.json")
    result_path.unlink(missing_ok=True)
    argv = [
        sys.executable,
        __file__,
        "--child",
        design,
        "--command",
        command,
        "--spec",
        str(spec_path),
        "--child-opts",
        json.dumps({**opts, "result": str(result_path)}),
    ]
    if profile is not None and design.startswith("fleetcron"):
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        out = profile / f"{design}.raw.txt"
        argv = [spy, "record", "-r", "200", "-f", "raw", "--threads", "-o", str(out), "--", *argv]
    # sh forks the design's process (not exec): its ru_maxrss then starts from sh's RSS.
    proc = subprocess.run(
        ["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0 or not result_path.exists():
        raise SystemExit(f"{design} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    result: dict[str, Any] = json.loads(result_path.read_text())
    return result


def fmt_errors(fire: dict[str, Any]) -> str:
    errors = dict(fire["errors"])
    refused = fire["sim"]["refused_startups"]
    if refused:
        errors["(refused at MaxStartups)"] = refused
    if not errors:
        return "none"
    return "; ".join(f"{k} ×{v}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1]))


def results_table(results: dict[str, dict[str, Any]], n: int, command: str, rtt: float) -> str:
    rows = []
    base = results.get("asyncssh")
    for design, r in results.items():
        for which in ("first", "pooled"):
            f = r[which]
            cpu = f"{f['cpu_s'] / n * 1000:.2f}"
            parts = []
            if "loop_cpu_s" in f:
                parts.append(f"loop {f['loop_cpu_s'] / n * 1000:.2f}")
            if "db_cpu_s" in f:
                parts.append(f"db {f['db_cpu_s'] / n * 1000:.2f}")
            if "gc_cpu_s" in f:
                parts.append(f"gc {f['gc_cpu_s'] / n * 1000:.2f}, {f['gc_full']} full")
            if parts:
                cpu += f" ({', '.join(parts)})"
            vs = f"{f['wall_s'] / base[which]['wall_s']:.2f}x" if base else "-"

            def late(key: str, f: dict[str, Any] = f) -> str:
                return "-" if f[key] is None else f"{f[key]:.2f}"

            rows.append(
                [
                    design,
                    which,
                    f"{f['wall_s']:.2f}",
                    vs,
                    f"{f['ok']}/{n}",
                    late("late_p50_s"),
                    late("late_p99_s"),
                    cpu,
                    f"{r['maxrss_mb']:.0f}",
                    str(f["sim"]["connections"]),
                    fmt_errors(f),
                ]
            )
    return table(
        [
            "design",
            "fire",
            "all done s",
            "vs asyncssh",
            "ok",
            "lateness p50 s",
            "lateness p99 s",
            "client CPU ms / dispatch",
            "peak RSS MB",
            "connections opened",
            "errors",
        ],
        rows,
        right=2,
    )


WAITING = re.compile(
    r"EpollSelector\.select|_worker \(concurrent|\bwait \(threading|_wait_for_tstate"
)


def summarize_profile(path: Path, top: int = 14) -> str:
    """Where py-spy's samples went: by thread, the share of each thread's busy samples
    (waiting in epoll or on a queue left out) by innermost layer, and the fleetcron
    functions with the most inclusive samples on the event-loop and database threads."""
    per_thread: collections.Counter[str] = collections.Counter()
    busy: collections.Counter[str] = collections.Counter()
    layers: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    buckets = [
        ("logging", re.compile(r"logging/|fleetcron/logs")),
        ("SQLAlchemy / sqlite3", re.compile(r"sqlalchemy/|sqlite3")),
        (
            "asyncssh crypto (kex, signatures, ciphers)",
            re.compile(r"asyncssh/(crypto|kex|public_key|encryption|mac)|cryptography"),
        ),
        ("asyncssh connection/channel/packets", re.compile(r"asyncssh/")),
        ("fleetcron executors", re.compile(r"fleetcron/executors/")),
        ("fleetcron scheduler", re.compile(r"fleetcron/scheduler/")),
        ("fleetcron store/services/core", re.compile(r"fleetcron/")),
        ("asyncio event loop and sockets", re.compile(r"asyncio/|selectors")),
    ]
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        thread = re.sub(r"^thread \(\d+\): |\s*\(\d+\)|0x[0-9a-f]+", "", frames[0]).strip()
        thread = re.sub(r"_\d+$", "_N", thread)  # executor threads of one pool together
        per_thread[thread] += count
        if WAITING.search(frames[-1]):
            continue
        busy[thread] += count
        # Each busy sample goes to its innermost frame's layer (the first bucket, in the
        # order above, that matches it), so the shares add up to 100%.
        for frame in reversed(frames[1:]):
            name = next((n for n, pattern in buckets if pattern.search(frame)), None)
            if name is not None:
                layers[thread][name] += count
                break
        else:
            layers[thread]["other"] += count
        seen = set()
        for frame in frames[1:]:
            if "fleetcron/" in frame:
                key = re.sub(r"\(/.*?/src/", "(", frame)
                if key not in seen:
                    seen.add(key)
                    inclusive[thread][key] += count
    total = sum(per_thread.values())
    out = [f"py-spy samples: {total} (busy: not waiting in epoll or on a queue)"]
    for thread, count in per_thread.most_common():
        out.append(f"  {thread}: {count} samples, {busy[thread]} busy")
    for thread in ("MainThread", "fleetcron-db_N"):
        b = busy[thread]
        if not b:
            continue
        out.append(f"{thread}, busy samples by innermost layer:")
        for name, count in layers[thread].most_common():
            out.append(f"  {count / b:5.1%}  {name}")
        out.append(f"{thread}, fleetcron functions by inclusive share of busy samples:")
        for key, count in inclusive[thread].most_common(top):
            out.append(f"  {count / b:5.1%}  {key}")
    return "\n".join(out)


def parser_of() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--rtt-ms", type=float, default=0.0)
    parser.add_argument("--command", default="sleep 1")
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument(
        "--cap",
        type=int,
        default=None,
        help="runs in flight (ssh_max_concurrency; default: the product's default)",
    )
    parser.add_argument(
        "--handshakes",
        type=int,
        default=None,
        help="handshakes in flight (ssh_max_connecting; default: the product's default)",
    )
    parser.add_argument(
        "--pool", type=int, default=None, help="ssh_max_connections (default: the product's)"
    )
    parser.add_argument(
        "--worker-caps",
        choices=("split", "each"),
        default="split",
        help="fleetcron-wN: the caps split among the N workers (the node's total is the bare "
        "loop's), or each worker with the full caps",
    )
    parser.add_argument("--shards", type=int, default=64, help="fleetcron-wN: FLEETCRON_SHARDS")
    parser.add_argument(
        "--placement",
        choices=("owner", "members"),
        default="owner",
        help="fleetcron-wN: FLEETCRON_SHARD_PLACEMENT (members: with a 30 s lease, the node "
        "a member renewing and placing every FLEETCRON_LEASE_RENEW_S)",
    )
    parser.add_argument(
        "--sim-processes",
        type=int,
        default=1,
        help="simulator processes sharing the targets (one holds two descriptors a target: "
        "past half the open-file limit use more)",
    )
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--max-startups", type=int, default=None)
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the fleetcron designs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--child-opts", help=argparse.SUPPRESS)
    return parser


def designs_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The designs asked for, each known and runnable here (else exit 2 naming it)."""
    designs = [d for d in args.designs.split(",") if d]
    unknown = [d for d in designs if d not in DESIGNS and not WORKERS_DESIGN.fullmatch(d)]
    if unknown:
        allowed = ", ".join((*DESIGNS, "fleetcron-wN (N from 1 to 99)"))
        parser.error(f"--designs: unknown {', '.join(unknown)}; allowed: {allowed}")
    if args.targets < 1:
        parser.error(f"--targets must be at least 1, got {args.targets}")
    if "ansible" in designs and not Path(sys.executable).with_name("ansible").exists():
        parser.error("--designs ansible: ansible-core is not installed (bench/requirements.txt)")
    return designs


def main() -> None:
    parser = parser_of()
    args = parser.parse_args()
    if args.child:
        child(args.child, args.command, args.spec, json.loads(args.child_opts))
        return
    designs = designs_of(parser, args)
    limit = raise_fd_limit()
    from fleetcron.config import Settings

    if args.cap is None:
        args.cap = Settings.model_fields["ssh_max_concurrency"].default
    if args.handshakes is None:
        args.handshakes = Settings.model_fields["ssh_max_connecting"].default
    n, rtt = args.targets, args.rtt_ms
    print(f"load average at start: {loadavg()}; open-file limit {limit}")
    print(
        f"{n} simulated targets at {rtt:g} ms RTT (loss {args.loss:g}, MaxStartups "
        f"{args.max_startups or 'off'}), `{args.command}`, cap {args.cap} runs in flight, "
        f"{args.handshakes} handshakes"
    )
    work = work_dir("fleetcron-fleet-bench-")
    opts = {
        "cap": args.cap,
        "handshakes": args.handshakes,
        "pool": args.pool,
        "worker_caps": args.worker_caps,
        "shards": args.shards,
        "placement": args.placement,
    }
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    t_start = time.perf_counter()
    with simulator(args, work / "sim") as sim:
        m = asyncio.run(measure_rtt(sim.targets[0]))
        print(
            f"round trip measured by a client: {m['round_trip_ms']:.1f} ms "
            f"(configured {rtt:g}); `true` over an open connection {m['exec_true_ms']:.1f} ms; "
            f"handshake {m['handshake_ms']:.0f} ms"
        )
        if abs(m["round_trip_ms"] - rtt) > max(5.0, 0.2 * rtt):
            raise SystemExit("the measured round trip is not the configured one")
        spec_path = work / "spec.json"
        spec_path.touch(0o600)
        spec_path.write_text(json.dumps(sim.spec()))
        for design in designs:
            sim.wait_idle(timeout_s=120)
            time.sleep(1)
            s0 = sim.stats()
            r = in_child(design, args.command, spec_path, opts, args.profile)
            s1 = sim.stats()
            r["sim_cpu_s"] = s1["cpu_s"] - s0["cpu_s"]
            results[design] = r
            print(
                f"  {design:15} first {r['first']['wall_s']:7.2f} s ({r['first']['ok']} ok), "
                f"pooled {r['pooled']['wall_s']:7.2f} s ({r['pooled']['ok']} ok), "
                f"RSS {r['maxrss_mb']:.0f} MB, simulator CPU {r['sim_cpu_s']:.1f} s; "
                f"commands simulated / real sh: "
                + ", ".join(
                    f"{r[w]['sim']['execs_simulated']} / {r[w]['sim']['execs_real']}"
                    for w in ("first", "pooled")
                ),
                flush=True,
            )
        sim.wait_idle(timeout_s=120)
    print()
    print(results_table(results, n, args.command, rtt))
    for design, r in results.items():
        if design.startswith("fleetcron"):
            print(
                f"{design} database thread CPU: first fire {r['first']['db_cpu_s'] * 1000:.0f} ms,"
                f" pooled fire {r['pooled']['db_cpu_s'] * 1000:.0f} ms; committed transactions:"
                f" first {r['first'].get('transactions', '?')},"
                f" pooled {r['pooled'].get('transactions', '?')} for {n} runs each;"
                f" connect retries counted by the executor: {r.get('connect_retries', '?')}"
            )
    if args.profile is not None:
        for design in results:
            raw = args.profile / f"{design}.raw.txt"
            if raw.exists():
                print(f"\nprofile of {design} ({raw}):")
                print(summarize_profile(raw))
    for line in workers_lines(results, n) + transactions_lines(results) + cpu_budget_lines(results):
        print(line)
    print(f"\nload average at end: {loadavg()}; {time.perf_counter() - t_start:.0f} s in all")
    if "fleetcron" in results and "asyncssh" in results:
        ratio = results["fleetcron"]["pooled"]["wall_s"] / results["asyncssh"]["pooled"]["wall_s"]
        print(f"fleetcron vs asyncssh: {ratio:.2f}x (pooled fire, {n} targets, {rtt:g} ms)")
    for line in goal_lines(results, n, rtt) + cpu_ratio_lines(results):
        print(line)


def simulator(args: argparse.Namespace, work: Path) -> FleetSim | FleetSims:
    """The fleet simulator, in one process or ``--sim-processes``."""
    kwargs: dict[str, Any] = {
        "rtt_ms": args.rtt_ms,
        "loss": args.loss,
        "max_startups": args.max_startups,
    }
    if args.sim_processes == 1:
        return FleetSim(args.targets, work_dir=work, **kwargs)
    return FleetSims(args.targets, processes=args.sim_processes, work_dir=work, **kwargs)


def transactions_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """For each ``fleetcron-wN`` design and fire: PostgreSQL's transactions
    (``pg_stat_database``) less the idle loop's over the same span (what the fire added:
    claims, recordings), the workers' coordination transactions against the goal (at
    most 1 per 50 dispatches: over the fire, and a minute's against the minute's
    dispatches), and each worker's CPU per dispatch."""
    from fleet_cluster import GOAL_DISPATCHES_PER_COORDINATION as GOAL

    lines = []
    for design, r in results.items():
        if not WORKERS_DESIGN.fullmatch(design):
            continue
        idle = r["idle"]
        lines.append(
            f"{design} idle loop: PostgreSQL {idle['pg_tx_per_s']:.2f} transactions/s; the "
            f"workers began {idle['coordination_tx_per_s']:.2f}/s coordination, "
            f"{idle['other_tx_per_s']:.2f}/s other (empty ticks); CPU ms/s per worker: "
            + ", ".join(f"{ms:.1f}" for ms in idle.get("cpu_ms_per_s", []))
        )
        minute = idle["coordination_tx_per_s"] * 60
        for which in ("first", "pooled"):
            f = r[which]
            d = max(1, f["dispatched"])
            added = f["pg_transactions"] - idle["pg_tx_per_s"] * f["pg_span_s"]
            k = f["coordination_tx"]
            lines.append(
                f"{design} {which}: {f['dispatched']} dispatches; PostgreSQL "
                f"{f['pg_transactions']} transactions over {f['pg_span_s']:.1f} s, "
                f"{added:.0f} above the idle loop's ({added / d:.3f} per dispatch); the "
                f"workers began {k} coordination and {f['other_tx']} other; dispatches per "
                f"coordination transaction: {d / k if k else float('inf'):.0f} in the fire, "
                f"{d / minute if minute else float('inf'):.0f} per minute (goal >= {GOAL}); "
                "CPU ms / dispatch per worker: "
                + ", ".join(
                    f"{w['cpu_s'] / max(1, w['dispatched']) * 1000:.2f}" for w in f["workers_cpu"]
                )
                + "; first tick s per worker: "
                + ", ".join(f"{w['tick_s']:.1f}" for w in f["workers_cpu"])
            )
    return lines


def workers_lines(results: dict[str, dict[str, Any]], n: int) -> list[str]:
    """For each ``fleetcron-wN`` design: its workers' caps, PostgreSQL's CPU per dispatch
    and the runs each worker recorded."""
    lines = []
    for design, r in results.items():
        if WORKERS_DESIGN.fullmatch(design):
            caps = r["worker_caps"]
            lines.append(
                f"{design}: {r['workers']} worker process(es), each with "
                f"{caps['ssh_max_concurrency']} runs in flight and "
                f"{caps['ssh_max_connecting']} handshakes; PostgreSQL CPU ms / dispatch: "
                + ", ".join(f"{w} {r[w]['pg_cpu_s'] / n * 1000:.2f}" for w in ("first", "pooled"))
                + "; runs per worker: "
                + ", ".join(f"{w} {r[w]['per_worker']}" for w in ("first", "pooled"))
            )
    return lines


def cpu_budget_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """Each fire's CPU in all the processes it kept busy (the design's, PostgreSQL's, the
    simulator's) and the wall time that CPU alone takes on this machine's cores: a floor
    that holds at any load, since the simulator shares the cores with the design."""
    cores = os.cpu_count() or 1
    lines = []
    for design, r in results.items():
        for which in ("first", "pooled"):
            f = r[which]
            total = f["cpu_s"] + f.get("pg_cpu_s", 0.0) + f["sim"]["cpu_s"]
            lines.append(
                f"{design} {which}: CPU {f['cpu_s']:.1f} s (design) + "
                f"{f.get('pg_cpu_s', 0.0):.1f} s (PostgreSQL) + {f['sim']['cpu_s']:.1f} s "
                f"(simulator) = {total:.1f} s: at least {total / cores:.1f} s on {cores} cores"
            )
    return lines


#: Issue 29's goal for the CPU a dispatch costs against the bare asyncssh loop's.
GOAL_CPU = 1.3


def cpu_ratio_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """Each fleetcron design's client CPU per dispatch (all its processes) against each
    bare loop's, both fires; the goal is against ``asyncssh``, the loop a user writes."""
    lines = []
    for design, r in results.items():
        if not design.startswith("fleetcron"):
            continue
        for base in ("asyncssh", "asyncssh-aes"):
            if base not in results:
                continue
            first, pooled = (r[w]["cpu_s"] / results[base][w]["cpu_s"] for w in ("first", "pooled"))
            line = f"{design} CPU per dispatch vs {base}: first {first:.2f}x, pooled {pooled:.2f}x"
            if base == "asyncssh":
                line += f" (goal <= {GOAL_CPU}x: {'met' if pooled <= GOAL_CPU else 'NOT met'})"
            lines.append(line)
    return lines


def goal_lines(results: dict[str, dict[str, Any]], n: int, rtt: float) -> list[str]:
    """Each fleetcron design's wall time against the bare loop's, both fires; issue 29's
    goal for 2 workers (pooled <= 1.0x, first <= 0.8x)."""
    from fleet_cluster import GOAL_FIRST, GOAL_POOLED

    base = results.get("asyncssh")
    if base is None:
        return []
    lines = []
    for design, r in results.items():
        if not design.startswith("fleetcron"):
            continue
        first, pooled = (r[w]["wall_s"] / base[w]["wall_s"] for w in ("first", "pooled"))
        line = f"{design} vs asyncssh: first {first:.2f}x, pooled {pooled:.2f}x ({n}, {rtt:g} ms)"
        if design == "fleetcron-w2":
            met = pooled <= GOAL_POOLED and first <= GOAL_FIRST
            line += (
                f"; issue 29 goal (pooled <= {GOAL_POOLED}x, first <= {GOAL_FIRST}x): "
                f"{'met' if met else 'NOT met'}"
            )
        lines.append(line)
    return lines


if __name__ == "__main__":
    main()
