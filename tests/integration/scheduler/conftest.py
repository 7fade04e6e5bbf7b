"""Helpers for driving a real scheduler with a hand-moved clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fixtures.app import FakeClock
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.context import App


@pytest.fixture
async def scheduler(app: App, clock: FakeClock) -> AsyncIterator[Scheduler]:
    the_scheduler = Scheduler(app, clock=clock)
    await the_scheduler.start()
    yield the_scheduler
    await the_scheduler.shutdown()
