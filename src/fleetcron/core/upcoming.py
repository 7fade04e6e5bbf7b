"""Upcoming fires: which jobs fire when in a window, on how many targets, in which zone,
with their spread and rollout. Pure: the caller passes the assignments and ``now``.

Every assignment of a job in the same effective zone fires at the same times, so the
fire times are computed once per (job, zone) and the targets are counted, not listed:
a bulk job on 5,000 targets in three zones costs three schedule walks. A fire is shown
with the targets that will run it (``active``), those that will record it as skipped
because the target is paused (``paused``), and those whose assignment is disabled (they
record nothing; ``disabled``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetcron.core import rollout as slot_rollout
from fleetcron.core.calendars import CalendarSchedule, DateRule
from fleetcron.core.dst_preview import DstNote, dst_notes
from fleetcron.core.rollout import RolloutOptions
from fleetcron.core.start_window import start_window, window_words
from fleetcron.core.statuses import RunStatus
from fleetcron.cron import DstPolicy, parse_cached
from fleetcron.cron.dst import DEFAULT as DEFAULT_DST

#: The longest window asked for: a week.
MAX_HOURS = 168
#: A job's zone meaning "each target's own zone" (as ``core/target_zones.TARGET_LOCAL``).
TARGET_LOCAL = "target"


def effective_zone(job_zone: str, target_zone: str | None, default_zone: str) -> str:
    """The zone an assignment fires in: the job's, or for a target-local job the
    target's (``default_zone`` when the target has none)."""
    if job_zone != TARGET_LOCAL:
        return job_zone
    return target_zone or default_zone


@dataclass(frozen=True)
class Member:
    """One assignment: its target and whether it would run."""

    target: str
    target_zone: str | None
    enabled: bool
    target_paused: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The target's id: its place in the job's start window (``core/start_window.py``).
    target_id: int = 0


@dataclass(frozen=True)
class JobFacts:
    """What decides a job's fires: its schedule, zone, spread and rollout options."""

    name: str
    origin: str
    schedule: str
    timezone: str
    members: Sequence[Member]
    spread_s: int = 0
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    jitter_s: int = 0
    #: The job's id: with each member's target id, its start window.
    job_id: int = 0
    #: The job's calendars (``run_only_on``/``never_on``): dates they refuse are no fires.
    dates: DateRule | None = None
    #: What the job's schedule does at DST transitions (``cron/dst.py``).
    dst: DstPolicy = DEFAULT_DST

    def zones(self, default_zone: str, target: str | None = None) -> set[str]:
        """The zones the job runs in (with ``target``, that target's alone)."""
        return {
            effective_zone(self.timezone, m.target_zone, default_zone)
            for m in self.members
            if target is None or m.target == target
        }

    def start_bounds(self, members: Sequence[Member]) -> tuple[float, float]:
        """Seconds after a fire at which the first of ``members`` starts and by which the
        last one has: the scheduler's own windows, for bulk and individual jobs alike."""
        windows = [
            start_window(self.job_id, m.target_id, spread_s=self.spread_s, jitter_s=self.jitter_s)
            for m in members
        ]
        if not windows:
            return 0.0, 0.0
        return min(w.delay_s for w in windows), max(w.delay_s for w in windows)


@dataclass(frozen=True)
class Rollout:
    """How a fire's active targets start: canaries first, then waves of ``batch``."""

    canaries: int
    waves: int
    batch: int
    pause_s: int
    max_failures: int | None
    #: Why nothing of the fire runs, when the rollout halts it before anything starts
    #: (no canary among its targets, or a canary paused), else None.
    halted: str | None = None

    def describe(self) -> str:
        if self.halted:
            return self.halted
        parts = []
        if self.canaries:
            parts.append(f"{self.canaries} canar{'y' if self.canaries == 1 else 'ies'} first")
        rest_waves = self.waves - (1 if self.canaries else 0)
        if rest_waves:
            parts.append(
                f"{rest_waves} batch{'es' if rest_waves != 1 else ''} of up to {self.batch}"
            )
        if self.pause_s and self.waves > 1:
            parts.append(f"{self.pause_s} s between batches")
        if self.max_failures is not None:
            parts.append(f"halt after {self.max_failures} failed")
        return ", ".join(parts)


