"""``runs.skip_kind``: the run store records why it skipped a run, and migration 0010 fills
the column of older rows from their reasons."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

from alembic import command
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.ownership import Verdict
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import policy_from
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs_svc
from fleetcron.services.targets import edit as targets
from fleetcron.store.db import alembic_config
from fleetcron.store.runs import RunStore, Standalone
from fleetcron.store.schema import Run


class NobodyOwns(Standalone):
    """A guard whose coordination state is broken: nobody can prove ownership."""

    def verdict(self, session: Session, *, of_shards: Collection[int] | None = None) -> Verdict:
        return Verdict("invalid", "no owner row")


def kinds(app: App) -> list[tuple[str, str | None, str | None]]:
    with app.db.read() as session:
        rows = session.execute(select(Run.status, Run.reason, Run.skip_kind).order_by(Run.id))
        return [(status, reason, kind) for status, reason, kind in rows]


def test_skips_of_a_paused_target_are_kind_target_paused(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    store = RunStore(app.db, node="test", policy=policy_from(app), clock=clock)
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", JobSpec("* * * * *", "true"), target="box")
    targets.pause_target(app, admin, "box", "disk")
    runs_svc.request_run(app, admin, "reload", target="box")
    clock.advance(seconds=31)

    store.claim_due(clock.now)
    assert store.claim_queued(clock.now) == []

    assert sorted(kinds(app)) == [
        ("skipped", "target paused: disk", "target_paused"),
        ("skipped", "target paused: disk", "target_paused"),
    ]


def test_a_slot_nobody_can_own_is_kind_ownership_uncertain_and_a_run_has_no_kind(
    app: App, admin: Actor, clock: FakeClock
) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", JobSpec("* * * * *", "true"), target="box")
    clock.advance(seconds=31)
    broken = RunStore(app.db, node="test", guard=NobodyOwns(), policy=policy_from(app), clock=clock)
    broken.claim_due(clock.now)
    clock.advance(minutes=1)
    RunStore(app.db, node="test", policy=policy_from(app), clock=clock).claim_due(clock.now)

    assert kinds(app) == [
        ("skipped", "ownership uncertain: no owner row", "ownership_uncertain"),
        ("running", None, None),
    ]


REASONS = [
    ("skipped", "ownership uncertain: no owner row", "ownership_uncertain"),
    ("skipped", "overlap: the previous run is still going", "overlap"),
    ("skipped", "waiting for the previous owner: claim 7, past this slot's", "old_claim"),
    ("skipped", "target paused: disk", "target_paused"),
    ("skipped", "target paused", "target_paused"),
    ("skipped", "local targets are disabled", "local_disabled"),
    ("skipped", "the job or its target was removed before the run started", "removed"),
    ("skipped", "Ownership Uncertain: not the planner's words", None),
    ("missed", "ownership uncertain: a missed run keeps no kind", None),
    ("failed", None, None),
]


def test_migration_0010_fills_the_kind_of_older_skips_from_their_reason(app: App) -> None:
    config = alembic_config(engine=app.db.engine)
    command.downgrade(config, "0009")
    at = datetime(2026, 1, 1, tzinfo=UTC).replace(tzinfo=None)
    with app.db.engine.begin() as connection:
        for attempt, (status, reason, _) in enumerate(REASONS, start=1):
            connection.execute(
                text(
                    "INSERT INTO runs (assignment_id, job_id, target_id, job_name, target_name,"
                    " origin, command, scheduled_for, trigger, attempt, status, reason,"
                    " stdout_head, stdout_tail, stdout_bytes, stdout_truncated, stderr_head,"
                    " stderr_tail, stderr_bytes, stderr_truncated, node, actor, created_at)"
                    " VALUES (1, 1, 1, 'j', 't', 'schedule', 'true', :at, 'schedule', :attempt,"
                    " :status, :reason, '', '', 0, false, '', '', 0, false, 'n', 'system', :at)"
                ),
                {"at": at, "attempt": attempt, "status": status, "reason": reason},
            )

    command.upgrade(config, "head")

    assert kinds(app) == REASONS
