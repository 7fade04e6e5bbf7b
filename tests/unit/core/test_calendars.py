"""Calendars as a filter on fire times: the exact cron engine's times, less those whose
local date the job's calendars refuse; and the dates of an iCalendar file."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.core.calendars import (
    Calendar,
    CalendarSchedule,
    DateRule,
    parse_reference,
    parse_weekdays,
    rule_of,
)
from fleetcron.core.ics import parse_ics
from fleetcron.cron import parse_cached
from fleetcron.errors import InvalidInput

ZONES = ["UTC", "Europe/Warsaw", "America/New_York", "Australia/Lord_Howe", "Pacific/Kiritimati"]
HOLIDAYS = Calendar("holidays", frozenset({date(2027, 12, 24), date(2027, 12, 31)}))
BUSINESS = Calendar("business-days", weekdays=parse_weekdays("mon-fri"), without=HOLIDAYS)
KNOWN = {"holidays": HOLIDAYS, "business-days": BUSINESS}


def fires(
    rule: DateRule | None, cron: str, zone: str, start: datetime, days: int
) -> list[datetime]:
    schedule = parse_cached(cron, zone)
    wrapped = schedule if rule is None else CalendarSchedule(schedule, rule)
    return list(wrapped.between(start, start + timedelta(days=days)))


def test_business_days_are_weekdays_less_holidays() -> None:
    assert BUSINESS.holds(date(2027, 12, 23))  # a Thursday
    assert not BUSINESS.holds(date(2027, 12, 24))  # a Friday, a holiday
    assert not BUSINESS.holds(date(2027, 12, 25))  # a Saturday


def test_two_oclock_on_business_days() -> None:
    rule = rule_of("business-days", "", KNOWN)
    found = fires(rule, "0 2 * * *", "Europe/Warsaw", datetime(2027, 12, 20, tzinfo=UTC), 14)
    local = [f.astimezone(parse_cached("* * * * *", "Europe/Warsaw").tz).date() for f in found]
    assert [d.day for d in local] == [20, 21, 22, 23, 27, 28, 29, 30]


def test_the_last_business_day_of_the_month() -> None:
    rule = rule_of("business-days:last", "", KNOWN)
    found = fires(rule, "0 2 * * *", "UTC", datetime(2027, 10, 1, tzinfo=UTC), 92)
    # Oct 29 (Fri), Nov 30 (Tue), Dec 30 (Thu: the 31st is a holiday).
    assert [f.date() for f in found] == [date(2027, 10, 29), date(2027, 11, 30), date(2027, 12, 30)]


def test_never_on_drops_the_calendars_dates() -> None:
    rule = rule_of("", "holidays", KNOWN)
    found = fires(rule, "0 12 24,25 12 *", "UTC", datetime(2027, 12, 1, tzinfo=UTC), 30)
    assert [f.day for f in found] == [25]


def test_the_local_date_decides_in_the_assignments_zone() -> None:
    """00:30 on 2027-12-24 in Kiritimati (UTC+14) is 10:30 UTC on the 23rd."""
    rule = rule_of("", "holidays", KNOWN)
    utc_fires = fires(rule, "30 0 24 12 *", "UTC", datetime(2027, 12, 1, tzinfo=UTC), 30)
    kiri_fires = fires(
        rule, "30 0 24 12 *", "Pacific/Kiritimati", datetime(2027, 12, 1, tzinfo=UTC), 30
    )
    assert utc_fires == [] and kiri_fires == []
    assert fires(None, "30 0 24 12 *", "Pacific/Kiritimati", datetime(2027, 12, 1, tzinfo=UTC), 30)


@settings(max_examples=50, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    year=st.integers(min_value=2001, max_value=2060),
    month=st.integers(min_value=1, max_value=12),
    picks=st.sets(st.integers(min_value=0, max_value=59), max_size=20),
)
def test_the_filter_keeps_exactly_the_crons_times_on_allowed_dates(
    zone: str, year: int, month: int, picks: set[int]
) -> None:
    start = datetime(year, month, 1, tzinfo=UTC)
    chosen = frozenset(start.date() + timedelta(days=n) for n in picks)
    never = Calendar("off", chosen)
    tz = parse_cached("* * * * *", zone).tz
    plain = fires(None, "15 */5 * * *", zone, start, 60)
    filtered = fires(DateRule(never=never), "15 */5 * * *", zone, start, 60)
    assert filtered == [f for f in plain if f.astimezone(tz).date() not in chosen]
    # With no calendar dates, the filter gives back the cron's fire times exactly.
    assert fires(DateRule(never=Calendar("none")), "15 */5 * * *", zone, start, 60) == plain


def test_the_filter_property_catches_a_filter_that_drops_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control: with the date check planted to allow every date, the comparison
    the property makes fails (the refused date's fire times are still there)."""
    monkeypatch.setattr(CalendarSchedule, "_allowed", lambda _self, _fire: True)
    start = datetime(2027, 3, 1, tzinfo=UTC)
    chosen = frozenset({date(2027, 3, 2)})
    plain = fires(None, "15 */5 * * *", "UTC", start, 5)
    filtered = fires(DateRule(never=Calendar("off", chosen)), "15 */5 * * *", "UTC", start, 5)
    assert filtered != [f for f in plain if f.date() not in chosen]