@dataclass(frozen=True)
class Fire:
    """One fire of one job in one zone."""

    at: datetime
    job: str
    origin: str
    zone: str
    active: int
    paused: int
    disabled: int
    spread_s: int
    rollout: Rollout | None
    #: Seconds after ``at`` when the first active target starts and the last one has.
    first_start_s: float = 0.0
    last_start_s: float = 0.0
    #: The job's start window in words (``core.start_window.window_words``); "": none.
    window: str = ""

    @property
    def state(self) -> str:
        """``fires`` when some target runs it, ``halted`` when its rollout skips the
        whole slot before anything starts, else ``paused`` (targets paused) or
        ``disabled`` (every assignment disabled)."""
        if self.active:
            return "halted" if self.rollout is not None and self.rollout.halted else "fires"
        return "paused" if self.paused else "disabled"

    @property
    def first_start(self) -> datetime:
        """When the first active target starts."""
        return self.at + timedelta(seconds=self.first_start_s)

    @property
    def last_start(self) -> datetime:
        """When the last active target starts."""
        return self.at + timedelta(seconds=self.last_start_s)

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "job": self.job,
            "origin": self.origin,
            "zone": self.zone,
            "state": self.state,
            "targets": {"active": self.active, "paused": self.paused, "disabled": self.disabled},
            "spread_s": self.spread_s,
            "starts": {
                "first": self.first_start.isoformat(),
                "last": self.last_start.isoformat(),
                "window": self.window,
            },
            "rollout": None
            if self.rollout is None
            else {
                "canaries": self.rollout.canaries,
                "waves": self.rollout.waves,
                "batch": self.rollout.batch,
                "pause_s": self.rollout.pause_s,
                "max_failures": self.rollout.max_failures,
                "halted": self.rollout.halted,
                "text": self.rollout.describe(),
            },
        }


@dataclass(frozen=True)
class Upcoming:
    fires: list[Fire]
    start: datetime
    end: datetime
    truncated: bool
    #: The next DST transitions of the zones the jobs run in, with what each job does at
    #: them (``core/dst_preview.py``): every one for one job, else those that change a
    #: scheduled time.
    dst: list[DstNote] = field(default_factory=list)


#: How far ahead the DST preview looks, and how many transitions of each zone it shows.
DST_PREVIEW_DAYS = 366
DST_PREVIEW_PER_ZONE = 2


def dst_preview(
    jobs: Sequence[JobFacts],
    now: datetime,
    default_zone: str,
    *,
    target: str | None = None,
    all_notes: bool = False,
) -> list[DstNote]:
    """The next :data:`DST_PREVIEW_PER_ZONE` transitions of each zone each job runs in,
    within :data:`DST_PREVIEW_DAYS`, with what the job does at each; unless ``all_notes``,
    only those where the job has a scheduled time inside the skipped or repeated interval."""
    end = now + timedelta(days=DST_PREVIEW_DAYS)
    notes: list[DstNote] = []
    for job in jobs:
        found = dst_notes(job.schedule, job.zones(default_zone, target), job.dst, now, end)
        seen: dict[str, int] = {}
        for note in found:
            seen[note.zone] = seen.get(note.zone, 0) + 1
            if seen[note.zone] <= DST_PREVIEW_PER_ZONE and (all_notes or note.affected):
                notes.append(replace(note, job=job.name))
    return sorted(notes, key=lambda n: (n.at, n.job, n.zone))


def rollout_plan(
    options: RolloutOptions, active: Sequence[Member], paused: Sequence[Member] = ()
) -> Rollout | None:
    """The waves a slot over ``active`` members would start in, decided by the scheduler's
    own rules (``core/rollout.py``) over the slot's rows as they are recorded when it
    fires: a ``pending`` row for each active member, a ``skipped`` one for each member
    whose target is ``paused``. Percentages are of all those rows (canaries and paused
    targets included); a slot without a canary among them, or whose canary is paused,
    is halted before anything runs."""
    if not options.active or not active:
        return None
    rows = [
        slot_rollout.Member(
            i,
            m.target,
            (slot_rollout.Attempt(RunStatus.PENDING if i < len(active) else RunStatus.SKIPPED),),
            canary=bool(options.canary) and options.canary.matches(m.target, m.labels),
        )
        for i, m in enumerate([*active, *paused])
    ]
    limit = slot_rollout.threshold(options, len(rows))
    halt = slot_rollout.plan_rollout(rows, options, datetime.min.replace(tzinfo=UTC)).halt
    if halt is not None:
        if halt.cause == "no_canary":
            why = (
                f"halted: no target of this fire is a canary (canary {options.canary}); "
                "nothing runs"
            )
        else:
            why = f"halted: canary {', '.join(halt.failed)} is paused; nothing runs"
        return Rollout(0, 0, 0, options.batch_pause_s, limit, halted=why)
    # Waves as the scheduler forms them; one of paused targets alone starts nothing.
    waves = [
        started
        for wave in slot_rollout.waves_of(rows, options)
        if (started := [m for m in wave if m.not_started])
    ]
    canaries = sum(1 for m in rows if m.canary and m.not_started)
    batches = waves[1:] if canaries else waves
    batch = max((len(w) for w in batches), default=0)
    return Rollout(canaries, len(waves), batch, options.batch_pause_s, limit)


def _slot_plan(
    job: JobFacts,
    zones: Mapping[str, Sequence[Member]],
    shared: tuple[str, ...],
    plans: dict[tuple[str, ...], Rollout | None],
) -> Rollout | None:
    """The rollout plan of a slot fired by the zones ``shared`` together (cached in
    ``plans``: a job's fires in the same zones have the same plan)."""
    if not job.rollout.active:
        return None
    if shared not in plans:
        rows = [m for zone in shared for m in zones[zone] if m.enabled]
        plans[shared] = rollout_plan(
            job.rollout,
            [m for m in rows if not m.target_paused],
            [m for m in rows if m.target_paused],
        )
    return plans[shared]


