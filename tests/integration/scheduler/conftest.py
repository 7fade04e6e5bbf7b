"""Helpers for driving a real scheduler with a hand-moved clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fixtures.app import FakeClock
from fleetcron.app import App
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler


@pytest.fixture
async def scheduler(app: App, clock: FakeClock) -> AsyncIterator[Scheduler]:
    the_scheduler = Scheduler(app, clock=clock)
    await the_scheduler.start()
    yield the_scheduler
    await the_scheduler.shutdown()


@pytest.fixture
def fake(clock: FakeClock) -> FakeExecutor:
    """An executor that runs nothing (scripted per test through ``fake.script``)."""
    return FakeExecutor(clock=clock)


@pytest.fixture
async def fake_scheduler(
    app: App, clock: FakeClock, fake: FakeExecutor
) -> AsyncIterator[Scheduler]:
    """A scheduler whose local targets run on ``fake``: for tests about scheduling and
    recording, where a real process would only add its own time."""
    the_scheduler = Scheduler(app, clock=clock, executors={"local": fake})
    await the_scheduler.start()
    yield the_scheduler
    await the_scheduler.shutdown()
