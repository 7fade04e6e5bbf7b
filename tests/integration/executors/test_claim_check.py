"""A command asks, between two of its effects, whether its claim is still live.

The wrapper on the executing machine writes the run's claim file (the deadline on that
machine's clock) and exports ``FLEETCRON_CLAIM_FILE``; the command defines the documented
check (:data:`~fleetcron.executors.watchdog.CLAIM_CHECK`) and calls it before each
effect. Real sshd on loopback and real local processes: the command ignores SIGTERM (as a
command that wants to finish its current item would) and writes one effect line every
0.2 s, stamped with the machine's ``/proc/uptime``. With the check, no effect is written at
or after the claim's deadline and the command stops by itself; the negative control runs
the same command without the check and writes effects after the deadline, until the
watchdog's SIGKILL.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pwd
import secrets
import shlex
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from fixtures.sshd import SshServer
from fleetcron.executors import ExecRequest, ExecResult, SshExecutor, SshTarget
from fleetcron.executors.local import LocalExecutor
from fleetcron.executors.output import LiveOutput
from fleetcron.executors.ssh import wrap_command
from fleetcron.executors.watchdog import (
    CLAIM_CHECK,
    CLAIM_DIRECTORY,
    MARK_SCRIPT,
    REVOKE_SCRIPT,
)
from waiting import eventually_async

STOPPED_EXIT = 75
TIMED_OUT_EXIT = 124
KILLED_EXIT = 128 + 9
BUDGET_S = 4.0
GRACE_S = 1.5


def stubborn(effects: Path, *, check: bool, margin: int = 0) -> str:
    """A command that ignores SIGTERM and writes an effect every 0.2 s for 20 s; with
    ``check`` it asks before each effect (for ``margin`` seconds left at least) and exits
    75 once the claim is gone."""
    ask = (
        f"fleetcron_claim_live {margin} || "
        f'{{ echo "refused $i" >>{effects}; exit {STOPPED_EXIT}; }}; '
        if check
        else ""
    )
    return (
        f"{CLAIM_CHECK}trap '' TERM; "
        f'cat "$FLEETCRON_CLAIM_FILE" >>{effects}; '
        "i=0; while [ $i -lt 100 ]; do i=$((i + 1)); "
        f"{ask}"
        f'read -r u r </proc/uptime; echo "effect $i $u" >>{effects}; sleep 0.2; done'
    )


@dataclass(frozen=True)
class Effects:
    deadline_cs: int
    at_cs: list[int]
    refused: bool

    @classmethod
    def read(cls, path: Path) -> Effects:
        lines = path.read_text().splitlines()
        clock, deadline, *_ = lines[0].split()
        assert clock == "uptime", lines[0]
        stamps = [line.split()[2] for line in lines if line.startswith("effect ")]
        at = [int(s.replace(".", "")) for s in stamps]
        return cls(int(deadline), at, any(line.startswith("refused ") for line in lines))

    @property
    def after_deadline(self) -> list[int]:
        return [t for t in self.at_cs if t >= self.deadline_cs]


@pytest.fixture
async def ssh() -> AsyncIterator[SshExecutor]:
    executor = SshExecutor(kill_grace_s=GRACE_S)
    try:
        yield executor
    finally:
        await executor.close()


def request(effects: Path, *, check: bool, live: LiveOutput | None = None) -> ExecRequest:
    return ExecRequest(
        stubborn(effects, check=check, margin=1),
        timeout_s=60,
        watchdog_s=BUDGET_S,
        run_id=secrets.randbelow(10**12) + 10**12,
        generation=3,
        env={"FLEETCRON_FENCING_TOKEN": "3:17"},
        live=live,
    )


def claim_file(run_id: int | None) -> Path:
    return Path(pwd.getpwuid(os.geteuid()).pw_dir) / CLAIM_DIRECTORY / f"run-{run_id}"


async def run_on(kind: str, ssh: SshExecutor, sshd: SshServer, req: ExecRequest) -> ExecResult:
    if kind == "ssh":
        target = SshTarget(
            "claims", sshd.host, sshd.port, sshd.user, sshd.client_private_key, sshd.host_key_line
        )
        return await ssh.run(target, req)
    return await LocalExecutor(kill_grace_s=GRACE_S, allow_root=True).run(req)


async def run_wrapped(kind: str, sshd: SshServer, script: str) -> int | None:
    """Run the watchdog's wrapper alone (no executor timer on top of it): over SSH, or
    locally in a session of its own as the local executor starts it."""
    if kind == "ssh":
        key = asyncssh.import_private_key(sshd.client_private_key)
        async with asyncssh.connect(
            sshd.host, port=sshd.port, username=sshd.user, client_keys=[key], known_hosts=None
        ) as conn:
            return (await conn.run(script, check=False)).exit_status
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        script,
        start_new_session=True,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await proc.wait()


@pytest.mark.parametrize("kind", ["ssh", "local"])
@pytest.mark.parametrize("check", [True, False], ids=["asks", "never-asks"])
async def test_a_command_that_asks_stops_before_its_next_effect_once_the_claim_expires(
    kind: str, check: bool, sshd: SshServer, tmp_path: Path
) -> None:
    effects = tmp_path / "effects"
    run_id = secrets.randbelow(10**12) + 10**12
    script = wrap_command(
        stubborn(effects, check=check),
        {"FLEETCRON_FENCING_TOKEN": "3:17"},
        term_after_s=BUDGET_S / 2,
        kill_grace_s=GRACE_S,
        generation=3,
        run_id=run_id,
    )
    exit_status = await run_wrapped(kind, sshd, script)
    seen = Effects.read(effects)
    assert seen.at_cs, "the command wrote no effect while its claim was live"
    assert not claim_file(run_id).exists(), "the claim file outlived the run"
    if check:
        assert seen.refused and not seen.after_deadline, seen
        # timeout(1)'s status once it has sent SIGTERM, the command having left by itself.
        assert exit_status == TIMED_OUT_EXIT, "the command did not stop by itself"
    else:
        # Negative control: the same command without the check goes on after its claim
        # expired (SIGTERM ignored), until the watchdog's SIGKILL.
        assert seen.after_deadline and not seen.refused, seen
        assert exit_status == KILLED_EXIT


@pytest.mark.parametrize("kind", ["ssh", "local"])
async def test_through_the_executors_a_command_asking_for_a_margin_leaves_before_the_end(
    kind: str, ssh: SshExecutor, sshd: SshServer, tmp_path: Path
) -> None:
    """The executors write the claim file and remove it; a command that asks for a
    second left at least (``fleetcron_claim_live 1``) stops by itself a second before its
    deadline, before any timer of the executor or the watchdog."""
    effects = tmp_path / "effects"
    req = request(effects, check=True)
    result = await run_on(kind, ssh, sshd, req)
    seen = Effects.read(effects)
    assert (result.status, result.exit_code) == ("failed", STOPPED_EXIT), result
    assert seen.refused and seen.at_cs, seen
    assert max(seen.at_cs) < seen.deadline_cs - 100, seen
    assert not claim_file(req.run_id).exists(), "the claim file outlived the run"


@pytest.mark.parametrize("kind", ["ssh", "local"])
async def test_a_stopped_run_reads_its_claim_as_gone_at_once(
    kind: str, ssh: SshExecutor, sshd: SshServer, tmp_path: Path
) -> None:
    effects = tmp_path / "effects"
    live = LiveOutput()
    req = dataclasses.replace(request(effects, check=True, live=live), watchdog_s=60.0)
    task = asyncio.create_task(run_on(kind, ssh, sshd, req))

    def two_effects() -> bool:
        return effects.exists() and effects.read_text().count("effect ") >= 2

    await eventually_async(two_effects, 15, "two effects of the running command")
    live.request_stop()
    result = await task
    seen = Effects.read(effects)
    # Stopped long before its deadline: the check said "gone" and the command left on
    # its own within the grace (SIGTERM is ignored, so only the check ended it).
    assert seen.refused and not seen.after_deadline, seen
    assert result.error is not None and "stop" in result.error.lower(), result


@pytest.fixture
def scope() -> Iterator[str]:
    """A fresh installation scope; its mark under the user's home is removed afterwards."""
    name = "claims" + secrets.token_hex(6)
    yield name
    home = pwd.getpwuid(os.geteuid()).pw_dir
    shutil.rmtree(Path(home) / ".fleetcron" / f"generation-{name}", ignore_errors=True)


