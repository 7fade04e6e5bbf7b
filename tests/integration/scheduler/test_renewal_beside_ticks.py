"""The lease renewal runs between a long tick's claim batches, not after the tick.

A tick that claims thousands of due slots can take longer than the lease (10,000 targets
on one worker: ticks of 13-30 s against a 30 s lease, renewed at most 24 s apart before
the node fences itself). Here the tick is held open by the test; the renewal, a task of
its own on the database thread, still runs (every :data:`RENEWAL_POLL_S` when the renewal
does not say when it is due, else when it is due). The negative
control renews as before, only in the maintenance call before each tick: nothing is
renewed while the tick is held.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from fixtures.app import FakeClock
from fixtures.cluster import MakeNode, approve
from fleetcron.app import App
from fleetcron.scheduler import service
from fleetcron.scheduler.assembly import build_scheduler
from fleetcron.scheduler.service import Scheduler, TickStats
from waiting import eventually_async


async def held_ticks(
    app: App, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, *, own_task: bool
) -> list[float]:
    """Serve with one tick held open for 10 polls of the renewal; the renewal calls made
    while it was held."""
    renewals: list[float] = []
    tick_started = asyncio.Event()
    release = asyncio.Event()

    def renew() -> None:
        renewals.append(time.monotonic())

    scheduler = Scheduler(
        app,
        clock=clock,
        maintenance=None if own_task else renew,
        renewal=renew if own_task else None,
    )

    async def long_tick() -> TickStats:
        tick_started.set()
        await release.wait()  # a tick claiming thousands of slots
        return TickStats()

    monkeypatch.setattr(scheduler, "tick", long_tick)
    stop = asyncio.Event()
    serving = asyncio.create_task(scheduler.serve(stop))
    try:
        await asyncio.wait_for(tick_started.wait(), 30)
        held_at = time.monotonic()
        if own_task:
            await eventually_async(
                lambda: sum(t > held_at for t in renewals) >= 3,
                30,
                "three renewals while the tick is held",
            )
        else:
            await asyncio.sleep(10 * service.RENEWAL_POLL_S)
        released_at = time.monotonic()
        return [t for t in renewals if held_at < t < released_at]
    finally:
        release.set()
        stop.set()
        await serving


async def test_the_lease_is_renewed_while_a_long_tick_runs(
    app: App, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(await held_ticks(app, clock, monkeypatch, own_task=True)) >= 3


async def test_negative_control_renewed_only_before_each_tick_nothing_is_renewed_meanwhile(
    app: App, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await held_ticks(app, clock, monkeypatch, own_task=False) == []


@pytest.mark.postgres
@pytest.mark.parametrize("lease_s", [30.0, None], ids=["lease", "no-lease"])
def test_a_node_with_a_lease_renews_it_in_a_task_of_its_own(
    make_node: MakeNode, lease_s: float | None
) -> None:
    node = make_node("alpha", lease_s=lease_s)
    approve(node)

    scheduler = build_scheduler(node.app)

    assert (scheduler.renewal is not None) == (lease_s is not None)


async def renewal_calls(
    make_node: MakeNode, monkeypatch: pytest.MonkeyPatch, *, say_when: bool
) -> list[tuple[float, float | None]]:
    """Serve a leased node (renewal every second, ticks doing nothing) for 4.2 s; each call
    of its renewal task: (monotonic time it started, what the renewal said).
    ``say_when=False`` hides when the renewal is due next, as a renewal that does not say."""
    node = make_node("alpha", lease_s=30.0, lease_renew_s=1.0)
    approve(node)
    scheduler = build_scheduler(node.app)
    renewal = scheduler.renewal
    assert renewal is not None
    calls: list[tuple[float, float | None]] = []

    def counted() -> float | None:
        # The call's start: the renewal reads its clock there, and is due a whole interval
        # after it (the end moves with how long the lease's write took).
        started = time.monotonic()
        due_in = renewal()
        calls.append((started, due_in))
        return due_in if say_when else None

    async def idle_tick() -> TickStats:
        return TickStats()

    scheduler.renewal = counted
    monkeypatch.setattr(scheduler, "tick", idle_tick)
    stop = asyncio.Event()
    serving = asyncio.create_task(scheduler.serve(stop))
    await asyncio.sleep(4.2)
    stop.set()
    await serving
    return calls


@pytest.mark.postgres
async def test_the_renewal_task_sleeps_until_the_renewal_is_due(
    make_node: MakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It wakes when the renewal is due (every second here), not every
    :data:`RENEWAL_POLL_S`: about 5 calls in 4.2 s instead of 9. Each call renews, or finds
    it renewed a moment before by the maintenance call before a tick (which renews when due
    too): either way the renewal is then about a whole interval away, where a task asking
    every 0.5 s finds it half an interval away every other call."""
    calls = await renewal_calls(make_node, monkeypatch, say_when=True)
    assert 2 <= len(calls) <= 6, calls
    assert all(due_in is not None and due_in > 0.7 for _, due_in in calls), calls
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(calls)]
    assert all(gap < 2.0 for gap in gaps), gaps  # none a whole interval late: none missed


@pytest.mark.postgres
async def test_negative_control_a_renewal_that_does_not_say_when_is_asked_every_poll(
    make_node: MakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count above can tell: asked every :data:`RENEWAL_POLL_S`, most calls find the
    renewal not due."""
    calls = await renewal_calls(make_node, monkeypatch, say_when=False)
    assert sum(due_in is not None and due_in < 0.7 for _, due_in in calls) >= 2, calls
