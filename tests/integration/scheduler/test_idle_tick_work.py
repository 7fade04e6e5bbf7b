"""A tick opens only the transactions whose work is there (store/tick_work.py), on SQLite
and PostgreSQL: an idle tick is one read (on SQLite without the writer lock), and the one
read says "there is work" exactly when the transaction that takes it finds some: due
slots, rolled-out rows waiting for their wave, queued runs, stop requests for live runs.

The fixture clock starts at 2026-03-02 09:00:30 UTC; runs execute on the fake executor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.fake import FakeExecutor, FakeOutcome
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.tick_work import TickWork

NEVER_TODAY = "0 0 1 1 *"
AT_0901 = "1 9 2 3 *"
NOTHING = TickWork(due=False, rollouts=False, queued=False, stops=False)


@dataclass
class Sent:
    """The statements and the ends of transactions an engine sent."""

    statements: list[str] = field(default_factory=list)
    transactions: int = 0


@contextmanager
def sent(app: App) -> Iterator[Sent]:
    seen = Sent()

    def statement(_conn: Any, _cursor: Any, text: str, *_: Any) -> None:
        seen.statements.append(text)

    def ended(_conn: Any) -> None:
        seen.transactions += 1

    engine = app.db.engine
    listeners = (("before_cursor_execute", statement), ("commit", ended), ("rollback", ended))
    for name, fn in listeners:
        event.listen(engine, name, fn)
    try:
        yield seen
    finally:
        for name, fn in listeners:
            event.remove(engine, name, fn)


@pytest.fixture
def box(app: App) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    return "box"


def waiting(scheduler: Scheduler, clock: FakeClock) -> TickWork:
    return scheduler.runs.waiting(clock.now, live=bool(scheduler.running))


async def test_an_idle_tick_is_one_read_transaction(
    app: App, operator: Actor, box: str, fake_scheduler: Scheduler
) -> None:
    jobs.add_job(app, operator, "yearly", JobSpec(NEVER_TODAY, "true"), target=box)
    await fake_scheduler.tick()  # the first tick's own work (closing lost runs) done
    with sent(app) as idle:
        stats = await fake_scheduler.tick()
    assert stats.dispatched == 0
    assert idle.transactions == 1, idle.statements
    selects = [s for s in idle.statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1, idle.statements
    # On SQLite the one read does not take the single writer lock.
    assert not any("IMMEDIATE" in s.upper() for s in idle.statements), idle.statements


async def test_negative_control_a_tick_with_a_due_slot_opens_more_than_one(
    app: App, operator: Actor, box: str, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    """The counter above can fail: a tick that claims a slot sends more."""
    jobs.add_job(app, operator, "once", JobSpec(AT_0901, "true"), target=box)
    await fake_scheduler.tick()
    clock.advance(seconds=30)
    with sent(app) as busy:
        stats = await fake_scheduler.tick()
    assert stats.dispatched == 1
    assert busy.transactions > 1
    if app.db.dialect == "sqlite":  # and the writer-lock check above can fail too
        assert any("IMMEDIATE" in s.upper() for s in busy.statements), busy.statements


async def test_a_due_slot_is_seen_until_it_is_claimed(
    app: App, operator: Actor, box: str, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    jobs.add_job(app, operator, "once", JobSpec(AT_0901, "true"), target=box)
    assert waiting(fake_scheduler, clock) == NOTHING
    clock.advance(seconds=30)  # 09:01:00
    assert waiting(fake_scheduler, clock).due
    assert (await fake_scheduler.tick()).dispatched == 1
    await fake_scheduler.idle()
    assert waiting(fake_scheduler, clock) == NOTHING


async def test_a_queued_run_is_seen_until_it_starts(
    app: App, operator: Actor, box: str, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    jobs.add_job(app, operator, "yearly", JobSpec(NEVER_TODAY, "true"), target=box)
    runs.request_run(app, operator, "yearly")
    assert waiting(fake_scheduler, clock) == TickWork(False, False, True, False)
    assert (await fake_scheduler.tick()).dispatched == 1
    await fake_scheduler.idle()
    assert waiting(fake_scheduler, clock) == NOTHING


async def test_rolled_out_rows_are_seen_until_their_wave_starts(
    app: App,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
) -> None:
    admin = Actor("admin", "admin")
    for name in ("a", "b"):
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL))
    spec = JobSpec(AT_0901, "reload", batch="1", batch_pause_s=60)
    jobs.add_job(app, operator, "reload", spec, bulk=True)
    clock.advance(seconds=30)  # 09:01:00: the first wave (one target) starts
    assert (await fake_scheduler.tick()).dispatched == 1
    await fake_scheduler.idle()
    work = waiting(fake_scheduler, clock)
    assert work.rollouts and not work.due, work  # the second row waits for its wave
    clock.advance(seconds=61)
    assert (await fake_scheduler.tick()).dispatched == 1
    await fake_scheduler.idle()
    assert waiting(fake_scheduler, clock) == NOTHING


async def test_a_stop_asked_elsewhere_is_seen_while_the_run_is_live(
    app: App,
    operator: Actor,
    box: str,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
) -> None:
    fake.script = {"sleep 3600": FakeOutcome(duration_s=3600)}
    jobs.add_job(app, operator, "long", JobSpec(NEVER_TODAY, "sleep 3600"), target=box)
    [run_id] = runs.request_run(app, operator, "long")
    await fake_scheduler.tick()
    assert run_id in fake_scheduler.running
    assert waiting(fake_scheduler, clock) == NOTHING
    runs.stop_run(app, operator, run_id)
    assert waiting(fake_scheduler, clock).stops
    # Without live runs there is nobody to stop: the question is not asked.
    assert not fake_scheduler.runs.waiting(clock.now, live=False).stops


async def test_the_question_follows_the_shards_the_scheduler_starts(
    app: App, operator: Actor, box: str, fake_scheduler: Scheduler, clock: FakeClock
) -> None:
    """The statement is built once per set of shards: a worker given other shards asks
    about those (a question kept from before would still see the due slot)."""
    jobs.add_job(app, operator, "once", JobSpec(AT_0901, "true"), target=box)
    clock.advance(seconds=30)  # 09:01:00
    store = fake_scheduler.runs
    assert store.waiting(clock.now, live=False).due
    store.shards = frozenset({10_000})  # no target is in that shard
    assert store.waiting(clock.now, live=False) == NOTHING
    store.shards = None
    assert store.waiting(clock.now, live=False).due
