"""Time zone helpers: validation, fixed-offset detection and locating a DST transition.

``zoneinfo`` does not expose its transition table, so a transition is found by bisecting on
``utcoffset`` between two instants known to straddle it (at most a few hours apart).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fleetcron.errors import InvalidInput

# Zones that never change offset: naive wall-clock arithmetic is exact for them.
_FIXED_KEYS = frozenset(
    {
        "UTC",
        "Etc/UTC",
        "Etc/UCT",
        "UCT",
        "Etc/Universal",
        "Universal",
        "Etc/Zulu",
        "Zulu",
        "GMT",
        "Etc/GMT",
        "Etc/GMT0",
        "Etc/GMT+0",
        "Etc/GMT-0",
        "GMT0",
        "GMT+0",
        "GMT-0",
        "Etc/Greenwich",
        "Greenwich",
    }
)
_ETC_OFFSET = re.compile(r"Etc/GMT[+-]\d{1,2}")
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*")
_SECOND = timedelta(seconds=1)


def validate_timezone(name: str) -> ZoneInfo:
    """Return the IANA zone called ``name``; raise InvalidInput(field="timezone") if unknown."""
    allowed = 'an IANA time zone name such as "UTC" or "Europe/Berlin"'
    # ZoneInfo would accept paths like "../x" or raise odd errors on them; refuse early.
    if not isinstance(name, str) or not name.isascii() or not _ZONE_NAME.fullmatch(name):
        raise InvalidInput(
            f"timezone: {name!r} is not a time zone name; expected {allowed}",
            field="timezone",
            value=name,
            allowed=allowed,
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidInput(
            f"timezone: {name!r} is not a known time zone; expected {allowed}",
            field="timezone",
            value=name,
            allowed=allowed,
        ) from exc


def has_fixed_offset(tz: ZoneInfo) -> bool:
    """True when the zone's offset never changes (UTC and the Etc/GMT±N zones)."""
    key = tz.key
    if key is None:  # read with ZoneInfo.from_file: take the DST-aware path, always right
        return False
    return key in _FIXED_KEYS or bool(_ETC_OFFSET.fullmatch(key))


def offset_at(tz: ZoneInfo, utc_naive: datetime) -> timedelta:
    """The zone's UTC offset at a UTC instant given as a naive datetime."""
    offset = tz.fromutc(utc_naive.replace(tzinfo=tz)).utcoffset()
    assert offset is not None
    return offset


def transition_after(tz: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """First UTC instant (naive, whole second) in (before, after] whose offset differs from
    the offset at ``before``; the caller guarantees one exists."""
    start_offset = offset_at(tz, before)
    low, high = before, after
    while high - low > _SECOND:
        middle = low + (high - low) // 2
        middle = middle.replace(microsecond=0)
        if middle <= low:
            middle = low + _SECOND
        if offset_at(tz, middle) == start_offset:
            low = middle
        else:
            high = middle
    return high


def utc_naive(t: datetime) -> datetime:
    """An aware datetime as a naive UTC datetime (for comparisons that respect fold)."""
    return t.astimezone(UTC).replace(tzinfo=None)
