"""Calendars: named sets of dates, and the filter they put on a job's fire times.

A calendar holds dates listed by hand or imported from an iCalendar file
(``services/calendars``), and optionally a weekly base (``mon-fri``) less the dates of
another calendar (``except``): ``business-days`` is ``mon-fri`` except ``holidays``.

A job names calendars in two options: ``run_only_on`` (fire only on a date the calendar
holds) and ``never_on`` (never on a date it holds). A ``run_only_on`` calendar may carry a
position, ``business-days:last`` (or ``:first``, ``:2``, ``:-2``): the job fires only on the
calendar's last (first, second, second to last) date of each month, so "02:00 on the last
business day of the month" is ``0 2 * * *`` with ``run_only_on: business-days:last``.

Decided: a date a calendar excludes is simply not a fire time (no run is recorded, nothing
is missed or skipped), like a day-of-week field; :class:`CalendarSchedule` wraps the exact,
pure cron engine and only drops fire times whose **local date** (in the assignment's zone:
the job's, or the target's for a ``target`` job) the filter refuses. The cron engine is
untouched.

Pure: no I/O.
"""

from __future__ import annotations

import calendar as _calendar
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

from fleetcron.cron import CronSchedule
from fleetcron.errors import InvalidInput

#: How many refused dates :class:`CalendarSchedule` passes over looking for an allowed
#: fire time before it says the job never fires (about ten years).
MAX_DAYS: Final = 3700
TICK: Final = timedelta(microseconds=1)
_DAY_NAMES: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # date.weekday() order
_POSITIONS: Final = {"first": 1, "last": -1}
NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
NAME_RULE: Final = (
    "lowercase letters, digits, '-' and '_', at most 64, starting with a letter or digit"
)


@dataclass(frozen=True)
class Calendar:
    """A named set of dates: ``dates``, plus every date whose weekday (0 = Monday) is in
    ``weekdays`` unless ``without`` (the ``except`` calendar) holds it."""

    name: str
    dates: frozenset[date] = frozenset()
    weekdays: frozenset[int] = frozenset()
    without: Calendar | None = None

    def holds(self, day: date) -> bool:
        if day in self.dates:
            return True
        if day.weekday() not in self.weekdays:
            return False
        return self.without is None or not self.without.holds(day)

    def in_month(self, year: int, month: int) -> list[date]:
        days = _calendar.monthrange(year, month)[1]
        return [d for n in range(1, days + 1) if self.holds(d := date(year, month, n))]


