"""A job's DST policy: what its schedule does with a wall time that a transition skips (a
*gap*, spring forward) or repeats (a *fold*, fall back); and the transitions of a zone.

The default, ``cronie`` for both, is Debian cron's rule, which depends on the schedule:
a *fixed-time* schedule (neither minute nor hour starts with ``*``) runs a skipped time at
the end of the gap and a repeated time once, on the first pass; a *wildcard* schedule skips
what does not exist and runs both passes of a repeat (it follows real elapsed time). The
other choices name one behaviour for every schedule:

* ``dst_gap``: ``run_at_gap_end`` (a skipped time runs at the first minute after the jump),
  ``skip`` (a skipped time does not run that day).
* ``dst_fold``: ``first`` (a repeated time runs once, on the first pass), ``last`` (once, on
  the second pass, in the offset after the transition), ``both`` (on each pass).

The cron engine takes the resolved policy as a parameter of its search
(:meth:`~fleetcron.cron.schedule.CronSchedule.with_dst`), so every next-fire computation
applies it the same way. Pure: no I/O, never reads the clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from fleetcron.cron.zones import has_fixed_offset, offset_at, transition_after
from fleetcron.errors import InvalidInput

CRONIE = "cronie"
GAP_CHOICES = (CRONIE, "run_at_gap_end", "skip")
FOLD_CHOICES = (CRONIE, "first", "both", "last")

FoldRule = Literal["first", "both", "last"]

#: How far apart two samples of a zone's offset are when transitions are looked for; every
#: zone keeps an offset for longer than this (the shortest DST periods last weeks).
_STEP = timedelta(days=1)


def check_gap(value: str, *, field: str = "dst_gap") -> str:
    return _check(value, GAP_CHOICES, field)


def check_fold(value: str, *, field: str = "dst_fold") -> str:
    return _check(value, FOLD_CHOICES, field)


def _check(value: str, choices: tuple[str, ...], field: str) -> str:
    if value not in choices:
        allowed = ", ".join(choices)
        raise InvalidInput(
            f"{field}: {value!r} is not a DST choice; allowed: {allowed}",
            field=field,
            value=value,
            allowed=allowed,
        )
    return value


@dataclass(frozen=True)
class DstPolicy:
    """A schedule's choices at DST transitions (``cronie``: Debian cron's rule)."""

    gap: str = CRONIE
    fold: str = CRONIE

    def __post_init__(self) -> None:
        check_gap(self.gap)
        check_fold(self.fold)

    @property
    def is_default(self) -> bool:
        return self.gap == CRONIE and self.fold == CRONIE

    def resolved(self, fixed_time: bool) -> tuple[bool, FoldRule]:
        """For a schedule that is fixed-time or not: whether a skipped time runs at the
        gap's end, and which passes of a repeated time run."""
        gap_end = fixed_time if self.gap == CRONIE else self.gap == "run_at_gap_end"
        fold: FoldRule
        if self.fold == "first":
            fold = "first"
        elif self.fold == "last":
            fold = "last"
        elif self.fold == "both":
            fold = "both"
        else:
            fold = "first" if fixed_time else "both"
        return gap_end, fold


DEFAULT = DstPolicy()


@dataclass(frozen=True)
class Transition:
    """One change of a zone's offset: the UTC instant, the offsets before and after, and
    the local wall times it skips (``before < after``) or repeats (``before > after``),
    ``[wall_start, wall_end)``."""

    zone: str
    at: datetime
    before: timedelta
    after: timedelta

    @property
    def is_gap(self) -> bool:
        return self.after > self.before

    @property
    def wall_start(self) -> datetime:
        """First skipped (gap) or repeated (fold) wall time, naive."""
        naive = self.at.replace(tzinfo=None)
        return naive + min(self.before, self.after)

    @property
    def wall_end(self) -> datetime:
        """The wall time right after the skipped or repeated interval, naive."""
        naive = self.at.replace(tzinfo=None)
        return naive + max(self.before, self.after)


def transitions(tz: ZoneInfo, start: datetime, end: datetime) -> Iterator[Transition]:
    """The offset changes of ``tz`` in (start, end] (aware instants), oldest first; nothing
    for a zone of fixed offset."""
    if has_fixed_offset(tz):
        return
    low = start.astimezone(UTC).replace(tzinfo=None, microsecond=0)
    limit = end.astimezone(UTC).replace(tzinfo=None)
    zone = tz.key or str(tz)
    while low < limit:
        high = min(low + _STEP, limit)
        before = offset_at(tz, low)
        if offset_at(tz, high) != before:
            at = transition_after(tz, low, high)
            yield Transition(zone, at.replace(tzinfo=UTC), before, offset_at(tz, at))
            low = at
        else:
            low = high


def has_dst(tz: ZoneInfo, start: datetime, end: datetime) -> bool:
    """Whether ``tz`` changes its offset in (start, end]."""
    return next(transitions(tz, start, end), None) is not None
