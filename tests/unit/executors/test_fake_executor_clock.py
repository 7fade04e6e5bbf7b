"""The fake executor sleeps on an injectable clock: a simulated 30 s run on a fake clock
takes no real 30 s, moves that clock by its duration (or by its timeout, when it times
out), and stamps its start and end on it. The negative control sleeps on the real loop."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from fixtures.app import FakeClock
from fleetcron.executors.base import ExecRequest, RunTarget
from fleetcron.executors.fake import FakeExecutor, FakeOutcome

TARGET = RunTarget(name="box", kind="local")
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


async def test_a_30_s_run_on_the_fake_clock_ends_30_s_later_on_it_at_once() -> None:
    clock = FakeClock(START)
    fake = FakeExecutor({"sleep 30": FakeOutcome(duration_s=30)}, clock=clock, sleep=clock.sleep)
    began = time.monotonic()
    result = await fake.run(TARGET, ExecRequest("sleep 30", timeout_s=60))
    # Not a real sleep, which would take the whole 30 s (however loaded the machine, the
    # fake run takes less: no wall-clock limit tighter than that is needed to tell).
    assert time.monotonic() - began < 30
    assert result.status == "succeeded"
    assert (result.started_at, result.finished_at) == (START, START + timedelta(seconds=30))


async def test_a_run_longer_than_its_timeout_times_out_when_the_fake_clock_reaches_it() -> None:
    clock = FakeClock(START)
    fake = FakeExecutor({"sleep 30": FakeOutcome(duration_s=30)}, clock=clock, sleep=clock.sleep)
    result = await fake.run(TARGET, ExecRequest("sleep 30", timeout_s=5))
    assert result.status == "timed_out"
    assert clock.now == START + timedelta(seconds=5)


async def test_negative_control_without_the_clocks_sleep_the_run_waits_in_real_time() -> None:
    clock = FakeClock(START)
    fake = FakeExecutor({"sleep": FakeOutcome(duration_s=0.3)}, clock=clock)
    began = time.monotonic()
    result = await fake.run(TARGET, ExecRequest("sleep", timeout_s=60))
    assert time.monotonic() - began >= 0.3
    assert clock.now == START and result.finished_at == START
