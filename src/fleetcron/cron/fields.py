"""Parsing of the five cron fields into bitmasks, with errors that name field, token and range.

Each field becomes an ``int`` bitmask (bit ``n`` set when value ``n`` is allowed) plus, for the
day fields, the extensions beyond Debian cron that cannot be expressed as a fixed set of values:
``L`` and ``LW`` in day-of-month, ``DOW#n`` and ``DOWL`` in day-of-week.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetcron.errors import CronError

MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")

# Longest number worth converting, leading zeros aside: anything longer is out of range in
# every field, and refusing it early keeps int() away from pathological inputs. Leading zeros
# are fine: cronie reads a number into a buffer of MAX_TEMPSTR (131072) characters and
# atoi()s it, so "00005" is 5 there too.
_MAX_DIGITS = 4


def _number(text: str) -> int | None:
    """The value of a decimal number with any leading zeros, or None when it has more than
    _MAX_DIGITS significant digits (and so is out of range in every field)."""
    significant = text.lstrip("0")
    if len(significant) > _MAX_DIGITS:
        return None
    return int(significant) if significant else 0


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0

    @property
    def allowed(self) -> str:
        text = f"{self.low}-{self.high}"
        if self.names:
            text += f" or {self.names[0]}-{self.names[-1]}"
        return text


MINUTE = FieldSpec("minute", 0, 59)
HOUR = FieldSpec("hour", 0, 23)
DAY_OF_MONTH = FieldSpec("day-of-month", 1, 31)
MONTH = FieldSpec("month", 1, 12, MONTH_NAMES, 1)
DAY_OF_WEEK = FieldSpec("day-of-week", 0, 7, DAY_NAMES, 0)
SPECS = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)


@dataclass(frozen=True, slots=True)
class ParsedField:
    """One field: the plain values as a bitmask, the extensions, and its canonical text."""

    mask: int
    star: bool  # the text starts with "*": cronie's DOM_STAR / DOW_STAR
    text: str
    last_day: bool = False  # L in day-of-month
    last_weekday: bool = False  # LW in day-of-month
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()  # (dow 0-6, n 1-5) from DOW#n
    last_weekdays: int = 0  # bitmask of dow 0-6 from DOWL
    extensions: tuple[str, ...] = ()


def _fail(spec: FieldSpec, token: str, problem: str, allowed: str | None = None) -> CronError:
    return CronError(
        f'{spec.name}: "{token}" {problem}',
        field=spec.name,
        value=token,
        allowed=allowed or spec.allowed,
    )


def _value(spec: FieldSpec, text: str, token: str) -> int:
    """A number or a three-letter name, checked against the field's range."""
    if text.isdigit():
        number = _number(text)
        if number is None or not spec.low <= number <= spec.high:
            raise CronError(
                f"{spec.name}: {text} is out of range {spec.low}-{spec.high}",
                field=spec.name,
                value=token,
                allowed=spec.allowed,
            )
        return number
    lowered = text.lower()
    if spec.names and lowered in spec.names:
        return spec.names.index(lowered) + spec.name_base
    if not text:
        raise _fail(spec, token, "is missing a value")
    if spec.names:
        raise _fail(spec, token, f'has an unknown name "{text}"')
    raise _fail(spec, token, f'has "{text}" where a number is expected')


def _step(spec: FieldSpec, text: str, token: str) -> int:
    span = spec.high - spec.low + 1
    allowed = f"a step of 1-{span}"
    if not text.isdigit():
        raise _fail(spec, token, "has a step that is not a number", allowed)
    number = _number(text)
    if number is None or not 1 <= number <= span:
        raise CronError(
            f'{spec.name}: step {text} in "{token}" is out of range 1-{span}',
            field=spec.name,
            value=token,
            allowed=allowed,
        )
    return number


