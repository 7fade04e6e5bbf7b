"""The typed ``runs.status`` column: statuses come back as RunStatus, strings that are not a
status are refused on write, and the stored text is unchanged (plain strings)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import StatementError

from fleetcron.app import App
from fleetcron.core.statuses import RunStatus
from fleetcron.store.schema import Run

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _run(status: RunStatus | str, attempt: int = 1) -> Run:
    return Run(
        assignment_id=1,
        job_id=1,
        target_id=1,
        job_name="j",
        target_name="t",
        origin="schedule",
        command="true",
        scheduled_for=AT,
        trigger="schedule",
        attempt=attempt,
        status=status,
        node="n1",
        actor="system",
        created_at=AT,
    )


def test_status_round_trips_as_the_enum_and_is_stored_as_text(app: App) -> None:
    with app.db.session() as session:
        session.add(_run(RunStatus.TIMED_OUT))
    with app.db.session() as session:
        run = session.scalars(select(Run)).one()
        assert type(run.status) is RunStatus and run.status is RunStatus.TIMED_OUT
        stored = session.execute(text("SELECT status FROM runs")).scalar_one()
        assert type(stored) is str and stored == "timed_out"
        found = session.scalars(select(Run.id).where(Run.status == "timed_out")).all()
        assert found == [run.id]


def test_an_unknown_status_is_refused_naming_the_column(app: App) -> None:
    refused = r"runs\.status: 'exploded' is not one of queued, pending, running, succeeded"
    with pytest.raises(StatementError, match=refused), app.db.session() as session:
        session.add(_run("exploded"))
    with app.db.session() as session:
        assert session.scalars(select(Run)).all() == []