def upcoming(
    jobs: Iterable[JobFacts],
    now: datetime,
    hours: float,
    default_zone: str,
    *,
    limit: int = 1000,
    target: str | None = None,
) -> Upcoming:
    """The fires of ``jobs`` in (now, now + hours], soonest first, at most ``limit``;
    with ``target``, only its fires, counting only it (the rollout is still planned over
    every member of the slot).

    A slot is one job and one instant, so the zones of a target-local job that fire at
    the same instant (Europe/Berlin and Europe/Paris; an hourly job in zones whole hours
    apart) are one slot for its rollout: each of their lines shows the plan over all of
    them, as the scheduler decides it."""
    end = now + timedelta(hours=hours)
    fires: list[Fire] = []
    jobs = list(jobs)
    for job in jobs:
        fires += _job_fires(job, now, end, default_zone, limit=limit, target=target)
    # By the instant: two fires of one zone in a DST fold have the same wall time.
    fires.sort(key=lambda f: (f.at.astimezone(UTC), f.job, f.zone))
    notes = dst_preview(jobs, now, default_zone, target=target, all_notes=len(jobs) == 1)
    return Upcoming(fires[:limit], now, end, len(fires) > limit, notes)


def _job_fires(
    job: JobFacts,
    now: datetime,
    end: datetime,
    default_zone: str,
    *,
    limit: int,
    target: str | None,
) -> list[Fire]:
    """One job's fires in (now, end], a line per zone its members run in (with
    ``target``, only that target's zone)."""
    zones = _members_by_zone(job, default_zone)
    times, at_instant = _fire_times(
        job.schedule, zones, now, end, limit, dates=job.dates, dst=job.dst
    )
    plans: dict[tuple[str, ...], Rollout | None] = {}

    def plan(at: datetime) -> Rollout | None:
        """The rollout plan of the slot at ``at``, shared by the zones firing with it."""
        return _slot_plan(job, zones, tuple(sorted(at_instant[at.astimezone(UTC)])), plans)

    fires: list[Fire] = []
    for zone, members in zones.items():
        if target is not None:
            members = [m for m in members if m.target == target]
            if not members:
                continue
        fires.extend(_zone_fires(job, zone, members, times[zone], plan))
    return fires


def _members_by_zone(job: JobFacts, default_zone: str) -> dict[str, list[Member]]:
    """The job's members grouped by the zone its schedule runs in for each."""
    zones: dict[str, list[Member]] = {}
    for member in job.members:
        zone = effective_zone(job.timezone, member.target_zone, default_zone)
        zones.setdefault(zone, []).append(member)
    return zones


def _zone_fires(
    job: JobFacts,
    zone: str,
    members: Sequence[Member],
    times: Iterable[datetime],
    plan: Callable[[datetime], Rollout | None],
) -> list[Fire]:
    """The fires of one zone's ``members`` at ``times``, with their counts by state, start
    window and (when some member would run) the slot's rollout plan."""
    active = sum(1 for m in members if m.enabled and not m.target_paused)
    paused = sum(1 for m in members if m.enabled and m.target_paused)
    disabled = sum(1 for m in members if not m.enabled)
    first_s, last_s = job.start_bounds([m for m in members if m.enabled and not m.target_paused])
    return [
        Fire(
            at,
            job.name,
            job.origin,
            zone,
            active,
            paused,
            disabled,
            job.spread_s + job.jitter_s,
            plan(at) if active else None,
            first_s,
            last_s,
            window_words(job.spread_s, job.jitter_s),
        )
        for at in times
    ]


def _fire_times(
    schedule: str,
    zones: Iterable[str],
    now: datetime,
    end: datetime,
    limit: int,
    *,
    dates: DateRule | None = None,
    dst: DstPolicy = DEFAULT_DST,
) -> tuple[dict[str, list[datetime]], dict[datetime, list[str]]]:
    """The instants ``schedule`` fires in (now, end] in each zone (at most ``limit`` per
    zone) on the dates ``dates`` allows, and the zones firing at each instant (by UTC)."""
    times: dict[str, list[datetime]] = {}
    at_instant: dict[datetime, list[str]] = {}
    for zone in zones:
        found = []
        cron = parse_cached(schedule, zone, dst)
        fires = (
            cron.between(now, end)
            if dates is None
            else CalendarSchedule(cron, dates).between(now, end)
        )
        for count, at in enumerate(fires):
            if count >= limit:
                break  # this job alone fills the list: later fires cannot be shown
            found.append(at)
            at_instant.setdefault(at.astimezone(UTC), []).append(zone)
        times[zone] = found
    return times, at_instant
