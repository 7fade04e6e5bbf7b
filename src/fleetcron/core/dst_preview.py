"""What a job does at the next DST transitions of each zone it runs in: one line per zone
and transition, such as "Europe/Warsaw, 2027-03-28: 02:30 does not exist → runs at 03:00".

The words follow the job's DST policy as the cron engine applies it (``cron/dst.py``): the
times named are the wall times of the schedule inside the skipped or repeated interval;
which passes of a repeated time run is read from the engine's own fires around the
transition, and a skipped time from the policy the engine resolves. Pure: the caller passes
the horizon.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from fleetcron.core.bounded import named_few
from fleetcron.cron import DstPolicy, parse_cached
from fleetcron.cron.dst import Transition, transitions

_MINUTE = timedelta(minutes=1)
#: Wall times named one by one in a line; more are counted.
_NAMED = 3


@dataclass(frozen=True)
class DstNote:
    """One transition of one zone, and what the job does at it."""

    zone: str
    #: The transition's instant (UTC) and its local day.
    at: datetime
    day: str
    #: ``gap`` (a spring-forward jump) or ``fold`` (an interval repeated).
    kind: str
    #: The schedule's wall times inside the interval ("HH:MM"), at most a few.
    times: tuple[str, ...]
    affected: int
    #: What the job does, in words.
    text: str
    #: The job's name, where notes of several jobs are listed together.
    job: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "zone": self.zone,
            "at": self.at.isoformat(),
            "day": self.day,
            "kind": self.kind,
            "times": list(self.times),
            "affected": self.affected,
            "text": self.text,
        }


def dst_notes(
    schedule: str,
    zones: Iterable[str],
    dst: DstPolicy,
    start: datetime,
    end: datetime,
) -> list[DstNote]:
    """Every transition in (start, end] of each of ``zones`` (zones without DST give
    none), with what ``schedule`` under ``dst`` does at it, oldest first."""
    notes = []
    for zone in sorted(set(zones)):
        tz = ZoneInfo(zone)
        for transition in transitions(tz, start, end):
            notes.append(_note(schedule, zone, dst, transition))
    return sorted(notes, key=lambda n: (n.at, n.zone))


#: How far ahead a schedule's preview looks for DST transitions.
AHEAD = timedelta(days=366)


def notes_ahead(schedule: str, zone: str, dst: DstPolicy, now: datetime) -> list[DstNote]:
    """What ``schedule`` under ``dst`` does at the DST transitions of ``zone`` in the next
    year (the schedule previews of the API and the job form; none in a zone without DST)."""
    return dst_notes(schedule, [zone], dst, now, now + AHEAD)


def _walls(schedule: str, zone: str, transition: Transition) -> list[datetime]:
    """The schedule's wall times in the skipped or repeated interval (naive)."""
    parsed = parse_cached(schedule, zone)
    found, wall = [], transition.wall_start
    while wall < transition.wall_end:
        if parsed.matches(wall):
            found.append(wall)
        wall += _MINUTE
    return found


def _fires_near(schedule: str, zone: str, dst: DstPolicy, transition: Transition) -> list[datetime]:
    """The engine's fires from just before the interval to just after it."""
    span = transition.wall_end - transition.wall_start
    return list(
        parse_cached(schedule, zone, dst).between(
            transition.at - span - _MINUTE, transition.at + span + _MINUTE
        )
    )


def _note(schedule: str, zone: str, dst: DstPolicy, transition: Transition) -> DstNote:
    walls = _walls(schedule, zone, transition)
    day = transition.wall_start.date().isoformat()
    kind = "gap" if transition.is_gap else "fold"
    times = tuple(w.strftime("%H:%M") for w in walls[:_NAMED])
    if not walls:
        what = "skipped" if transition.is_gap else "repeated"
        interval = f"{_hm(transition.wall_start)}–{_hm(transition.wall_end)}"
        text = f"{interval} is {what}; no scheduled time in it"
    elif transition.is_gap:
        runs_at_end, _ = dst.resolved(parse_cached(schedule, zone).is_fixed_time)
        text = _gap_words(walls, runs_at_end, transition)
    else:
        text = _fold_words(walls, _fires_near(schedule, zone, dst, transition))
    return DstNote(zone, transition.at, day, kind, times, len(walls), f"{zone}, {day}: {text}")


def _hm(wall: datetime) -> str:
    return wall.strftime("%H:%M")


def _named(walls: Sequence[datetime]) -> str:
    return named_few([_hm(w) for w in walls], _NAMED)


def _gap_words(walls: Sequence[datetime], runs_at_end: bool, t: Transition) -> str:
    verb = "does not exist" if len(walls) == 1 else "do not exist"
    if not runs_at_end:
        return f"{_named(walls)} {verb} → skipped"
    end = t.wall_end.replace(second=0, microsecond=0)
    if end < t.wall_end:
        end += _MINUTE
    once = " once" if len(walls) > 1 else ""
    return f"{_named(walls)} {verb} → runs{once} at {_hm(end)}"


def _fold_words(walls: Sequence[datetime], fires: Sequence[datetime]) -> str:
    verb = "happens twice" if len(walls) == 1 else "happen twice"
    in_fold = set(walls)
    mine = [f for f in fires if f.replace(tzinfo=None, fold=0) in in_fold]
    passes = sorted({f.fold for f in mine})
    offsets = {f.fold: _offset(f) for f in mine}
    if passes == [0, 1]:
        return f"{_named(walls)} {verb} → runs on both passes ({offsets[0]}, {offsets[1]})"
    if passes == [0]:
        return f"{_named(walls)} {verb} → runs once, on the first pass ({offsets[0]})"
    if passes == [1]:
        return f"{_named(walls)} {verb} → runs once, on the second pass ({offsets[1]})"
    return f"{_named(walls)} {verb} → does not run"


def _offset(fire: datetime) -> str:
    return fire.strftime("%z")[:3] + ":" + fire.strftime("%z")[3:]
