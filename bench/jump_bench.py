"""Targets behind one jump host vs the same targets reached directly.

N simulated targets (``bench/fleet_sim.py``: one process, its own host and client key per
target, RTT added inside the simulator on every target connection) are fired at with
``true`` by fleetcron's SSH executor, twice per design: the first fire (every target
connection is a new handshake) and a pooled fire (connections reused).

- **direct**: the executor connects to each target itself.
- **via bastion**: every target is reached through a real OpenSSH bastion on loopback that
  allows forwarding only (``tests/fixtures/sshd.py``'s ``BASTION_SETTINGS``), with the
  executor's jump host pool (``ssh_jump_max_connections`` default 8, 64 targets per
  connection; ``--jump-connections``/``--per-connection`` change them). The bastion's
  logins are counted from its own log ("Accepted publickey").

The scheduler-to-bastion leg is loopback without added latency; the bastion-to-target leg
has the simulator's RTT, as the direct path does. Wall times are shown, but the machine is
shared: compare the CPU time (user+sys of this process, ``resource.getrusage``).

Run: ``.venv/bin/python bench/jump_bench.py [--targets N] [--rtt-ms R] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncssh

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixtures.sshd import BASTION_SETTINGS, running_sshd
from fleet_sim import FleetSim, raise_fd_limit
from fleetcron.executors import ExecRequest, SshExecutor, SshTarget
from fleetcron.executors.ssh_jump import JumpLimits


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def fire(executor: SshExecutor, targets: list[SshTarget]) -> dict[str, float]:
    cpu0, t0 = cpu_s(), time.perf_counter()
    results = await asyncio.gather(*(executor.run(t, ExecRequest("true")) for t in targets))
    wall, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    failed = [r.error for r in results if r.status != "succeeded"]
    if failed:
        raise SystemExit(f"{len(failed)} runs failed, first: {failed[0]}")
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


async def design(targets: list[SshTarget], limits: JumpLimits) -> dict[str, Any]:
    n = len(targets)
    executor = SshExecutor(
        max_concurrency=n, max_connections=max(n, 64), max_connecting=128, kill_grace_s=1.0
    )
    executor.pool.jumps.limit(limits)
    try:
        first = await fire(executor, targets)
        pooled = await fire(executor, targets)
        return {
            "first": first,
            "pooled": pooled,
            "target_handshakes": executor.connections_opened,
            "jump_connections": executor.pool.jumps.connections_opened,
        }
    finally:
        await executor.close()


def logins(log: Path) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if "Accepted" in line)


async def main(n: int, rtt_ms: float, limits: JumpLimits) -> dict[str, Any]:
    raise_fd_limit()
    work = Path(tempfile.mkdtemp(prefix="fleetcron-jump-bench-"))
    key = asyncssh.generate_private_key("ssh-ed25519")
    with (
        FleetSim(n, rtt_ms=rtt_ms, work_dir=work / "sim") as sim,
        running_sshd(
            work / "bastion",
            authorized_keys=[key.export_public_key("openssh").decode()],
            settings={**BASTION_SETTINGS, "LogLevel": "INFO", "MaxStartups": "10:30:100"},
        ) as bastion,
    ):
        direct = [
            SshTarget(t.name, t.host, t.port, t.user, t.client_key, t.host_key) for t in sim.targets
        ]
        jump = SshTarget(
            "b1",
            bastion.host,
            bastion.port,
            bastion.user,
            key.export_private_key("openssh"),
            bastion.host_key_line,
        )
        behind = [dataclasses.replace(t, via=(jump,)) for t in direct]
        results = {"direct": await design(direct, limits)}
        before = logins(bastion.log_path)
        via = f"via bastion ({limits.max_connections} x {limits.targets_per_connection})"
        results[via] = await design(behind, limits)
        results[via]["bastion_logins"] = logins(bastion.log_path) - before
    return {"targets": n, "rtt_ms": rtt_ms, "results": results}


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['targets']} targets, {report['rtt_ms']:g} ms RTT on the target leg",
        "| design | first fire wall / CPU (s) | pooled fire wall / CPU (s) | target handshakes "
        "| bastion logins |",
        "|---|---|---|---|---|",
    ]
    for name, r in report["results"].items():
        lines.append(
            f"| {name} | {r['first']['wall_s']} / {r['first']['cpu_s']} "
            f"| {r['pooled']['wall_s']} / {r['pooled']['cpu_s']} | {r['target_handshakes']} "
            f"| {r.get('bastion_logins', '-')} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--rtt-ms", type=float, default=50.0)
    parser.add_argument("--jump-connections", type=int, default=8, help="ssh_jump_max_connections")
    parser.add_argument(
        "--per-connection", type=int, default=64, help="ssh_jump_targets_per_connection"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    limits = JumpLimits(args.jump_connections, args.per_connection)
    report = asyncio.run(main(args.targets, args.rtt_ms, limits))
    print(json.dumps(report, indent=2) if args.json else table(report))
