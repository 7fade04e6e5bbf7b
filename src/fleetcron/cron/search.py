"""Fire-time search: the cron engine's core, forward and backward, with Debian cron DST rules.

Compatibility target: cronie / Debian cron (``man 5 crontab``), plus the extensions ``L``,
``LW``, ``DOW#n`` and ``DOWL`` that cronsim and Quartz users expect. See docs/cron.md.

Search works on local wall-clock minutes ``(year, month, day, hour, minute)``: each field is a
bitmask turned into "next allowed value" tables at parse time, and the search jumps field by
field (month, day, hour, minute) with carries, never minute by minute. Day tables depend only
on the month's length and the weekday of its first day, so there are at most 28 of them.

DST, as Debian cron handles it:

* A *fixed-time* job (neither the minute nor the hour field starts with ``*``; ``@daily``,
  ``@weekly``, ``@monthly`` and ``@yearly`` are fixed) whose wall-clock time is skipped at
  spring-forward fires once, at the first instant after the jump (02:30 on a day New York
  jumps from 02:00 to 03:00 fires at 03:00 EDT). Its time in the repeated hour at fall-back
  fires once, on the first pass.
* A *wildcard* job (minute or hour starts with ``*``; ``@hourly``) fires at every matching
  wall-clock time that exists, in real elapsed time: nothing for the skipped hour and both
  passes of the repeated hour.
* A job's DST policy (cron/dst.py) may choose otherwise: the finder takes whether a skipped
  time runs at the gap's end and which passes of a repeated time run; the two rules above
  are the default.
* Unlike Debian cron, an instant never fires twice: several skipped slots, or a skipped slot
  and the slot right after the jump, collapse into one fire time. Results strictly increase.

UTC and fixed-offset zones skip all of this and use plain wall-clock arithmetic.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from fleetcron.cron.fields import ParsedField
from fleetcron.cron.zones import has_fixed_offset, transition_after, utc_naive
from fleetcron.errors import InvalidInput

if TYPE_CHECKING:
    from fleetcron.cron.dst import FoldRule

Wall = tuple[int, int, int, int, int]

_MINUTE = timedelta(minutes=1)
# Every schedule that parses fires at least once per 400-year Gregorian cycle.
_SEARCH_YEARS = 401
# Bound on candidates examined for one answer; only DST gaps and folds need more than one.
_MAX_CANDIDATES = 100_000
_DAY_TABLE_CACHE_LIMIT = 4096


def _next_table(mask: int, low: int, high: int) -> list[int]:
    """``table[i]`` = smallest allowed value >= i, or -1; indexes low..high+1."""
    table = [-1] * (high + 2)
    following = -1
    for value in range(high, low - 1, -1):
        if mask >> value & 1:
            following = value
        table[value] = following
    return table


def _prev_table(mask: int, low: int, high: int) -> list[int]:
    """``table[i + 1]`` = largest allowed value <= i, or -1; i from low-1 to high."""
    table = [-1] * (high + 2)
    preceding = -1
    for value in range(low, high + 1):
        if mask >> value & 1:
            preceding = value
        table[value + 1] = preceding
    return table


def _last_weekday(days_in_month: int, first_dow: int) -> int:
    last_dow = (first_dow + days_in_month - 1) % 7
    if last_dow == 6:  # Saturday
        return days_in_month - 1
    if last_dow == 0:  # Sunday
        return days_in_month - 2
    return days_in_month


# Multiplying a 7-bit week by this repeats it five times, covering days 1-35.
_FIVE_WEEKS = sum(1 << (7 * week) for week in range(5))


def _weekly_bits(weekdays: int, first_dow: int) -> int:
    """Bits of the days 1-35 whose weekday is in the ``weekdays`` mask (0 = Sunday)."""
    # rotate so bit k means "day k + 1 of the month", then repeat the week
    week = ((weekdays >> first_dow) | (weekdays << (7 - first_dow))) & 0x7F
    return (week * _FIVE_WEEKS) << 1


def day_mask(dom: ParsedField, dow: ParsedField, days_in_month: int, first_dow: int) -> int:
    """Bitmask of the days (1-31) that match in a month of this length starting on first_dow
    (0 = Sunday)."""
    dom_bits = dom.mask
    if dom.last_day:
        dom_bits |= 1 << days_in_month
    if dom.last_weekday:
        dom_bits |= 1 << _last_weekday(days_in_month, first_dow)
    dow_bits = _weekly_bits(dow.mask, first_dow)
    for weekday, nth in dow.nth_weekdays:
        dow_bits |= 1 << (1 + (weekday - first_dow) % 7 + 7 * (nth - 1))
    if dow.last_weekdays:
        last_dow = (first_dow + days_in_month - 1) % 7
        for weekday in range(7):
            if dow.last_weekdays >> weekday & 1:
                dow_bits |= 1 << (days_in_month - (last_dow - weekday) % 7)
    month_days = ((1 << days_in_month) - 1) << 1
    # cronie: if either day field starts with "*", both must match; otherwise either may.
    if dom.star or dow.star:
        return dom_bits & dow_bits & month_days
    return (dom_bits | dow_bits) & month_days


class Tables:
    """Everything the search needs, precomputed from the parsed fields."""

    __slots__ = (
        "_day_cache",
        "_dom",
        "_dow",
        "_shape_cache",
        "first_month",
        "last_month",
        "next_hour",
        "next_minute",
        "next_month",
        "prev_hour",
        "prev_minute",
        "prev_month",
    )

    def __init__(
        self,
        minute: ParsedField,
        hour: ParsedField,
        dom: ParsedField,
        month: ParsedField,
        dow: ParsedField,
    ) -> None:
        self.next_minute = _next_table(minute.mask, 0, 59)
        self.prev_minute = _prev_table(minute.mask, 0, 59)
        self.next_hour = _next_table(hour.mask, 0, 23)
        self.prev_hour = _prev_table(hour.mask, 0, 23)
        self.next_month = _next_table(month.mask, 1, 12)  # index 13 carries into next year
        self.prev_month = _prev_table(month.mask, 1, 12)[1:]  # index 0 carries into last year
        self.first_month = self.next_month[1]
        self.last_month = self.prev_month[12]
        self._dom = dom
        self._dow = dow
        # (year * 16 + month) -> (next-day table, previous-day table); the tables only depend
        # on the month's shape (length * 7 + weekday of the 1st), so at most 28 are built.
        self._day_cache: dict[int, tuple[list[int], list[int]]] = {}
        self._shape_cache: dict[int, tuple[list[int], list[int]]] = {}

    def days(self, year: int, month: int) -> tuple[list[int], list[int]]:
        key = year * 16 + month
        tables = self._day_cache.get(key)
        if tables is None:
            first_weekday, days_in_month = calendar.monthrange(year, month)
            shape = days_in_month * 7 + (first_weekday + 1) % 7
            tables = self._shape_cache.get(shape)
            if tables is None:
                mask = day_mask(self._dom, self._dow, days_in_month, (first_weekday + 1) % 7)
                # index 32 stands for "past the end" forward and "the last day" backward
                following = _next_table(mask, 0, 31)
                shifted = _prev_table(mask, 0, 31)
                tables = (following, [*shifted[1:], shifted[32]])
                self._shape_cache[shape] = tables
            if len(self._day_cache) >= _DAY_TABLE_CACHE_LIMIT:
                self._day_cache.clear()
            self._day_cache[key] = tables
        return tables

    def next_wall(self, year: int, month: int, day: int, hour: int, minute: int) -> Wall | None:
        """First matching wall time at or after the given one; minute may be 60, hour 24,
        day one past the month's end, to start at the following unit."""
        next_month, next_hour, next_minute = self.next_month, self.next_hour, self.next_minute
        limit = min(year + _SEARCH_YEARS, 9999)
        while year <= limit:
            found = next_month[month]
            if found != month:
                if found < 0:
                    year += 1
                    if year > limit:
                        return None
                    month = self.first_month
                else:
                    month = found
                day, hour, minute = 1, 0, 0
            found = self.days(year, month)[0][day]
            if found != day:
                if found < 0:
                    month += 1
                    day, hour, minute = 1, 0, 0
                    continue
                day, hour, minute = found, 0, 0
            found = next_hour[hour]
            if found != hour:
                if found < 0:
                    day += 1
                    hour, minute = 0, 0
                    continue
                hour, minute = found, 0
            found = next_minute[minute]
            if found < 0:
                hour += 1
                minute = 0
                continue
            return year, month, day, hour, found
        return None

    def prev_wall(self, year: int, month: int, day: int, hour: int, minute: int) -> Wall | None:
        """Last matching wall time at or before the given one; minute may be -1, hour -1,
        day 0, to start at the preceding unit."""
        prev_month, prev_hour, prev_minute = self.prev_month, self.prev_hour, self.prev_minute
        limit = max(year - _SEARCH_YEARS, 1)
        while year >= limit:
            found = prev_month[month]
            if found != month:
                if found < 0:
                    year -= 1
                    if year < limit:
                        return None
                    month = self.last_month
                else:
                    month = found
                day, hour, minute = 32, 23, 59
            found = self.days(year, month)[1][day]
            if found != day:
                if found < 0:
                    month -= 1
                    day, hour, minute = 32, 23, 59
                    continue
                day, hour, minute = found, 23, 59
            found = prev_hour[hour + 1]
            if found < 0:  # also covers hour == -1, whose table entry is -1 too
                day -= 1
                hour, minute = 23, 59
                continue
            if found != hour:
                hour, minute = found, 59
            found = prev_minute[minute + 1]
            if found < 0:
                hour -= 1
                minute = 59
                continue
            return year, month, day, hour, found
        return None