@dataclass(frozen=True)
class DateRule:
    """What a job's calendars allow: ``only`` (with ``position``: the n-th date of each
    month, 1-based, negative from the end) and ``never``."""

    only: Calendar | None = None
    position: int | None = None
    never: Calendar | None = None
    _months: dict[tuple[int, int], frozenset[date]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def allows(self, day: date) -> bool:
        if self.never is not None and self.never.holds(day):
            return False
        if self.only is None:
            return True
        if self.position is None:
            return self.only.holds(day)
        return day in self._picked(day.year, day.month)

    def _picked(self, year: int, month: int) -> frozenset[date]:
        key = (year, month)
        if key not in self._months:
            assert self.only is not None and self.position is not None
            days = self.only.in_month(year, month)
            index = self.position - 1 if self.position > 0 else self.position
            picked = [days[index]] if -len(days) <= index < len(days) else []
            self._months[key] = frozenset(picked)
        return self._months[key]


class CalendarSchedule:
    """A cron schedule whose fire times on dates the rule refuses are dropped. Offers what
    planning and the previews use of :class:`CronSchedule` (``tz``, ``next_after``,
    ``iter_after``, ``between``)."""

    def __init__(self, schedule: CronSchedule, rule: DateRule) -> None:
        self.schedule = schedule
        self.rule = rule
        self.tz = schedule.tz
        self.text = schedule.text

    def _allowed(self, fire: datetime) -> bool:
        return self.rule.allows(fire.astimezone(self.tz).date())

    def next_after(self, t: datetime) -> datetime:
        """The first allowed fire time strictly after ``t``; InvalidInput (``run_only_on``)
        when none comes within :data:`MAX_DAYS` days of refused dates. A refused date is
        passed over whole: the search goes on from the next local midnight."""
        fire = self.schedule.next_after(t)
        for _ in range(MAX_DAYS):
            day = fire.astimezone(self.tz).date()
            if self.rule.allows(day):
                return fire
            midnight = datetime.combine(day + timedelta(days=1), time(), tzinfo=self.tz)
            fire = self.schedule.next_after(max(midnight.astimezone(UTC), fire) - TICK)
        raise InvalidInput(
            f"run_only_on: with these calendars the schedule {self.text!r} does not fire "
            f"within {MAX_DAYS} days after {t.isoformat()}",
            field="run_only_on",
            value=self.text,
            allowed="calendars that leave some of the schedule's dates",
        )

    def iter_after(self, t: datetime) -> Iterator[datetime]:
        fire = t
        while True:
            fire = self.next_after(fire)
            yield fire

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        return (fire for fire in self.schedule.between(start, end) if self._allowed(fire))

    def first_at_or_after(self, t: datetime) -> datetime:
        return self.next_after(t - TICK)

    def describe(self) -> str:
        return self.schedule.describe()


def parse_reference(text: str, *, field_name: str) -> tuple[str, int | None]:
    """``business-days:last`` -> ("business-days", -1); ``holidays`` -> ("holidays", None).
    A position is allowed in ``run_only_on`` only."""
    name, sep, where = text.strip().partition(":")
    if not sep:
        return name, None
    allowed = "NAME, or NAME:first, NAME:last, NAME:N or NAME:-N (N from 1 to 31)"
    if field_name != "run_only_on":
        raise InvalidInput(
            f"{field_name}: {text!r} has a position; only run_only_on takes one",
            field=field_name,
            value=text,
            allowed="a calendar name",
        )
    position = _POSITIONS.get(where.strip().lower())
    if position is None:
        try:
            position = int(where)
        except ValueError:
            position = 0
    if position == 0 or not -31 <= position <= 31:
        raise InvalidInput(
            f"{field_name}: {where!r} in {text!r} is not a position; expected {allowed}",
            field=field_name,
            value=text,
            allowed=allowed,
        )
    return name, position


def calendar_reference(text: str, *, field_name: str) -> str:
    """A job option naming a calendar, checked for its form (the name's existence is the
    jobs service's check): returned stripped; empty passes."""
    text = text.strip()
    if text:
        name, _ = parse_reference(text, field_name=field_name)
        if not NAME.fullmatch(name):
            raise InvalidInput(
                f"{field_name}: {name!r} is not a calendar name ({NAME_RULE})",
                field=field_name,
                value=text,
                allowed=NAME_RULE,
            )
    return text


def rule_of(run_only_on: str, never_on: str, calendars: Mapping[str, Calendar]) -> DateRule | None:
    """The rule of a job's two options (None: neither set). An unknown calendar is
    InvalidInput naming the option."""
    if not run_only_on and not never_on:
        return None
    only = position = never = None
    if run_only_on:
        name, position = parse_reference(run_only_on, field_name="run_only_on")
        only = _known(name, "run_only_on", calendars)
    if never_on:
        never = _known(parse_reference(never_on, field_name="never_on")[0], "never_on", calendars)
    return DateRule(only=only, position=position, never=never)


def _known(name: str, field_name: str, calendars: Mapping[str, Calendar]) -> Calendar:
    if name not in calendars:
        known = ", ".join(sorted(calendars)) or "none yet (fleetcron calendar add)"
        raise InvalidInput(
            f"{field_name}: there is no calendar {name!r}; known: {known}",
            field=field_name,
            value=name,
            allowed=f"a calendar's name ({known})",
        )
    return calendars[name]


def parse_weekdays(text: str, *, field_name: str = "weekdays") -> frozenset[int]:
    """``mon-fri`` or ``sat,sun`` -> weekday numbers (0 = Monday)."""
    found: set[int] = set()
    for item in (part.strip().lower() for part in text.split(",") if part.strip()):
        first, dash, last = item.partition("-")
        if first not in _DAY_NAMES or (dash and last not in _DAY_NAMES):
            raise InvalidInput(
                f"{field_name}: {item!r} is not a day or a range of days (mon..sun)",
                field=field_name,
                value=text,
                allowed="days such as mon-fri or sat,sun",
            )
        a = _DAY_NAMES.index(first)
        b = _DAY_NAMES.index(last) if dash else a
        found.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return frozenset(found)


def weekdays_text(days: frozenset[int]) -> str:
    return ",".join(_DAY_NAMES[d] for d in sorted(days))


__all__ = [
    "MAX_DAYS",
    "NAME",
    "NAME_RULE",
    "Calendar",
    "CalendarSchedule",
    "DateRule",
    "calendar_reference",
    "parse_reference",
    "parse_weekdays",
    "rule_of",
    "weekdays_text",
]
