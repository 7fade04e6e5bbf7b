"""The dates of an iCalendar (RFC 5545) file, for a calendar of holidays or business days.

Parsing is left to ``icalendar`` (collective/icalendar): a maintained, typed library that
has parsed RFC 5545 since 2005 and is what Plone, Odoo and many Python projects use; it
handles line folding, escaping, parameters and the date and date-time value types that a
hand-written parser would get subtly wrong. Recurrence rules are expanded with
``dateutil.rrule``, which ``icalendar`` itself depends on.

What becomes a date: each ``VEVENT``'s days, from ``DTSTART`` up to (not including)
``DTEND`` (or ``DTSTART`` plus ``DURATION``; one day when neither is given), the way an
all-day event is written. A date-time start counts for its own date. A ``RRULE`` repeats
the event through its ``UNTIL``/``COUNT``, and at most :data:`HORIZON_YEARS` years after its
start; ``EXDATE`` dates are left out. Pure: takes the file's bytes.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Final

import icalendar
from dateutil.rrule import rrulestr

from fleetcron.errors import InvalidInput

#: A repeating event is expanded at most this many years after its start.
HORIZON_YEARS: Final = 20
#: The most dates one file may give (a file of more is not a calendar of days).
MAX_DATES: Final = 20_000


def _day(value: Any) -> date:
    return value.date() if isinstance(value, datetime) else value


def _refuse(problem: str) -> InvalidInput:
    return InvalidInput(
        f"file: {problem}",
        field="file",
        allowed="an iCalendar (.ics) file with VEVENTs (RFC 5545)",
    )


def parse_ics(data: bytes) -> frozenset[date]:
    """The dates the file's events cover; InvalidInput (field ``file``) when it does not
    parse, holds no event, or gives more than :data:`MAX_DATES` dates."""
    try:
        parsed = icalendar.Calendar.from_ical(data)
    except Exception as exc:  # the parser's own errors vary with the damage: all mean this
        raise _refuse(f"this is not an iCalendar file ({exc})") from None
    events = list(parsed.walk("VEVENT"))
    if not events:
        raise _refuse("the file holds no event (VEVENT)")
    days: set[date] = set()
    for number, event in enumerate(events, start=1):
        try:
            days.update(_event_days(event))
        except Exception as exc:  # a value the parser read but cannot make a date of
            raise _refuse(f"event {number} ({event.get('SUMMARY', '')!s}): {exc}") from None
        if len(days) > MAX_DATES:
            raise _refuse(f"it gives more than {MAX_DATES} dates")
    return frozenset(days)


def _event_days(event: Any) -> set[date]:
    if event.get("DTSTART") is None:
        raise ValueError("it has no DTSTART")
    start = event.decoded("DTSTART")
    length = _length(event, start)
    starts = [start]
    if event.get("RRULE") is not None:
        starts = _repeats(event, start)
    excluded = _excluded(event)
    days: set[date] = set()
    for first in starts:
        day = _day(first)
        if day in excluded:
            continue
        days.update(day + timedelta(days=n) for n in range(length))
    return days


def _length(event: Any, start: Any) -> int:
    """How many days one occurrence covers (at least one)."""
    days = 1
    if event.get("DTEND") is not None:
        end = event.decoded("DTEND")
        # A date end is exclusive (all-day events); a date-time end counts its own date.
        days = (_day(end) - _day(start)).days + (1 if isinstance(end, datetime) else 0)
    elif event.get("DURATION") is not None:
        days = int(event.decoded("DURATION").days)
    return max(1, days)


def _repeats(event: Any, start: Any) -> list[Any]:
    rule = event.get("RRULE").to_ical().decode()
    first = start if isinstance(start, datetime) else datetime(start.year, start.month, start.day)
    first = first.replace(tzinfo=None)
    horizon = first + timedelta(days=366 * HORIZON_YEARS)
    found: list[datetime] = []
    for fire in rrulestr(rule, dtstart=first):
        if fire > horizon or len(found) > MAX_DATES:
            break
        found.append(fire)
    return found


def _excluded(event: Any) -> set[date]:
    values = event.get("EXDATE")
    if values is None:
        return set()
    lists = values if isinstance(values, list) else [values]
    return {_day(item.dt) for exdate in lists for item in exdate.dts}


__all__ = ["HORIZON_YEARS", "MAX_DATES", "parse_ics"]
