"""DST: Debian cron's fixed-time and wildcard rules, in several zones, both directions.

Transitions used (2026):
  America/New_York  spring forward 2026-03-08 02:00 EST -> 03:00 EDT
                    fall back      2026-11-01 02:00 EDT -> 01:00 EST (01:00-01:59 twice)
  Europe/Berlin     spring forward 2026-03-29 02:00 CET -> 03:00 CEST
                    fall back      2026-10-25 03:00 CEST -> 02:00 CET (02:00-02:59 twice)
  America/Santiago  spring forward 2026-09-06 00:00 -04 -> 01:00 -03 (no midnight)
  America/Havana    spring forward 2026-03-08 00:00 CST -> 01:00 CDT (no midnight)
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from fleetcron.cron import parse

NEW_YORK = "America/New_York"
BERLIN = "Europe/Berlin"


def local(
    zone: str,
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    *,
    fold: int = 0,
) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(zone), fold=fold)


def fires(text: str, zone: str, start: datetime, count: int) -> list[str]:
    schedule = parse(text, zone)
    return [f.isoformat() for f in itertools.islice(schedule.iter_after(start), count)]


def backwards(text: str, zone: str, start: datetime, count: int) -> list[str]:
    schedule = parse(text, zone)
    result = []
    moment = start
    for _ in range(count):
        moment = schedule.previous_before(moment)
        result.append(moment.isoformat())
    return result


# -- fixed-time jobs ---------------------------------------------------------------------


def test_a_fixed_job_in_the_skipped_hour_fires_right_after_the_jump_in_new_york() -> None:
    assert fires("30 2 * * *", NEW_YORK, local(NEW_YORK, 2026, 3, 7, 12), 2) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]


def test_a_fixed_job_in_the_skipped_hour_fires_right_after_the_jump_in_berlin() -> None:
    assert fires("15 2 * * *", BERLIN, local(BERLIN, 2026, 3, 28, 12), 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:15:00+02:00",
    ]


def test_several_skipped_fixed_slots_collapse_into_one_fire() -> None:
    assert fires("0,30 2,3 * * *", NEW_YORK, local(NEW_YORK, 2026, 3, 8, 1), 3) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
        "2026-03-09T02:00:00-04:00",
    ]


def test_a_fixed_job_in_the_repeated_hour_fires_once_on_the_first_pass_in_new_york() -> None:
    assert fires("30 1 * * *", NEW_YORK, local(NEW_YORK, 2026, 10, 31, 12), 2) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]


def test_a_fixed_job_in_the_repeated_hour_fires_once_on_the_first_pass_in_berlin() -> None:
    assert fires("30 2 * * *", BERLIN, local(BERLIN, 2026, 10, 24, 12), 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def test_a_fixed_job_does_not_refire_when_asked_from_the_second_pass() -> None:
    second_pass = local(NEW_YORK, 2026, 11, 1, 1, 10, fold=1)
    assert fires("30 1 * * *", NEW_YORK, second_pass, 1) == ["2026-11-02T01:30:00-05:00"]


def test_a_fixed_job_looks_back_from_the_second_pass_to_the_first() -> None:
    second_pass = local(NEW_YORK, 2026, 11, 1, 1, 10, fold=1)
    assert backwards("30 1 * * *", NEW_YORK, second_pass, 1) == ["2026-11-01T01:30:00-04:00"]


def test_a_fixed_job_looks_back_to_the_collapsed_fire_after_the_jump() -> None:
    assert backwards("30 2 * * *", NEW_YORK, local(NEW_YORK, 2026, 3, 8, 3, 5), 2) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-07T02:30:00-05:00",
    ]


def test_a_daily_job_fires_after_a_missing_midnight_in_santiago() -> None:
    zone = "America/Santiago"
    assert fires("@daily", zone, local(zone, 2026, 9, 5, 12), 2) == [
        "2026-09-06T01:00:00-03:00",
        "2026-09-07T00:00:00-03:00",
    ]


def test_a_daily_job_fires_after_a_missing_midnight_in_havana() -> None:
    zone = "America/Havana"
    assert fires("@daily", zone, local(zone, 2026, 3, 7, 12), 1) == ["2026-03-08T01:00:00-04:00"]


# -- wildcard jobs -------------------------------------------------------------------------


def test_a_wildcard_job_skips_the_missing_hour_in_new_york() -> None:
    assert fires("*/30 * * * *", NEW_YORK, local(NEW_YORK, 2026, 3, 8, 1), 3) == [
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]


def test_an_hourly_job_skips_the_missing_hour_in_berlin() -> None:
    assert fires("@hourly", BERLIN, local(BERLIN, 2026, 3, 29, 0, 30), 3) == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]


def test_a_wildcard_job_fires_in_both_passes_of_the_repeated_hour_in_new_york() -> None:
    assert fires("*/30 * * * *", NEW_YORK, local(NEW_YORK, 2026, 11, 1, 0, 45), 6) == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T02:30:00-05:00",
    ]


def test_an_hourly_job_fires_twice_in_the_repeated_hour_in_berlin() -> None:
    assert fires("0 * * * *", BERLIN, local(BERLIN, 2026, 10, 25, 1, 30), 4) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T04:00:00+01:00",
    ]


def test_a_wildcard_job_started_in_the_first_pass_continues_into_the_second() -> None:
    first_pass = local(NEW_YORK, 2026, 11, 1, 1, 40)
    assert fires("*/30 * * * *", NEW_YORK, first_pass, 2) == [
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
    ]


def test_a_wildcard_job_goes_back_through_both_passes() -> None:
    assert backwards("*/30 * * * *", NEW_YORK, local(NEW_YORK, 2026, 11, 1, 2, 10), 5) == [
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:00:00-04:00",
    ]


def test_a_wildcard_job_goes_back_over_the_missing_hour() -> None:
    assert backwards("*/30 * * * *", NEW_YORK, local(NEW_YORK, 2026, 3, 8, 3, 10), 3) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T01:00:00-05:00",
    ]


def test_a_wildcard_hour_in_the_missing_hour_fires_nothing_that_day() -> None:
    assert fires("* 2 * * *", NEW_YORK, local(NEW_YORK, 2026, 3, 8, 0), 1) == [
        "2026-03-09T02:00:00-04:00"
    ]


@pytest.mark.parametrize(
    ("text", "zone", "start"),
    [
        ("*/7 * * * *", NEW_YORK, datetime(2026, 10, 31, 20, tzinfo=UTC)),
        ("15,45 1,2 * * *", NEW_YORK, datetime(2026, 10, 31, 20, tzinfo=UTC)),
        ("*/20 * * * *", BERLIN, datetime(2026, 3, 28, 20, tzinfo=UTC)),
        ("0-59/10 1-3 * * *", BERLIN, datetime(2026, 10, 24, 20, tzinfo=UTC)),
        ("*/15 * * * *", "America/Santiago", datetime(2026, 4, 4, 20, tzinfo=UTC)),
    ],
)
def test_fire_times_strictly_increase_and_previous_before_walks_them_back(
    text: str, zone: str, start: datetime
) -> None:
    schedule = parse(text, zone)
    forward = list(itertools.islice(schedule.iter_after(start), 80))
    instants = [f.astimezone(UTC) for f in forward]
    assert all(a < b for a, b in itertools.pairwise(instants))
    assert [schedule.previous_before(f).astimezone(UTC) for f in forward[1:]] == instants[:-1]


def test_iterating_agrees_with_repeated_next_after_across_transitions() -> None:
    schedule = parse("*/10 * * * *", NEW_YORK)
    start = datetime(2026, 10, 31, 23, tzinfo=UTC)
    iterated = list(itertools.islice(schedule.iter_after(start), 60))
    stepped = []
    moment = start
    for _ in range(60):
        moment = schedule.next_after(moment)
        stepped.append(moment)
    assert [f.astimezone(UTC) for f in iterated] == [f.astimezone(UTC) for f in stepped]
