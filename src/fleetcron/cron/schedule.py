"""Parsing a cron expression into an immutable :class:`CronSchedule`.

``parse`` is the only way in: it validates everything (fields, ranges, extensions, and that
the schedule can fire at all) so the search never meets a surprise. Any text that is not a
valid expression raises :class:`~fleetcron.errors.CronError`, never anything else.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

from fleetcron.cron.dst import DEFAULT as DEFAULT_DST
from fleetcron.cron.dst import DstPolicy
from fleetcron.cron.fields import MONTH_NAMES, SPECS, ParsedField, parse_field
from fleetcron.cron.search import Finder, Tables, day_mask, exhausted, require_aware
from fleetcron.cron.zones import utc_naive, validate_timezone
from fleetcron.errors import CronError, InvalidInput

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MAX_LENGTH = 1000
# Characters str.split() would take as field separators but cronie does not: it separates
# fields by blanks and tabs only, so a stray \r (a file saved on Windows) is an error there.
_CONTROL_NAMES = {"\n": "line feed", "\r": "carriage return", "\v": "vertical tab",
                  "\f": "form feed", "\x00": "NUL"}  # fmt: skip
# Month lengths a month can have; every weekday of the first occurs for each of them
# within the 400-year Gregorian cycle, so these 7 x 1-2 cases decide whether a day can match.
_MONTH_LENGTHS = {1: (31,), 2: (28, 29), 3: (31,), 4: (30,), 5: (31,), 6: (30,), 7: (31,),
                  8: (31,), 9: (30,), 10: (31,), 11: (30,), 12: (31,)}  # fmt: skip


def _error(message: str, text: str, allowed: str) -> CronError:
    return CronError(message, field="expression", value=text, allowed=allowed)


_FIVE = "5 fields (minute hour day-of-month month day-of-week) or a macro such as @daily"


def _split(text: str) -> list[str]:
    """The five fields of an expression or of the macro it names; raises
    :class:`CronError` for text that cannot be one."""
    _check_characters(text)
    stripped = text.strip()
    if not stripped:
        raise _error("expression: is empty", text, _FIVE)
    if stripped.startswith("@"):
        return _expand_macro(stripped, text)
    fields = stripped.split()
    if len(fields) != 5:
        hint = ""
        if len(fields) == 6:
            hint = " (seconds fields and commands are not part of a schedule)"
        raise _error(
            f"expression: {text!r} has {len(fields)} field{'s' if len(fields) != 1 else ''}, "
            f"expected 5{hint}",
            text,
            _FIVE,
        )
    return fields


def _check_characters(text: str) -> None:
    """Text, not too long, in ASCII, without control characters but tabs."""
    if not isinstance(text, str):
        raise _error(f"expression: expected text, got {type(text).__name__}", str(text), _FIVE)
    if len(text) > _MAX_LENGTH:
        raise _error(f"expression: longer than {_MAX_LENGTH} characters", text[:40], _FIVE)
    if not text.isascii():
        bad = next(ch for ch in text if not ch.isascii())
        raise _error(f"expression: {text!r} contains the non-ASCII character {bad!r}", text, _FIVE)
    control = next((ch for ch in text if (ch < " " and ch != "\t") or ch == "\x7f"), None)
    if control is not None:
        name = _CONTROL_NAMES.get(control, "control character")
        raise _error(
            f"expression: {text!r} contains the {name} {control!r} at position "
            f"{text.index(control) + 1}; fields are separated by spaces or tabs only",
            text,
            _FIVE,
        )


def _expand_macro(stripped: str, text: str) -> list[str]:
    """The five fields of the macro ``stripped`` (``@daily``: ``0 0 * * *``)."""
    macro, *rest = stripped.split()
    if rest:
        raise _error(f'expression: unexpected text after {macro}: "{" ".join(rest)}"', text, _FIVE)
    if macro.lower() == "@reboot":
        raise _error(
            "expression: @reboot is not a schedule; fleetcron runs jobs at times only",
            text,
            ", ".join(MACROS),
        )
    expanded = MACROS.get(macro.lower())
    if expanded is None:
        raise _error(
            f"expression: unknown macro {macro}; allowed: {', '.join(MACROS)}",
            text,
            ", ".join(MACROS),
        )
    return expanded.split()


def _check_can_fire(text: str, dom: ParsedField, month: ParsedField, dow: ParsedField) -> None:
    for number in range(1, 13):
        if month.mask >> number & 1:
            for length in _MONTH_LENGTHS[number]:
                for first_dow in range(7):
                    if day_mask(dom, dow, length, first_dow):
                        return
    months = ", ".join(
        MONTH_NAMES[number - 1] for number in range(1, 13) if month.mask >> number & 1
    )
    raise CronError(
        f"expression: {text!r} can never fire: no day in {months} matches "
        f'day-of-month "{dom.text}" and day-of-week "{dow.text}"',
        field="day-of-month",
        value=dom.text,
        allowed="a day that exists in the chosen months",
    )


class CronSchedule:
    """A parsed cron expression bound to a time zone. Immutable and hashable.

    ``normalized`` is the canonical 5-field form: macros expanded, month and day names
    replaced by numbers, ranges and steps written out as ``a-b/n``, L/W upper case, single
    spaces. Two schedules are equal when their normalized text and zone are equal.
    """

    __slots__ = (
        "_describe",
        "_fields",
        "_finder",
        "_tables",
        "dst",
        "extensions",
        "is_fixed_time",
        "normalized",
        "text",
        "tz",
    )

    text: str
    normalized: str
    tz: ZoneInfo
    extensions: tuple[str, ...]
    is_fixed_time: bool
    dst: DstPolicy
    _fields: tuple[ParsedField, ...]
    _finder: Finder
    _tables: Tables
    _describe: str | None

    def __init__(
        self,
        text: str,
        fields: tuple[ParsedField, ...],
        tz: ZoneInfo,
        dst: DstPolicy = DEFAULT_DST,
    ) -> None:
        minute, hour, dom, month, dow = fields
        set_ = object.__setattr__
        set_(self, "text", text)
        set_(self, "normalized", " ".join(field.text for field in fields))
        set_(self, "tz", tz)
        set_(self, "extensions", dom.extensions + dow.extensions)
        # Debian cron: a job is "fixed-time" unless its minute or hour field starts with "*".
        set_(self, "is_fixed_time", not (minute.star or hour.star))
        tables = Tables(minute, hour, dom, month, dow)
        set_(self, "_tables", tables)
        set_(self, "dst", dst)
        gap_end, fold = dst.resolved(self.is_fixed_time)
        set_(self, "_finder", Finder(tables, tz, gap_end, fold))
        set_(self, "_describe", None)
        set_(self, "_fields", fields)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CronSchedule is immutable; cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"CronSchedule is immutable; cannot delete {name}")

    def _zone_id(self) -> object:
        # A zone read with ZoneInfo.from_file has no key: it is only equal to itself.
        return self.tz if self.tz.key is None else self.tz.key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CronSchedule):
            return NotImplemented
        return (self.normalized, self._zone_id(), self.dst) == (
            other.normalized,
            other._zone_id(),
            other.dst,
        )

    def __hash__(self) -> int:
        return hash((self.normalized, self._zone_id(), self.dst))

    def __repr__(self) -> str:
        zone = repr(self.tz.key) if self.tz.key is not None else repr(self.tz)
        dst = "" if self.dst.is_default else f", dst={self.dst!r}"
        return f"CronSchedule({self.text!r}, tz={zone}{dst})"

    def with_dst(self, dst: DstPolicy) -> CronSchedule:
        """The same schedule under another DST policy (see :mod:`fleetcron.cron.dst`)."""
        if dst == self.dst:
            return self
        return CronSchedule(self.text, self._fields, self.tz, dst)

    def matches(self, wall: datetime) -> bool:
        """Whether the wall time ``wall`` (its fields, whatever its zone) is one the
        expression names."""
        w = (wall.year, wall.month, wall.day, wall.hour, wall.minute)
        return self._tables.next_wall(*w) == w

    def next_after(self, t: datetime) -> datetime:
        """The first fire time strictly after ``t`` (aware), as an aware datetime in ``tz``."""
        require_aware(t, "t")
        return self._finder.next_after(t)

    def previous_before(self, t: datetime) -> datetime:
        """The last fire time strictly before ``t`` (aware), as an aware datetime in ``tz``."""
        require_aware(t, "t")
        return self._finder.previous_before(t)

    def iter_after(self, t: datetime) -> Iterator[datetime]:
        """Fire times strictly after ``t``, strictly increasing, without end."""
        require_aware(t, "t")
        return self._finder.iter_after(t)

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Fire times in (start, end]; nothing when end <= start."""
        require_aware(start, "start")
        require_aware(end, "end")
        return self._between(start, end)

    def _between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        # compare in UTC: aware datetimes sharing a tzinfo compare by wall time, ignoring fold
        try:
            limit = utc_naive(end)
        except OverflowError as exc:
            raise exhausted(end, "before", name="end", overflow=True) from exc
        for fire in self._finder.iter_after(start):
            try:
                if utc_naive(fire) > limit:
                    return
            except OverflowError:  # a fire time beyond 9999 in UTC is past any end
                return
            yield fire

    def describe(self) -> str:
        """A short English description, such as "At 02:00, only on Sunday"."""
        text = self._describe
        if text is None:
            from fleetcron.cron.describe import describe

            text = describe(self.normalized)
            object.__setattr__(self, "_describe", text)
        return text


def parse(text: str, tz: str | ZoneInfo = "UTC", dst: DstPolicy = DEFAULT_DST) -> CronSchedule:
    """Parse a cron expression; raise CronError naming the field, token and allowed values.
    ``dst``: what the schedule does at DST transitions (default: Debian cron's rule)."""
    zone = tz if isinstance(tz, ZoneInfo) else validate_timezone(tz)
    raw_fields = _split(text)
    try:
        fields = tuple(parse_field(spec, raw) for spec, raw in zip(SPECS, raw_fields, strict=True))
    except CronError:
        raise
    except (InvalidInput, ValueError, OverflowError) as exc:  # defensive: never leak others
        raise _error(
            f"expression: {text!r} is not valid ({exc})", text, "a cron expression"
        ) from exc
    _check_can_fire(text, fields[2], fields[3], fields[4])
    return CronSchedule(text, fields, zone, dst)


@functools.lru_cache(maxsize=4096)
def parse_cached(text: str, tz: str = "UTC", dst: DstPolicy = DEFAULT_DST) -> CronSchedule:
    """:func:`parse`, remembered: schedules are immutable, and the scheduler and services
    look up the same few expressions again and again."""
    return parse(text, tz, dst)