def test_next_after_skips_to_an_allowed_date_and_says_when_there_is_none() -> None:
    wrapped = CalendarSchedule(
        parse_cached("0 2 * * *", "UTC"), rule_of("holidays", "", KNOWN) or DateRule()
    )
    assert wrapped.next_after(datetime(2027, 12, 1, tzinfo=UTC)) == datetime(
        2027, 12, 24, 2, tzinfo=UTC
    )
    with pytest.raises(InvalidInput) as caught:
        wrapped.next_after(datetime(2028, 1, 1, tzinfo=UTC))
    assert caught.value.field == "run_only_on"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("nosuch", "run_only_on"),
        ("business-days:middle", "run_only_on"),
        ("business-days:0", "run_only_on"),
    ],
)
def test_bad_references_name_the_option(text: str, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        rule_of(text, "", KNOWN)
    assert caught.value.field == field


def test_never_on_takes_no_position() -> None:
    with pytest.raises(InvalidInput) as caught:
        rule_of("", "holidays:last", KNOWN)
    assert caught.value.field == "never_on"
    assert parse_reference("business-days:-2", field_name="run_only_on") == ("business-days", -2)


ICS = b"""BEGIN:VCALENDAR\r
VERSION:2.0\r
PRODID:-//test//EN\r
BEGIN:VEVENT\r
UID:1\r
SUMMARY:Christmas\r
DTSTART;VALUE=DATE:20271224\r
DTEND;VALUE=DATE:20271227\r
END:VEVENT\r
BEGIN:VEVENT\r
UID:2\r
SUMMARY:New Year\r
DTSTART;VALUE=DATE:20270101\r
RRULE:FREQ=YEARLY;COUNT=3\r
EXDATE;VALUE=DATE:20280101\r
END:VEVENT\r
END:VCALENDAR\r
"""


def test_an_ics_file_gives_its_events_days_repeats_and_exceptions() -> None:
    assert parse_ics(ICS) == {
        date(2027, 12, 24),
        date(2027, 12, 25),
        date(2027, 12, 26),
        date(2027, 1, 1),
        date(2029, 1, 1),
    }


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not a calendar", "not an iCalendar file"),
        (b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n", "no event"),
        (ICS.replace(b"DTSTART;VALUE=DATE:20271224\r\n", b""), "no DTSTART"),
    ],
)
def test_a_file_that_does_not_parse_is_refused_naming_file(data: bytes, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_ics(data)
    assert caught.value.field == "file"
    assert says in caught.value.message