def require_aware(t: datetime, name: str) -> None:
    if not isinstance(t, datetime) or t.tzinfo is None or t.utcoffset() is None:
        raise InvalidInput(
            f"{name}: {t!r} has no time zone; pass a timezone-aware datetime",
            field=name,
            value=t,
            allowed="a timezone-aware datetime",
        )


def exhausted(
    t: datetime, direction: str, *, name: str = "t", overflow: bool = False
) -> InvalidInput:
    """The error for a search that runs off the years datetime supports (1-9999); with
    ``overflow``, for a ``t`` that cannot even be converted to UTC or the schedule's zone."""
    allowed = "a datetime leaving room for a fire time within years 1-9999"
    if overflow:
        message = (
            f"{name}: {t.isoformat()} is too close to the limits of the supported years "
            "1-9999 to search from"
        )
    else:
        message = (
            f"{name}: no fire time {direction} {t.isoformat()} within the supported years 1-9999"
        )
    return InvalidInput(message, field=name, value=t, allowed=allowed)


def _naive(w: Wall) -> datetime:
    return datetime(w[0], w[1], w[2], w[3], w[4])


def _ceil_minute(w: datetime) -> datetime:
    floor = w.replace(second=0, microsecond=0)
    return floor if floor == w else floor + _MINUTE


