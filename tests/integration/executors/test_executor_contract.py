"""The executor contract, checked against every executor the scheduler can hold.

Each executor is reached through the seam the scheduler uses (``Executor``: ``admit``,
``run(target, request)``, ``close``; ``executors/kinds.py``): the local one on real
``/bin/sh`` processes, the SSH one on the real sshd fixture (its key stored encrypted, as
in the database), and the fake one, which runs nothing and is scripted here with what a
shell would have done. The behaviours are the ones every executor shares: how an exit
code is reported, that a run past its timeout ends ``timed_out``, that output is kept as a
bounded head and tail, and (for the real ones) that the request's variables reach the
command. What is particular to one executor (process groups, run-as users, pooling, host
keys) stays in its own test file.

The checks are plain functions so that the negative controls at the end can run them
against an executor that breaks the contract and see them fail.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from fixtures.sshd import SshServer
from fleetcron.crypto import MasterKey, generate_key
from fleetcron.executors import ExecRequest, ExecResult, LocalExecutor, SshExecutor
from fleetcron.executors.base import EMPTY_OUTPUT, Executor, OutputExcerpt, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.executors.kinds import LocalKind, SshKind

OK = "echo out; echo err >&2"
FAIL = "exit 7"
SLOW = "sleep 30"
#: 100 bytes: "head-", 90 zeros, "-tail".
BIG = "printf 'head-'; printf '%090d' 0; printf -- '-tail'"
ENV = 'printf "%s|%s" "$FLEETCRON_RUN_ID" "$FLEETCRON_JOB"'

#: What /bin/sh does with the contract's commands, for the executor that runs nothing.
AS_A_SHELL_WOULD = {
    OK: FakeOutcome(stdout="out\n", stderr="err\n"),
    FAIL: FakeOutcome(exit_code=7),
    SLOW: FakeOutcome(duration_s=30),
    BIG: FakeOutcome(stdout="head-" + "0" * 90 + "-tail"),
}


@dataclass
class Subject:
    executor: Executor
    target: RunTarget


@pytest.fixture(
    params=[
        "local",
        pytest.param("ssh", marks=pytest.mark.sshd),
        "fake",
    ]
)
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    executor: Executor
    if request.param == "local":
        executor = LocalKind(LocalExecutor(kill_grace_s=1.0, allow_root=True), slots=4)
        target = RunTarget(name="box", kind="local")
    elif request.param == "ssh":
        server: SshServer = request.getfixturevalue("sshd")
        master = MasterKey(generate_key())
        executor = SshKind(SshExecutor(kill_grace_s=1.0), lambda enc: master.decrypt(enc).reveal())
        target = RunTarget(
            name="web1",
            kind="ssh",
            host=server.host,
            port=server.port,
            user=server.user,
            private_key_enc=master.encrypt(server.client_private_key.encode()),
            host_key=server.host_key_line,
        )
    else:
        executor = FakeExecutor(AS_A_SHELL_WOULD)
        target = RunTarget(name="box", kind="local")
    try:
        yield Subject(executor, target)
    finally:
        await executor.close()


async def run(subject: Subject, request: ExecRequest) -> ExecResult:
    async with subject.executor.admit():
        return await subject.executor.run(subject.target, request)


async def check_exit_codes(subject: Subject) -> None:
    ok = await run(subject, ExecRequest(OK, timeout_s=10))
    assert (ok.status, ok.exit_code, ok.error) == ("succeeded", 0, None)
    assert (ok.stdout.head, ok.stderr.head) == ("out\n", "err\n")
    failed = await run(subject, ExecRequest(FAIL, timeout_s=10))
    assert (failed.status, failed.exit_code) == ("failed", 7)


async def check_timeout(subject: Subject) -> None:
    result = await run(subject, ExecRequest(SLOW, timeout_s=1))
    assert (result.status, result.exit_code) == ("timed_out", None)
    assert (result.error or "").startswith("timed out after 1 s"), result.error
    assert result.duration_ms >= 1000


async def check_bounded_output(subject: Subject) -> None:
    result = await run(subject, ExecRequest(BIG, timeout_s=10, output_limit=5))
    assert result.status == "succeeded"
    assert (result.stdout.head, result.stdout.tail) == ("head-", "-tail")
    assert (result.stdout.total_bytes, result.stdout.truncated) == (100, True)
    assert result.stdout.text == "head-\n[... 90 bytes omitted ...]\n-tail"


async def test_exit_codes_are_reported_as_succeeded_or_failed(subject: Subject) -> None:
    await check_exit_codes(subject)


async def test_a_run_past_its_timeout_ends_timed_out_without_an_exit_code(
    subject: Subject,
) -> None:
    await check_timeout(subject)


async def test_output_is_kept_as_a_bounded_head_and_tail(subject: Subject) -> None:
    await check_bounded_output(subject)


@pytest.mark.parametrize(
    "subject", ["local", pytest.param("ssh", marks=pytest.mark.sshd)], indirect=True
)
async def test_the_request_variables_reach_the_command(subject: Subject) -> None:
    env = {"FLEETCRON_RUN_ID": "42", "FLEETCRON_JOB": "nightly backup"}
    result = await run(subject, ExecRequest(ENV, env=env, timeout_s=10))
    assert result.stdout.head == "42|nightly backup"


@pytest.mark.sshd
async def test_the_ssh_adapter_decrypts_a_stored_key_once_not_per_run(sshd: SshServer) -> None:
    master = MasterKey(generate_key())
    decrypted: list[bytes] = []

    def decrypt(encrypted: bytes) -> bytes:
        decrypted.append(encrypted)
        return master.decrypt(encrypted).reveal()

    adapter = SshKind(SshExecutor(), decrypt)
    target = RunTarget(
        name="web1",
        kind="ssh",
        host=sshd.host,
        port=sshd.port,
        user=sshd.user,
        private_key_enc=master.encrypt(sshd.client_private_key.encode()),
        host_key=sshd.host_key_line,
    )
    try:
        for _ in range(3):
            result = await adapter.run(target, ExecRequest("true", timeout_s=10))
            assert result.status == "succeeded"
        # A re-encrypted key (a new ciphertext) is decrypted again.
        rotated = replace(target, private_key_enc=master.encrypt(sshd.client_private_key.encode()))
        assert (await adapter.run(rotated, ExecRequest("true", timeout_s=10))).status == "succeeded"
    finally:
        await adapter.close()
    assert decrypted == [target.private_key_enc, rotated.private_key_enc]


async def test_a_target_without_its_ssh_settings_is_refused_by_name() -> None:
    adapter = SshKind(SshExecutor(), lambda enc: enc)
    with pytest.raises(ValueError, match="target web1 is missing its SSH settings or host key"):
        await adapter.run(RunTarget(name="web1", kind="ssh"), ExecRequest("true"))
    await adapter.close()


# -- negative controls: the checks fail for an executor that breaks the contract ------


class _AlwaysSucceeds:
    """Breaks every clause: reports exit 0 at once, with the whole output untruncated."""

    def admit(self) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def run(self, target: RunTarget, request: ExecRequest) -> ExecResult:
        now = datetime.now(UTC)
        text = AS_A_SHELL_WOULD.get(request.command, FakeOutcome()).stdout
        stdout = OutputExcerpt(head=text, tail="", total_bytes=len(text), truncated=False)
        return ExecResult("succeeded", 0, stdout, EMPTY_OUTPUT, now, now, 0)

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("check", [check_exit_codes, check_timeout, check_bounded_output])
async def test_negative_control_each_check_fails_for_a_broken_executor(
    check: Callable[[Subject], Awaitable[None]],
) -> None:
    broken = Subject(_AlwaysSucceeds(), RunTarget(name="box", kind="local"))
    with pytest.raises(AssertionError):
        await check(broken)
