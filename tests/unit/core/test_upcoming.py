"""Upcoming fires (pure): grouping by zone, counts of paused and disabled targets, DST,
spread, rollout waves and the limit.

Europe/Berlin changes to summer time on 2026-03-29 (02:00 CET -> 03:00 CEST) and back on
2026-10-25 (03:00 CEST -> 02:00 CET); Asia/Tokyo has no DST (UTC+9).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fleetcron.core.rollout import rollout_options
from fleetcron.core.upcoming import JobFacts, Member, rollout_plan, upcoming

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def members(*names: str, zone: str | None = None) -> list[Member]:
    return [Member(name, zone, enabled=True, target_paused=False) for name in names]


def test_a_fixed_zone_job_fires_once_per_slot_with_every_target_counted() -> None:
    job = JobFacts("reload", "bulk", "0 2 * * *", "Europe/Berlin", members("a", "b", "c"))

    [fire] = upcoming([job], NOON, 24, "UTC").fires

    assert fire.at == datetime(2026, 3, 3, 1, 0, tzinfo=UTC)  # 02:00 CET
    assert (fire.zone, fire.active, fire.paused, fire.disabled, fire.state) == (
        "Europe/Berlin",
        3,
        0,
        0,
        "fires",
    )


def test_a_target_local_job_has_one_fire_per_zone_at_each_zones_wall_time() -> None:
    job = JobFacts(
        "maint",
        "bulk",
        "0 2 * * *",
        "target",
        [
            *members("tokyo1", "tokyo2", zone="Asia/Tokyo"),
            *members("berlin1", zone="Europe/Berlin"),
            *members("nozone"),  # falls back to the default zone
        ],
    )

    fires = upcoming([job], NOON, 24, "America/New_York").fires

    assert [(f.zone, f.active, f.at.astimezone(UTC).hour) for f in fires] == [
        ("Asia/Tokyo", 2, 17),
        ("Europe/Berlin", 1, 1),
        ("America/New_York", 1, 7),
    ]
    assert all(f.at.hour == 2 for f in fires)  # each in its own zone's wall time


def test_paused_targets_and_disabled_assignments_are_counted_apart() -> None:
    job = JobFacts(
        "reload",
        "bulk",
        "0 13 * * *",
        "UTC",
        [
            Member("a", None, enabled=True, target_paused=False),
            Member("b", None, enabled=True, target_paused=True),
            Member("c", None, enabled=False, target_paused=False),
            Member("d", None, enabled=False, target_paused=True),
        ],
    )

    [fire] = upcoming([job], NOON, 2, "UTC").fires

    assert (fire.active, fire.paused, fire.disabled, fire.state) == (1, 1, 2, "fires")


def test_a_fire_with_only_paused_or_disabled_targets_says_so() -> None:
    paused = JobFacts("p", "individual", "0 13 * * *", "UTC", [Member("a", None, True, True)])
    disabled = JobFacts("d", "individual", "0 13 * * *", "UTC", [Member("a", None, False, False)])

    fires = upcoming([paused, disabled], NOON, 2, "UTC").fires

    assert [(f.job, f.state) for f in fires] == [("d", "disabled"), ("p", "paused")]


def test_a_slot_in_the_spring_forward_gap_fires_once_right_after_the_change() -> None:
    job = JobFacts("nightly", "individual", "30 2 * * *", "Europe/Berlin", members("a"))
    start = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)

    fires = upcoming([job], start, 48, "UTC").fires

    assert [f.at.astimezone(UTC) for f in fires] == [
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST: the 02:30 that did not exist
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),  # 02:30 CEST
    ]


def test_an_hourly_job_fires_in_both_hours_of_the_fall_back_in_instant_order() -> None:
    hourly = JobFacts("hourly", "individual", "0 * * * *", "Europe/Berlin", members("a"))
    start = datetime(2026, 10, 24, 23, 30, tzinfo=UTC)

    fires = upcoming([hourly], start, 3, "UTC").fires

    assert [f.at.astimezone(UTC).hour for f in fires] == [0, 1, 2]
    assert [f.at.hour for f in fires] == [2, 2, 3]  # 02:00 CEST, 02:00 CET, 03:00 CET


def test_fires_of_several_jobs_come_soonest_first_and_stop_at_the_limit() -> None:
    every_minute = JobFacts("a-minute", "individual", "* * * * *", "UTC", members("a"))
    hourly = JobFacts("b-hourly", "individual", "0 * * * *", "UTC", members("a"))

    result = upcoming([hourly, every_minute], NOON, 2, "UTC", limit=70)

    assert len(result.fires) == 70 and result.truncated
    assert [f.at for f in result.fires] == sorted(f.at for f in result.fires)
    assert ("b-hourly", datetime(2026, 3, 2, 13, 0, tzinfo=UTC)) in [
        (f.job, f.at) for f in result.fires
    ]
    assert not upcoming([hourly], NOON, 2, "UTC").truncated


def test_a_bulk_job_shows_its_spread_window() -> None:
    job = JobFacts("sweep", "bulk", "0 13 * * *", "UTC", members("a", "b"), spread_s=300)

    [fire] = upcoming([job], NOON, 2, "UTC").fires

    assert (fire.spread_s, fire.last_start) == (300, datetime(2026, 3, 2, 13, 5, tzinfo=UTC))


def test_a_rollout_starts_canaries_first_then_batches_of_the_rest() -> None:
    options = rollout_options("10%", 60, "2", "web1,web2")
    active = members(*(f"web{i}" for i in range(1, 33)))

    plan = rollout_plan(options, active)

    assert plan is not None
    assert (plan.canaries, plan.batch, plan.waves, plan.max_failures) == (2, 3, 11, 2)
    assert plan.describe() == (
        "2 canaries first, 10 batches of up to 3, 60 s between batches, halt after 2 failed"
    )


def test_a_job_without_rollout_options_has_no_plan() -> None:
    assert rollout_plan(rollout_options("", 0, "", ""), members("a")) is None
    assert rollout_plan(rollout_options("5", 0, "", ""), []) is None