def _range_mask(spec: FieldSpec, item: str) -> tuple[int, str]:
    """Parse ``*``, ``n``, ``a-b`` with an optional ``/step``; return the mask and its text."""
    base, slash, step_text = item.partition("/")
    step = _step(spec, step_text, item) if slash else 1
    if base == "*":
        low, high = spec.low, spec.high
        text = "*"
    elif "-" in base:
        first, _, last = base.partition("-")
        low = _value(spec, first, item)
        high = _value(spec, last, item)
        # cronie reads a day-of-week range ending in 0 as "up to Sunday", so sat-sun works,
        # but only without a step: its range parser turns 0 into 7 when no "/" follows, so
        # "5-0/1" stays a reversed range there (it sets no day at all). Refuse it.
        if spec is DAY_OF_WEEK and high == 0 and low > 0:
            if slash:
                raise _fail(
                    spec,
                    item,
                    "is a reversed range: cronie reads a range ending in 0 as ending on "
                    f'Sunday only without a step; write "{low}-7/{step_text}"',
                    f"{spec.allowed}; a range ending on Sunday with a step ends in 7",
                )
            high = 7
        if high < low:
            raise _fail(
                spec,
                item,
                f"is a reversed range; write the smaller value first ({high}-{low})",
            )
        text = f"{low}-{high}"
    else:
        low = _value(spec, base, item)
        if slash:
            # cronie and Debian cron refuse "5/15"; the hint gives the spelling they accept.
            raise _fail(
                spec,
                item,
                f'has a step without a range; write "{base}-{spec.high}/{step_text}"',
                f"*/n or a-b/n, n in 1-{spec.high - spec.low + 1}",
            )
        high = low
        text = str(low)
    mask = 0
    for value in range(low, high + 1, step):
        mask |= 1 << value
    if slash:
        text += f"/{step}"
    return mask, text


def parse_field(spec: FieldSpec, text: str) -> ParsedField:
    """Parse one field's text; raise CronError naming the field, the token and the range."""
    if spec is DAY_OF_MONTH:
        return _parse_day_of_month(text)
    if spec is DAY_OF_WEEK:
        return _parse_day_of_week(text)
    mask = 0
    parts = []
    for item in _items(spec, text):
        item_mask, item_text = _range_mask(spec, item)
        mask |= item_mask
        parts.append(item_text)
    return ParsedField(mask=mask, star=text.startswith("*"), text=",".join(parts))


def _items(spec: FieldSpec, text: str) -> list[str]:
    items = text.split(",")
    for item in items:
        if not item:
            raise _fail(spec, text, "has an empty list item")
    return items


def _parse_day_of_month(text: str) -> ParsedField:
    spec = DAY_OF_MONTH
    mask = 0
    parts = []
    last_day = last_weekday = False
    extensions: list[str] = []
    for item in _items(spec, text):
        upper = item.upper()
        if upper == "L":
            last_day = True
            parts.append("L")
            _add(extensions, "L")
        elif upper == "LW":
            last_weekday = True
            parts.append("LW")
            _add(extensions, "LW")
        elif "L" in upper or "W" in upper:
            raise _fail(
                spec,
                item,
                "is not valid; L and LW stand alone as list items",
                f"{spec.allowed}, L or LW",
            )
        else:
            item_mask, item_text = _range_mask(spec, item)
            mask |= item_mask
            parts.append(item_text)
    return ParsedField(
        mask=mask,
        star=text.startswith("*"),
        text=",".join(parts),
        last_day=last_day,
        last_weekday=last_weekday,
        extensions=tuple(extensions),
    )


def _parse_day_of_week(text: str) -> ParsedField:
    spec = DAY_OF_WEEK
    mask = 0
    parts = []
    nth: set[tuple[int, int]] = set()
    last = 0
    extensions: list[str] = []
    for item in _items(spec, text):
        if "#" in item:
            day_text, _, n_text = item.partition("#")
            day = _value(spec, day_text, item) % 7
            if not (n_text.isdigit() and len(n_text) == 1 and 1 <= int(n_text) <= 5):
                raise _fail(spec, item, "needs a week number 1-5 after #", "DOW#n with n in 1-5")
            nth.add((day, int(n_text)))
            parts.append(f"{day}#{n_text}")
            _add(extensions, "#")
        elif len(item) > 1 and item[-1] in "lL":
            day = _value(spec, item[:-1], item) % 7
            last |= 1 << day
            parts.append(f"{day}L")
            _add(extensions, "DOWL")
        else:
            item_mask, item_text = _range_mask(spec, item)
            mask |= item_mask
            parts.append(item_text)
    # 0 and 7 are both Sunday; matching uses 0-6 only.
    if mask & (1 << 7):
        mask = (mask | 1) & 0x7F
    return ParsedField(
        mask=mask,
        star=text.startswith("*"),
        text=",".join(parts),
        nth_weekdays=frozenset(nth),
        last_weekdays=last,
        extensions=tuple(extensions),
    )


def _add(extensions: list[str], name: str) -> None:
    if name not in extensions:
        extensions.append(name)