async def revoke_over_ssh(sshd: SshServer, generation: int, scope: str) -> tuple[str, int]:
    """The cleanup's mark and revocation (no scan, so nothing is killed) on the target;
    what it printed and the target's uptime, in centiseconds, once it was done."""
    script = f'{MARK_SCRIPT}{REVOKE_SCRIPT}read -r u r </proc/uptime; echo "at=$u"'
    key = asyncssh.import_private_key(sshd.client_private_key)
    async with asyncssh.connect(
        sshd.host, port=sshd.port, username=sshd.user, client_keys=[key], known_hosts=None
    ) as conn:
        out = await conn.run(
            f"/bin/sh -c {shlex.quote(script)} sh {generation} {scope}", check=True
        )
    text = str(out.stdout)
    at = next(line for line in text.splitlines() if line.startswith("at="))
    return text, int(at[3:].replace(".", ""))


@pytest.mark.parametrize("check", [True, False], ids=["asks", "never-asks"])
async def test_a_takeovers_cleanup_revokes_the_old_generations_claim_before_any_kill(
    check: bool, ssh: SshExecutor, sshd: SshServer, scope: str, tmp_path: Path
) -> None:
    """Runs of generations 1 and 2 of one installation ask before each effect; the
    cleanup of generation 2 removes generation 1's claim file: its command stops before
    its next effect, generation 2's goes on. The negative control never asks and goes on
    making effects after the revocation."""
    old_effects, new_effects = tmp_path / "old", tmp_path / "new"
    target = SshTarget(
        "claims", sshd.host, sshd.port, sshd.user, sshd.client_private_key, sshd.host_key_line
    )
    old_req = dataclasses.replace(
        request(old_effects, check=check, live=LiveOutput()), watchdog_s=60.0, mark_scope=scope
    )
    new_req = dataclasses.replace(
        request(new_effects, check=True, live=LiveOutput()),
        watchdog_s=60.0,
        generation=4,
        mark_scope=scope,
    )
    runs = [asyncio.create_task(ssh.run(target, r)) for r in (old_req, new_req)]
    try:

        def both_making_effects() -> bool:
            return all(
                p.exists() and p.read_text().count("effect ") >= 2
                for p in (old_effects, new_effects)
            )

        await eventually_async(both_making_effects, 15, "both runs making effects")
        printed, revoked_at = await revoke_over_ssh(sshd, 4, scope)
        assert "revoked=1" in printed.split(), printed
        assert not claim_file(old_req.run_id).exists()
        assert claim_file(new_req.run_id).exists()

        def effects_after(path: Path) -> int:
            return sum(t > revoked_at for t in Effects.read(path).at_cs)

        # Five effect periods later (0.2 s each): generation 2 has gone on.
        await eventually_async(lambda: effects_after(new_effects) >= 5, 15, "new effects")
        old = Effects.read(old_effects)
        if check:
            # At most the one effect whose check came just before the removal.
            assert old.refused and effects_after(old_effects) <= 1, old
            result = await asyncio.wait_for(runs[0], 10)
            assert (result.status, result.exit_code) == ("failed", STOPPED_EXIT), result
        else:
            assert not old.refused and effects_after(old_effects) >= 4, old
        assert not Effects.read(new_effects).refused
    finally:
        for req in (old_req, new_req):
            assert req.live is not None
            req.live.request_stop()
        await asyncio.gather(*runs, return_exceptions=True)
