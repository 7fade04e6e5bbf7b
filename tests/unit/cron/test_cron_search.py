"""Fire times in UTC: field semantics, day-of-month / day-of-week rules, extensions, edges."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest

from fleetcron.cron import parse
from fleetcron.errors import InvalidInput


def utc(
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    microsecond: int = 0,
) -> datetime:
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)


def fires(text: str, start: datetime, count: int) -> list[datetime]:
    return list(itertools.islice(parse(text).iter_after(start), count))


def test_next_after_is_strictly_after_a_fire_time() -> None:
    assert parse("0 * * * *").next_after(utc(2026, 1, 1, 5)) == utc(2026, 1, 1, 6)


def test_next_after_rounds_up_from_seconds() -> None:
    assert parse("* * * * *").next_after(utc(2026, 1, 1, 5, 0, 30)) == utc(2026, 1, 1, 5, 1)


def test_fire_times_have_zero_seconds_and_microseconds() -> None:
    fire = parse("* * * * *").next_after(utc(2026, 1, 1, 5, 0, 30, 999))
    assert (fire.second, fire.microsecond) == (0, 0)


def test_a_step_restarts_every_hour() -> None:
    assert fires("*/35 * * * *", utc(2026, 1, 1), 4) == [
        utc(2026, 1, 1, 0, 35),
        utc(2026, 1, 1, 1, 0),
        utc(2026, 1, 1, 1, 35),
        utc(2026, 1, 1, 2, 0),
    ]


def test_a_range_with_a_step_starts_at_the_range_start() -> None:
    assert fires("5-20/10 * * * *", utc(2026, 1, 1), 3) == [
        utc(2026, 1, 1, 0, 5),
        utc(2026, 1, 1, 0, 15),
        utc(2026, 1, 1, 1, 5),
    ]


def test_a_list_fires_at_each_listed_value() -> None:
    assert fires("0 0 1,15 * *", utc(2026, 1, 1), 3) == [
        utc(2026, 1, 15),
        utc(2026, 2, 1),
        utc(2026, 2, 15),
    ]


def test_day_31_fires_only_in_months_that_have_it() -> None:
    months = [fire.month for fire in fires("0 0 31 * *", utc(2026, 1, 1), 7)]
    assert months == [1, 3, 5, 7, 8, 10, 12]


def test_a_leap_day_schedule_fires_only_in_leap_years_and_not_in_2100() -> None:
    years = [fire.year for fire in fires("0 0 29 2 *", utc(2089, 1, 1), 4)]
    assert years == [2092, 2096, 2104, 2108]


def test_a_leap_day_schedule_goes_back_across_2100() -> None:
    assert parse("0 0 29 2 *").previous_before(utc(2104, 1, 1)) == utc(2096, 2, 29)


def test_sunday_is_both_zero_and_seven() -> None:
    assert parse("0 0 * * 7").next_after(utc(2026, 1, 1)) == utc(2026, 1, 4)
    assert parse("0 0 * * 0").next_after(utc(2026, 1, 1)) == utc(2026, 1, 4)


def test_a_saturday_to_sunday_range_covers_the_weekend() -> None:
    assert [f.day for f in fires("0 0 * * sat-sun", utc(2026, 1, 1), 3)] == [3, 4, 10]


def test_both_restricted_day_fields_match_either_day() -> None:
    # 2026-01-05 is a Monday; the 10th is a Saturday
    assert [f.day for f in fires("0 0 10 * 1", utc(2026, 1, 1), 3)] == [5, 10, 12]


def test_a_day_of_month_starting_with_a_star_requires_both_day_fields() -> None:
    # odd days that are Mondays: 2026-01-05 is a Monday; Mondays on odd days follow
    days = fires("0 0 */2 * 1", utc(2026, 1, 1), 4)
    assert all(fire.weekday() == 0 and fire.day % 2 == 1 for fire in days)
    assert days[0] == utc(2026, 1, 5)


def test_a_day_of_week_starting_with_a_star_requires_both_day_fields() -> None:
    assert [f.day for f in fires("0 0 1,15 * */1", utc(2026, 1, 1), 2)] == [15, 1]


def test_a_full_range_day_of_month_is_restricted_so_either_field_matches() -> None:
    days = fires("0 0 1-31 * 1", utc(2026, 1, 1), 5)
    assert [f.day for f in days] == [2, 3, 4, 5, 6]


def test_last_day_of_month_fires_on_the_last_day() -> None:
    assert [f.date().isoformat() for f in fires("0 0 L * *", utc(2028, 1, 1), 3)] == [
        "2028-01-31",
        "2028-02-29",
        "2028-03-31",
    ]


def test_last_weekday_of_month_moves_off_weekends() -> None:
    # 2026-01-31 is a Saturday, 2026-05-31 a Sunday, 2026-03-31 a Tuesday
    got = [f.day for f in fires("0 0 LW * *", utc(2026, 1, 1), 5)]
    assert got == [30, 27, 31, 30, 29]


def test_nth_weekday_fires_on_that_week() -> None:
    # first Mondays of 2026: Jan 5, Feb 2, Mar 2
    assert [f.day for f in fires("0 0 * * mon#1", utc(2026, 1, 1), 3)] == [5, 2, 2]


def test_a_fifth_weekday_skips_months_without_one() -> None:
    got = [(f.month, f.day) for f in fires("0 0 * * fri#5", utc(2026, 1, 1), 2)]
    assert got == [(1, 30), (5, 29)]


def test_last_weekday_of_a_kind_fires_in_the_last_week() -> None:
    # last Fridays of 2026: Jan 30, Feb 27
    assert [f.day for f in fires("0 0 * * 5L", utc(2026, 1, 1), 2)] == [30, 27]


def test_extensions_mix_with_plain_values_in_a_list() -> None:
    assert [f.day for f in fires("0 0 1,L * *", utc(2026, 1, 1), 3)] == [31, 1, 28]


def test_day_of_month_extensions_join_day_of_week_with_or() -> None:
    # last day of month OR any Monday
    got = [f.day for f in fires("0 0 L * 1", utc(2026, 1, 24), 3)]
    assert got == [26, 31, 2]


def test_a_star_day_of_month_makes_day_of_week_extensions_stand_alone() -> None:
    assert [f.day for f in fires("0 0 * * 1#2", utc(2026, 1, 1), 1)] == [12]


def test_previous_before_finds_the_last_fire_strictly_before() -> None:
    assert parse("*/35 * * * *").previous_before(utc(2026, 1, 1, 1, 0)) == utc(2026, 1, 1, 0, 35)


def test_previous_before_counts_a_fire_earlier_in_the_same_minute() -> None:
    schedule = parse("*/35 * * * *")
    assert schedule.previous_before(utc(2026, 1, 1, 1, 0, 1)) == utc(2026, 1, 1, 1, 0)


def test_previous_before_crosses_months_and_years() -> None:
    assert parse("0 0 31 * *").previous_before(utc(2026, 3, 1)) == utc(2026, 1, 31)
    assert parse("@yearly").previous_before(utc(2026, 1, 1)) == utc(2025, 1, 1)


@pytest.mark.parametrize("text", ["0 2 15 * 1", "30 4 1,15 * 5", "0 0 LW * *", "0 0 * * 5L"])
def test_previous_before_mirrors_next_after(text: str) -> None:
    schedule = parse(text)
    forward = fires(text, utc(2026, 1, 1), 20)
    backward = [schedule.previous_before(fire) for fire in forward[1:]]
    assert backward == forward[:-1]


def test_between_yields_fires_in_the_half_open_interval() -> None:
    got = list(parse("0 * * * *").between(utc(2026, 1, 1, 0), utc(2026, 1, 1, 3)))
    assert got == [utc(2026, 1, 1, 1), utc(2026, 1, 1, 2), utc(2026, 1, 1, 3)]


def test_between_is_empty_when_the_end_is_not_after_the_start() -> None:
    assert list(parse("* * * * *").between(utc(2026, 1, 1), utc(2026, 1, 1))) == []


def test_results_are_in_the_schedule_zone_whatever_the_input_zone() -> None:
    schedule = parse("0 9 * * *", "Europe/Berlin")
    fire = schedule.next_after(utc(2026, 1, 1))
    assert fire.tzinfo == schedule.tz
    assert fire.isoformat() == "2026-01-01T09:00:00+01:00"


def test_a_fixed_offset_input_is_converted_first() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert parse("0 * * * *").next_after(datetime(2026, 1, 1, 2, 30, tzinfo=plus_two)) == utc(
        2026, 1, 1, 1
    )


def test_it_rejects_a_naive_datetime_naming_the_argument() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse("* * * * *").next_after(datetime(2026, 1, 1))
    assert caught.value.field == "t"
    assert "time zone" in caught.value.message


def test_between_rejects_a_naive_end() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse("* * * * *").between(utc(2026, 1, 1), datetime(2026, 1, 2))
    assert caught.value.field == "end"


def test_it_reports_running_out_of_years_as_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse("0 0 1 1 *").next_after(utc(9999, 6, 1))