class Finder:
    """Fire-time search for one schedule in one zone."""

    __slots__ = ("_first", "_fixed_offset", "_runs_gap", "_second", "_tables", "_tz")

    def __init__(self, tables: Tables, tz: ZoneInfo, gap_end: bool, fold: FoldRule) -> None:
        """``gap_end``: a skipped wall time runs at the first minute after the jump (else not
        at all); ``fold``: which passes of a repeated wall time run (Debian cron: a fixed-time
        schedule ``True, "first"``, a wildcard one ``False, "both"``; see cron/dst.py)."""
        self._tables = tables
        self._tz = tz
        self._runs_gap = gap_end
        self._first = fold != "last"  # the first pass of a repeated time runs
        self._second = fold != "first"  # the second pass runs
        self._fixed_offset = has_fixed_offset(tz)

    # -- fast path: no DST -------------------------------------------------------------

    def _next_plain(self, t: datetime) -> datetime:
        local = t if t.tzinfo is self._tz else t.astimezone(self._tz)
        found = self._tables.next_wall(
            local.year, local.month, local.day, local.hour, local.minute + 1
        )
        if found is None:
            raise exhausted(t, "after")
        return datetime(*found, tzinfo=self._tz)

    def _prev_plain(self, t: datetime) -> datetime:
        local = t if t.tzinfo is self._tz else t.astimezone(self._tz)
        minute = local.minute if local.second or local.microsecond else local.minute - 1
        found = self._tables.prev_wall(local.year, local.month, local.day, local.hour, minute)
        if found is None:
            raise exhausted(t, "before")
        return datetime(*found, tzinfo=self._tz)

    def iter_plain(self, t: datetime) -> Iterator[datetime]:
        local = t if t.tzinfo is self._tz else t.astimezone(self._tz)
        next_wall, tz = self._tables.next_wall, self._tz
        found = next_wall(local.year, local.month, local.day, local.hour, local.minute + 1)
        while found is not None:
            yield datetime(*found, tzinfo=tz)
            year, month, day, hour, minute = found
            found = next_wall(year, month, day, hour, minute + 1)
        raise exhausted(t, "after")

    # -- DST-aware path ------------------------------------------------------------------

    def _offsets(self, wall: datetime) -> tuple[timedelta, timedelta]:
        aware = wall.replace(tzinfo=self._tz)
        first = aware.utcoffset()
        second = aware.replace(fold=1).utcoffset()
        assert first is not None and second is not None
        return first, second

    def _transition(self, wall: datetime, first: timedelta, second: timedelta) -> datetime:
        """UTC instant of the transition that makes ``wall`` ambiguous or skipped."""
        return transition_after(self._tz, wall - max(first, second), wall - min(first, second))

    def _at(self, wall: datetime, fold: int = 0) -> datetime:
        return wall.replace(tzinfo=self._tz, fold=fold)

    def _gap_end(self, wall: datetime, first: timedelta, second: timedelta) -> datetime:
        """The first whole local minute after the jump that skips ``wall``."""
        instant = self._transition(wall, first, second)
        after = _ceil_minute(instant + second) - second
        return after.replace(tzinfo=UTC).astimezone(self._tz)

    def _fold_window(
        self, wall: datetime, first: timedelta, second: timedelta
    ) -> tuple[datetime, datetime]:
        """Start and end wall times of the repeated interval that contains ``wall``."""
        instant = self._transition(wall, first, second)
        return instant + second, instant + first

    def _next_wall(self, wall: datetime) -> datetime:
        found = self._tables.next_wall(wall.year, wall.month, wall.day, wall.hour, wall.minute)
        if found is None:
            raise exhausted(wall, "after")
        return _naive(found)

    def _prev_wall(self, wall: datetime) -> datetime:
        found = self._tables.prev_wall(wall.year, wall.month, wall.day, wall.hour, wall.minute)
        if found is None:
            raise exhausted(wall, "before")
        return _naive(found)

    def _locate(self, t: datetime) -> tuple[datetime, datetime, datetime, timedelta, timedelta]:
        """``t`` in the zone, as a UTC instant (naive), as a naive wall time, and the zone's
        two offsets at that wall time (equal unless it is repeated or skipped)."""
        moment = utc_naive(t)
        local = t.astimezone(self._tz)
        wall = local.replace(tzinfo=None, fold=0)
        first, second = self._offsets(wall)
        if first < second:
            # Only a t whose tzinfo already is the zone can name a skipped wall time (02:30
            # on a spring-forward day): astimezone returned it unchanged. Search from the
            # instant it stands for, never from a wall clock that does not exist.
            local = moment.replace(tzinfo=UTC).astimezone(self._tz)
            wall = local.replace(tzinfo=None, fold=0)
            first, second = self._offsets(wall)
        return local, moment, wall, first, second

    def next_after(self, t: datetime) -> datetime:
        try:
            if self._fixed_offset:
                return self._next_plain(t)
            local, moment, wall, first, second = self._locate(t)
            start = wall.replace(second=0, microsecond=0) + _MINUTE
            if first > second:  # t is inside a repeated interval
                fire, start = self._next_in_repeat(local, wall, first, second, start)
                if fire is not None:
                    return fire
            return self._next_from(start, moment, t)
        except OverflowError as exc:  # a conversion or a step past year 1 or 9999
            raise exhausted(t, "after", overflow=True) from exc

    def _next_in_repeat(
        self, local: datetime, wall: datetime, first: timedelta, second: timedelta, start: datetime
    ) -> tuple[datetime | None, datetime]:
        """For a ``t`` inside a repeated interval (at ``local``, on its ``wall`` clock): the
        next fire within the interval, if any, and the wall time the search continues from."""
        window_start, window_end = self._fold_window(wall, first, second)
        if local.fold == 1:
            if not self._second:
                # only the first pass runs, and it is over
                start = max(start, _ceil_minute(window_end))
            return None, start
        if not self._second:
            return None, start
        candidate = self._next_wall(start)
        if self._first and candidate < window_end:
            return self._at(candidate), start
        repeat = self._next_wall(_ceil_minute(window_start))
        if repeat < window_end:
            return self._at(repeat, fold=1), start
        return None, candidate

    def _next_from(self, start: datetime, moment: datetime, t: datetime) -> datetime:
        """The first fire after ``moment`` (UTC, naive) from the wall time ``start`` on."""
        for _ in range(_MAX_CANDIDATES):
            candidate = self._next_wall(start)
            first, second = self._offsets(candidate)
            if first == second:
                return self._at(candidate)
            if first > second:  # repeated: the first pass, or the second, as the policy says
                if self._first and candidate - first > moment:
                    return self._at(candidate)
                if self._second and candidate - second > moment:
                    return self._at(candidate, fold=1)
            elif self._runs_gap:  # skipped: run right after the jump, or not at all
                fire = self._gap_end(candidate, first, second)
                if utc_naive(fire) > moment:
                    return fire
            start = candidate + _MINUTE
        raise exhausted(t, "after")

    def previous_before(self, t: datetime) -> datetime:
        try:
            if self._fixed_offset:
                return self._prev_plain(t)
            local, moment, wall, first, second = self._locate(t)
            start = wall.replace(second=0, microsecond=0)
            if start == wall:
                start -= _MINUTE
            if first > second and local.fold == 1:  # t is in the second pass of a repeat
                fire, start = self._previous_in_repeat(wall, first, second, start)
                if fire is not None:
                    return fire
            return self._previous_from(start, moment, t)
        except OverflowError as exc:
            raise exhausted(t, "before", overflow=True) from exc

    def _previous_in_repeat(
        self, wall: datetime, first: timedelta, second: timedelta, start: datetime
    ) -> tuple[datetime | None, datetime]:
        """For a ``t`` in the second pass of a repeated interval (on its ``wall`` clock): the
        previous fire within the interval, if any, and the wall time the search continues
        from."""
        window_start, window_end = self._fold_window(wall, first, second)
        last_in_window = _ceil_minute(window_end) - _MINUTE
        if not self._second:
            return None, max(start, last_in_window)
        candidate = self._prev_wall(start)
        if candidate >= window_start:
            return self._at(candidate, fold=1), start
        if not self._first:
            return None, candidate
        repeat = self._prev_wall(last_in_window)
        if repeat >= window_start:
            return self._at(repeat), start
        return None, candidate

    def _previous_from(self, start: datetime, moment: datetime, t: datetime) -> datetime:
        """The last fire before ``moment`` (UTC, naive) from the wall time ``start`` back."""
        for _ in range(_MAX_CANDIDATES):
            candidate = self._prev_wall(start)
            first, second = self._offsets(candidate)
            if first == second:
                return self._at(candidate)
            if first > second:
                if self._second and candidate - second < moment:
                    return self._at(candidate, fold=1)
                if self._first and candidate - first < moment:
                    return self._at(candidate)
            elif self._runs_gap:
                fire = self._gap_end(candidate, first, second)
                if utc_naive(fire) < moment:
                    return fire
            start = candidate - _MINUTE
        raise exhausted(t, "before")

    def iter_after(self, t: datetime) -> Iterator[datetime]:
        try:
            if self._fixed_offset:
                yield from self.iter_plain(t)
                return
            next_wall, tz = self._tables.next_wall, self._tz
            current = self.next_after(t)
            yield current
            while True:
                # Fast step: when the last fire time and the next matching wall time are both
                # unambiguous, no gap or repeat lies between them and the wall time is the answer.
                wall = current.replace(tzinfo=None)
                if current.utcoffset() == current.replace(fold=1 - current.fold).utcoffset():
                    found = next_wall(wall.year, wall.month, wall.day, wall.hour, wall.minute + 1)
                    if found is None:
                        raise exhausted(current, "after")
                    candidate = datetime(*found, tzinfo=tz)
                    if candidate.utcoffset() == candidate.replace(fold=1).utcoffset():
                        current = candidate
                        yield current
                        continue
                current = self.next_after(current)
                yield current
        except OverflowError as exc:
            raise exhausted(t, "after", overflow=True) from exc
