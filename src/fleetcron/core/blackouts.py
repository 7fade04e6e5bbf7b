"""Blackout windows: when a job must not start on a target, as a pure rule.

A window is a time range, either **one-off** (a start and an end, wall-clock times) or
**recurring** (a cron expression whose every fire time opens the window for a duration;
the weekly rule ``sat,sun 22:00`` is written as that cron expression), read in a stated
IANA zone or in each target's own zone (``target``). It covers the assignments of one job,
of one target and/or of the targets a label selector matches (every part given must
match). It is in force until it is lifted or expires (a one-off window at its end, a
recurring one at its ``until``, if any), so it lifts by itself.

During a window a slot that would fire is recorded ``skipped`` (:attr:`SkipKind.BLACKOUT`,
the reason names the window and its end), or, for a job with ``on_blackout: defer``,
*deferred*: one run of the assignment, recorded with its original slot, waits until no
window covers it any more (later slots of the same window are skipped, saying a deferred
run already waits). Slots the scheduler missed while it was down stay ``missed``: that is
what happened to them. Manual runs and retries are an operator's or a rule's explicit
choice and are not held.

Wall-clock times in a DST gap are read as Python does (``fold=0``: the offset before the
gap), so ``02:30`` on a spring-forward night in Europe/Warsaw is 03:30 local; a time in a
fold is its first occurrence. Occurrence lengths are elapsed time, not wall time.

Pure: no I/O, ``instant`` is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Final, Literal
from zoneinfo import ZoneInfo

from fleetcron.core.labels import format_selector, selector_matches
from fleetcron.core.target_zones import TARGET_LOCAL
from fleetcron.cron import parse_cached
from fleetcron.errors import FleetcronError, InvalidInput

WindowKind = Literal["once", "cron"]
OnBlackout = Literal["skip", "defer"]
ON_BLACKOUT: Final = ("skip", "defer")

#: A one-off window at most this long (a longer outage is a paused target).
MAX_ONCE: Final = timedelta(days=31)
#: A recurring window's occurrence at most this long.
MAX_DURATION: Final = timedelta(days=7)
#: How many chained windows :func:`clear_at` follows before it stops (a window that never
#: ends is refused when added; this bounds a pathological chain).
MAX_CHAIN: Final = 1000
#: The widest UTC offsets in use: a wall-clock time in "each target's zone" happens between
#: 14 h before and 12 h after the same digits read as UTC.
EARLIEST_OFFSET: Final = timedelta(hours=14)
LATEST_OFFSET: Final = timedelta(hours=12)

#: What an operator writes to make a window, in the order every adapter shows it: the
#: CLI's options, the web form's fields, the keys of a schedule file's ``blackouts``
#: (``duration`` is text such as ``2h``, read by ``core.incidents.parse_duration``).
WINDOW_KEYS: Final = (
    "name",
    "reason",
    "job",
    "target",
    "selector",
    "zone",
    "start",
    "end",
    "cron",
    "weekly",
    "duration",
    "until",
)

_DAYS: Final = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}


@dataclass(frozen=True)
class Scope:
    """What a window covers: every part given must match; at least one is given. A window
    of a project (``project``, its id; None: no project, as in a schedule file's plan)
    covers only the slots of that project's jobs, on its own targets and those shared into
    it: job and target names are unique per project, so another project's job or target
    of the same name is never covered."""

    job: str | None = None
    target: str | None = None
    selector: Mapping[str, str] = field(default_factory=dict)
    project: int | None = None

    def covers(
        self, job: str, target: str, labels: Mapping[str, str], project: int | None = None
    ) -> bool:
        if self.project is not None and self.project != project:
            return False
        if self.job is not None and self.job != job:
            return False
        if self.target is not None and self.target != target:
            return False
        return selector_matches(self.selector, labels)

    def words(self) -> str:
        parts = [
            f"job={self.job}" if self.job else "",
            f"target={self.target}" if self.target else "",
            f"selector={format_selector(self.selector)}" if self.selector else "",
        ]
        return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Window:
    """One blackout window, as plain data. ``start``/``end`` are naive wall-clock times
    (one-off); ``cron``/``duration`` make a recurring one; ``until`` (aware) ends a
    recurring window's occurrences; ``lifted_at`` (aware) ends the window early."""

    id: int
    name: str
    scope: Scope
    zone: str
    kind: WindowKind
    start: datetime | None = None
    end: datetime | None = None
    cron: str | None = None
    duration: timedelta | None = None
    until: datetime | None = None
    lifted_at: datetime | None = None

    def label(self) -> str:
        return f'blackout window #{self.id} "{self.name}"'


@dataclass(frozen=True)
class Subject:
    """The assignment a slot belongs to: its job, its target, the target's labels and the
    zone a ``target`` window is read in (the target's own, or the default zone)."""

    job: str
    target: str
    labels: Mapping[str, str]
    zone: str
    #: the project of the job (None: outside any project, as in a plan's preview)
    project: int | None = None

    def under(self, window: Window) -> bool:
        """Whether ``window``'s scope covers this assignment."""
        return window.scope.covers(self.job, self.target, self.labels, self.project)


@dataclass(frozen=True)
class Hit:
    """A window covering an instant, and when that occurrence ends (aware, UTC)."""

    window: Window
    ends_at: datetime


def wall(value: datetime, zone: str) -> datetime:
    """A naive wall-clock time in ``zone``, as an aware UTC instant (``fold=0``)."""
    return value.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)


