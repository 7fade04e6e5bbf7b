"""History at a glance on a real database (SQLite and PostgreSQL): the slots of a job as
chart bars, a strip per job on a target, and duration percentiles."""

from __future__ import annotations

import pytest

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import NotFound, PermissionDenied
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import history
from fleetcron.services.targets import edit as targets
from integration.history.runs_helper import fire_minutes

EVERY_MINUTE = JobSpec(schedule="* * * * *", command="true")


def bulk_on(app: App, *names: str) -> None:
    for name in names:
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))
    jobs.add_job(app, Actor("olivia", "operator"), "sweep", EVERY_MINUTE, bulk=True)


def test_a_slot_of_a_bulk_job_takes_its_worst_outcome_and_its_longest_run(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    bulk_on(app, "a", "b")
    fire_minutes(
        app,
        clock,
        [
            [("succeeded", 100), ("succeeded", 300)],
            [("succeeded", 200), ("failed", 50)],
        ],
    )

    newest, oldest = history.job_slots(app, viewer, "sweep")

    assert (oldest.outcome, oldest.duration_ms, oldest.counts) == ("ok", 300, {"ok": 2})
    assert (newest.outcome, newest.duration_ms, newest.counts) == (
        "failed",
        200,
        {"ok": 1, "failed": 1},
    )


def test_the_chart_draws_bars_oldest_first_with_height_by_duration(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    bulk_on(app, "a")
    fire_minutes(app, clock, [[("succeeded", 1000)], [("failed", 500)], [("succeeded", 0)]])

    chart = history.job_chart(app, viewer, "sweep")

    assert [b.outcome for b in chart.bars] == ["ok", "failed", "ok"]
    assert [b.height for b in chart.bars] == [60, 30, 3]  # the last: the minimum height
    assert [b.x for b in chart.bars] == [0, 10, 20]
    assert "1 failed; longest 500 ms" in chart.bars[1].title


def test_the_chart_shows_only_the_newest_slots(app: App, viewer: Actor, clock: FakeClock) -> None:
    bulk_on(app, "a")
    fire_minutes(app, clock, [[("succeeded", ms)] for ms in (10, 20, 30, 40)])

    slots = history.job_slots(app, viewer, "sweep", limit=2)

    assert [s.duration_ms for s in slots] == [40, 30]


def test_a_target_has_one_strip_per_job_with_its_own_runs_only(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    bulk_on(app, "a", "b")
    fire_minutes(app, clock, [[("succeeded", 10), ("failed", 20)]])

    [strip] = history.target_strips(app, viewer, "b")

    assert strip.job == "sweep"
    assert [b.outcome for b in strip.chart.bars] == ["failed"]
    with pytest.raises(NotFound):
        history.target_strips(app, viewer, "nope")


def test_duration_percentiles_by_nearest_rank_over_finished_runs(
    app: App, viewer: Actor, clock: FakeClock
) -> None:
    bulk_on(app, "a")
    fire_minutes(app, clock, [[("succeeded", ms)] for ms in range(100, 2100, 100)])

    durations = history.duration_percentiles(app, viewer, "sweep")

    assert (durations.runs, durations.p50_ms, durations.p95_ms, durations.max_ms) == (
        20,
        1000,
        1900,
        2000,
    )


def test_a_job_without_runs_has_an_empty_chart_and_no_percentiles(app: App, viewer: Actor) -> None:
    bulk_on(app, "a")

    assert history.job_chart(app, viewer, "sweep").empty
    assert history.duration_percentiles(app, viewer, "sweep").p50_ms is None
    with pytest.raises(NotFound):
        history.job_chart(app, viewer, "nope")


def test_reading_history_needs_a_role_that_reads_runs(app: App) -> None:
    """Weighed in the project the actor acts in: a token scope that does not read is
    refused; an actor with no role there does not see the project at all."""
    bulk_on(app, "a")

    with pytest.raises(PermissionDenied):
        history.job_chart(app, Actor("victor", "viewer", scope="none"), "sweep")
    with pytest.raises(NotFound, match="project default does not exist"):
        history.job_chart(app, Actor("ghost", "nobody"), "sweep")
