"""What a round of alert evaluation reads: the runs that may change a state, not the window.

While an outage goes on, every round used to load each failure of the 15-minute window
again (with its stderr) only to find the state unchanged. A round now asks the database,
per assignment, for the first run after its last change that could change it, and loads
the runs from there on: none while nothing changes, the new ones when something does.
Counted here as the rows of run statements that select ``runs.id`` (a run read in full);
the aggregate rows (one per assignment) are counted apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql import Select
from sqlalchemy.sql.util import find_tables

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.executors.fake import FakeExecutor
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.alerts.evaluation import evaluate_alerts
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.store.schema import Incident, NotificationRule, Run
from integration.notify.conftest import WebhookReceiver
from integration.notify.scenario import FLEET, add_fleet, failing, hook

TARGETS = FLEET[:3]
SLOT = datetime(2026, 3, 2, 9, 1, tzinfo=UTC)  # the first slot after the clock's start


@dataclass
class RunReads:
    """Rows read by the statements over ``runs`` during one evaluation."""

    full: list[int] = field(default_factory=list)
    """The ids of the runs read in full (statements selecting ``runs.id``)."""
    other: int = 0
    """Rows of the other statements over ``runs`` (aggregates: one per assignment)."""


def _reads_runs(statement: Any) -> tuple[bool, bool]:
    """Whether a statement reads ``runs``, and whether it selects ``runs.id``."""
    if not isinstance(statement, Select):
        return False, False
    reads = any(table is Run.__table__ for table in find_tables(statement))
    full = any(
        getattr(column, "table", None) is Run.__table__ and column.key == "id"
        for column in statement.selected_columns
    )
    return reads, full


@contextmanager
def counting_run_reads() -> Iterator[RunReads]:
    reads = RunReads()

    def count(state: ORMExecuteState) -> Any:
        over_runs, full = _reads_runs(state.statement)
        if not over_runs:
            return None
        frozen = state.invoke_statement().freeze()
        rows = frozen().all()
        if full:
            reads.full.extend(row.id for row in rows)
        else:
            reads.other += len(rows)
        return frozen()

    event.listen(Session, "do_orm_execute", count)
    try:
        yield reads
    finally:
        event.remove(Session, "do_orm_execute", count)


async def minute(app: App, scheduler: Scheduler, clock: FakeClock) -> RunReads:
    """The next slot fires and finishes; then one round of evaluation, its reads counted."""
    clock.advance(minutes=1)
    await scheduler.tick()
    await scheduler.idle()
    with counting_run_reads() as reads:
        evaluate_alerts(app, clock.now)
    return reads


def failed_in_window(app: App) -> int:
    with app.db.read() as session:
        return len(list(session.scalars(Run.__table__.select().where(Run.status == "failed"))))


async def test_a_round_of_an_ongoing_outage_reads_no_run_it_has_judged(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    hook(app, admin, webhook, group_wait_s=0)  # announced in the round that opens it
    add_fleet(app, TARGETS)
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = failing()

    rounds = [await minute(app, fake_scheduler, clock) for _ in range(12)]

    # The first round reads the three first failures, which open the incident (and
    # what its first message shows).
    with app.db.read() as session:
        first = set(session.scalars(Run.__table__.select().where(Run.scheduled_for == SLOT)))
    assert len(first) == len(TARGETS)
    assert first <= set(rounds[0].full)
    # Every later round reads one aggregate row per assignment and no run, while the
    # window holds ever more failures (3 × 12 at the end).
    assert [(r.full, r.other) for r in rounds[1:]] == [([], len(TARGETS))] * 11
    assert failed_in_window(app) == len(TARGETS) * 12


async def test_a_round_in_which_a_target_recovers_reads_the_run_that_changed_it(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    # Negative control of the test above: the counter sees the runs a round does read.
    hook(app, admin, webhook)
    add_fleet(app, TARGETS)
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = failing()
    for _ in range(5):
        await minute(app, fake_scheduler, clock)
    fake.script = failing(unless=lambda name: name == TARGETS[0])

    recovering = await minute(app, fake_scheduler, clock)

    with app.db.read() as session:
        [success] = session.scalars(Run.__table__.select().where(Run.status == "succeeded"))
    assert recovering.full == [success]
    assert recovering.other == len(TARGETS) + 1  # the failures' aggregate, and the success's


@contextmanager
def counting_reads_of(name: str) -> Iterator[list[Any]]:
    """The statements that read the table ``name`` while the block runs (by name: an ORM
    statement names an annotated copy of the table)."""
    found: list[Any] = []

    def count(state: ORMExecuteState) -> None:
        statement = state.statement
        if isinstance(statement, Select) and any(
            getattr(t, "name", None) == name for t in find_tables(statement)
        ):
            found.append(statement)

    event.listen(Session, "do_orm_execute", count)
    try:
        yield found
    finally:
        event.remove(Session, "do_orm_execute", count)


async def test_a_round_reads_the_notification_rules_once(
    app: App,
    admin: Actor,
    operator: Actor,
    fake_scheduler: Scheduler,
    fake: FakeExecutor,
    clock: FakeClock,
    webhook: WebhookReceiver,
) -> None:
    # The round that opens the incident asks the rules three things: which successes hold
    # a target (recording the changes and releasing held targets) and which messages are
    # due; nothing in the round writes them, so they are read once.
    hook(app, admin, webhook, group_wait_s=0)
    add_fleet(app, TARGETS)
    jobs.add_job(app, operator, "backup", JobSpec("* * * * *", "backup"), bulk=True)
    fake.script = failing()
    clock.advance(minutes=1)
    await fake_scheduler.tick()
    await fake_scheduler.idle()

    with (
        counting_reads_of(NotificationRule.__tablename__) as rules,
        counting_reads_of(Incident.__tablename__) as incidents,
    ):
        queued = evaluate_alerts(app, clock.now)

    assert queued == 1  # the incident opened and its firing message was queued
    assert len(rules) == 1
    # Negative control: the counter counts every read of a table a round reads more than
    # once (the open incidents, for the halts, the host incidents and the messages).
    assert len(incidents) > 1