def zone_of(window: Window, subject: Subject) -> str:
    return subject.zone if window.zone == TARGET_LOCAL else window.zone


def _stop(window: Window) -> datetime | None:
    """When the window stops covering anything (the earlier of ``until`` and a lift)."""
    stops = [t for t in (window.until, window.lifted_at) if t is not None]
    return min(stops) if stops else None


def occurrence(window: Window, instant: datetime, zone: str) -> Hit | None:
    """The occurrence of ``window`` (read in ``zone``) that covers ``instant``, if any:
    start <= instant < end, cut at the window's ``until`` or lift."""
    stop = _stop(window)
    if stop is not None and instant >= stop:
        return None
    if window.kind == "once":
        assert window.start is not None and window.end is not None
        starts, ends = wall(window.start, zone), wall(window.end, zone)
    else:
        assert window.cron is not None and window.duration is not None
        schedule = parse_cached(window.cron, zone)
        try:
            # The newest opening at or before the instant (previous_before is strict).
            starts = schedule.previous_before(instant + timedelta(microseconds=1))
        except FleetcronError:  # no opening before the instant (an exhausted expression)
            return None
        ends = starts + window.duration
    if stop is not None:
        ends = min(ends, stop)
    if starts <= instant < ends:
        return Hit(window, ends.astimezone(UTC))
    return None


def hit_at(windows: Iterable[Window], subject: Subject, instant: datetime) -> Hit | None:
    """The first window (by id) covering the subject at ``instant``; None: none does."""
    for window in sorted(windows, key=lambda w: w.id):
        if not subject.under(window):
            continue
        hit = occurrence(window, instant, zone_of(window, subject))
        if hit is not None:
            return hit
    return None


def clear_at(windows: Sequence[Window], subject: Subject, instant: datetime) -> datetime:
    """The first instant at or after ``instant`` that no window covers for the subject
    (windows that meet or overlap are followed one into the next)."""
    moment = instant
    for _ in range(MAX_CHAIN):
        covering = [
            hit
            for window in windows
            if subject.under(window)
            and (hit := occurrence(window, moment, zone_of(window, subject))) is not None
        ]
        if not covering:
            return moment
        moment = max(hit.ends_at for hit in covering)
    return moment


def reason(hit: Hit) -> str:
    """The run's reason: names the window, its end and why it was opened."""
    return f"{hit.window.label()} until {hit.ends_at.isoformat()}"


# -- checking what an operator gives ----------------------------------------------------


def weekly_cron(rule: str, *, field_name: str = "weekly") -> str:
    """A weekly rule (``"sat,sun 22:00"``, ``"mon-fri 12:30"``) as the cron expression
    that opens the window then; InvalidInput naming ``field_name`` otherwise."""
    allowed = 'days and a time, e.g. "sat 22:00" or "mon-fri 12:30" (days: sun..sat)'
    days_text, _, clock = rule.strip().lower().partition(" ")
    hour, _, minute = clock.strip().partition(":")
    days: list[str] = []
    for item in days_text.split(","):
        first, dash, last = item.partition("-")
        if first not in _DAYS or (dash and last not in _DAYS):
            raise InvalidInput(
                f"{field_name}: {item!r} in {rule!r} is not a day; expected {allowed}",
                field=field_name,
                value=rule,
                allowed=allowed,
            )
        days.append(f"{_DAYS[first]}-{_DAYS[last]}" if dash else str(_DAYS[first]))
    if not (hour.isdigit() and minute.isdigit() and int(hour) < 24 and int(minute) < 60):
        raise InvalidInput(
            f"{field_name}: {clock.strip()!r} in {rule!r} is not a time HH:MM; expected {allowed}",
            field=field_name,
            value=rule,
            allowed=allowed,
        )
    return f"{int(minute)} {int(hour)} * * {','.join(days)}"


def check_once(start: datetime, end: datetime) -> None:
    """A one-off window ends after it starts and lasts at most :data:`MAX_ONCE`."""
    if end <= start:
        raise InvalidInput(
            f"end: {end.isoformat()} is not after the start {start.isoformat()}",
            field="end",
            value=end.isoformat(),
            allowed=f"a time after {start.isoformat()}",
        )
    if end - start > MAX_ONCE:
        raise InvalidInput(
            f"end: the window would last {end - start}; at most {MAX_ONCE.days} days "
            "(pause the targets for a longer outage)",
            field="end",
            value=end.isoformat(),
            allowed=f"at most {MAX_ONCE.days} days after the start",
        )


def check_duration(duration: timedelta) -> None:
    if not timedelta(minutes=1) <= duration <= MAX_DURATION:
        raise InvalidInput(
            f"duration: {duration} is out of range (1 minute to {MAX_DURATION.days} days)",
            field="duration",
            value=duration.total_seconds(),
            allowed=f"1 minute to {MAX_DURATION.days} days",
        )


def expires_at(window: Window) -> datetime | None:
    """When the window stops covering anything, for every target (aware UTC); None: a
    recurring window without ``until``. A one-off window in each target's zone ends at the
    latest in the zone furthest west."""
    if window.kind == "cron":
        return window.until
    assert window.end is not None
    if window.zone == TARGET_LOCAL:
        return window.end.replace(tzinfo=UTC) + LATEST_OFFSET
    return wall(window.end, window.zone)


def overlapping(window: Window, others: Iterable[Window]) -> list[Window]:
    """The one-off windows among ``others`` with the same scope and zone whose range
    overlaps this one-off window's: allowed (each still skips what it covers), but said,
    since it is usually a window entered twice."""
    if window.kind != "once":
        return []
    assert window.start is not None and window.end is not None
    return [
        other
        for other in others
        if other.id != window.id
        and other.kind == "once"
        and other.scope == window.scope
        and other.zone == window.zone
        and other.start is not None
        and other.end is not None
        and other.start < window.end
        and window.start < other.end
    ]


def with_lift(window: Window, at: datetime) -> Window:
    return replace(window, lifted_at=at)


__all__ = [
    "MAX_DURATION",
    "MAX_ONCE",
    "ON_BLACKOUT",
    "WINDOW_KEYS",
    "Hit",
    "OnBlackout",
    "Scope",
    "Subject",
    "Window",
    "WindowKind",
    "check_duration",
    "check_once",
    "clear_at",
    "expires_at",
    "hit_at",
    "occurrence",
    "overlapping",
    "reason",
    "wall",
    "weekly_cron",
    "with_lift",
    "zone_of",
]
