"""Blackout windows: add, change, lift, list and show.

A window is one-off (``start`` and ``end``, or ``start`` and a ``duration``) or recurring
(a ``cron`` expression or a ``weekly`` rule such as ``sat 22:00``, with a ``duration``,
optionally ``until`` a time), in a zone (an IANA name, or ``target``: each target's own),
over a job, a target and/or a label selector (``core/blackouts.py``). Times without an
offset are wall-clock times in the window's zone (UTC for ``target`` windows' ``until``).

Adding, changing and lifting need the operator role (an operator operates every job and
target) and are audited with the author and the reason given; reading needs a viewer. A
window lifts by itself when it expires; lifting one early lets the runs it deferred start
at once (or at the end of another window that still covers them).

Decided: overlapping windows are allowed (each skips what it covers; a rack's patch night
inside the weekly window is normal), and said: the view lists the one-off windows of the
same scope and zone that overlap (``overlaps``), which the CLI and pages show as a note.
Nothing is saved when any field is refused.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core import blackouts as rule
from fleetcron.core.target_zones import TARGET_LOCAL, validate_zone
from fleetcron.core.validation import validate_int
from fleetcron.cron import CronSchedule, parse
from fleetcron.errors import InvalidInput, NotFound, found
from fleetcron.services.audit import AuditNote, audited
from fleetcron.services.fleet.assignments import get_target
from fleetcron.services.jobs.edit import get_job
from fleetcron.services.projects.scope import place
from fleetcron.services.targets.reads import matching_selector
from fleetcron.store.blackout_windows import as_window, in_force
from fleetcron.store.run_writes import release_deferred
from fleetcron.store.schema import Blackout

NAME_MAX: Final = 64
REASON_MAX: Final = 500
LIST_MAX: Final = 500
#: Openings of a recurring window looked at to see whether its occurrences chain forever.
CHAIN_SAMPLE: Final = 400


@dataclass(frozen=True)
class BlackoutSpec:
    """A window as an operator gives it (times as text, see the module docstring)."""

    name: str
    reason: str
    job: str | None = None
    target: str | None = None
    selector: str | None = None
    zone: str = "UTC"
    start: str | None = None
    end: str | None = None
    cron: str | None = None
    weekly: str | None = None
    duration_s: int | None = None
    until: str | None = None


@dataclass(frozen=True)
class BlackoutView:
    id: int
    name: str
    reason: str
    scope: str
    job: str | None
    target: str | None
    selector: str | None
    zone: str
    kind: str
    when: str
    start: str | None
    end: str | None
    cron: str | None
    duration_s: int | None
    until: datetime | None
    expires_at: datetime | None
    created_by: str
    created_at: datetime
    updated_by: str
    updated_at: datetime
    lifted_by: str | None
    lifted_at: datetime | None
    active: bool
    overlaps: list[int]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_blackout(app: App, actor: Actor, spec: BlackoutSpec) -> BlackoutView:
    """Create a window. Raises InvalidInput naming the field (unknown zone, end before
    start, a bad cron or weekly rule, a duration out of range or one that never lifts,
    an empty scope or reason, a name in use) or NotFound (job, target), saving nothing."""
    note = _note("blackout.add", spec)
    with audited(app, actor, note) as session:
        actor.authorize_in("blackout.add")
        now = app.now()
        row = Blackout(created_by=actor.name, created_at=now)
        _fill(session, row, spec, now, actor)
        session.add(row)
        session.flush()
        note.detail["blackout"] = row.id
        return _view(session, row, now)


def change_blackout(app: App, actor: Actor, blackout_id: int, spec: BlackoutSpec) -> BlackoutView:
    """Replace a window in force with ``spec`` (same checks as adding); its deferred runs
    are looked at again. Raises NotFound, or InvalidInput for a window no longer in force."""
    note = _note("blackout.change", spec, blackout_id)
    with audited(app, actor, note) as session:
        actor.authorize_in("blackout.change")
        now = app.now()
        row = _in_force_row(session, actor, blackout_id, now)
        note.detail["before"] = _view(session, row, now).when
        _fill(session, row, spec, now, actor)
        session.flush()
        release_deferred(session, now)
        return _view(session, row, now)


def lift_blackout(app: App, actor: Actor, blackout_id: int, reason: str) -> BlackoutView:
    """End a window now; the runs it deferred start on the next tick (unless another window
    still covers them). Raises NotFound, or InvalidInput (``blackout``: not in force;
    ``reason``: empty), changing nothing."""
    note = AuditNote("blackout.lift", detail={"blackout": blackout_id, "reason": reason})
    with audited(app, actor, note) as session:
        actor.authorize_in("blackout.lift")
        now = app.now()
        _check_reason(reason)
        row = _in_force_row(session, actor, blackout_id, now)
        row.lifted_at, row.lifted_by = now, actor.name
        row.updated_at, row.updated_by = now, actor.name
        note.job_name, note.target_name = row.job_name, row.target_name
        session.flush()
        note.detail["released"] = release_deferred(session, now)
        return _view(session, row, now)


def list_blackouts(
    app: App, actor: Actor, *, include_ended: bool = False, limit: int = 100
) -> list[BlackoutView]:
    """Windows in force (with ``include_ended`` the lifted and expired ones too) of the
    actor's project, newest first."""
    actor.authorize_in("blackout.read")
    validate_int(limit, field="limit", low=1, high=LIST_MAX)
    now = app.now()
    with app.db.read() as session:
        query = (
            select(Blackout)
            .where(Blackout.project_id == place(session, actor))
            .order_by(Blackout.id.desc())
            .limit(limit)
        )
        rows = list(session.scalars(query))
        views = [_view(session, row, now) for row in rows]
    return views if include_ended else [v for v in views if v.active]


def show_blackout(app: App, actor: Actor, blackout_id: int) -> BlackoutView:
    actor.authorize_in("blackout.read")
    now = app.now()
    with app.db.read() as session:
        return _view(session, _own_row(session, actor, blackout_id), now)


def _own_row(session: Session, actor: Actor, blackout_id: int) -> Blackout:
    """Window ``blackout_id`` of the actor's project; NotFound for another project's."""
    row = session.get(Blackout, blackout_id)
    if row is None or row.project_id != place(session, actor):
        raise NotFound("blackout window", blackout_id, field="blackout")
    return row


# -- checking and filling a row ----------------------------------------------------------


def _note(action: str, spec: BlackoutSpec, blackout_id: int | None = None) -> AuditNote:
    detail: dict[str, Any] = {"name": spec.name, "reason": spec.reason, "zone": spec.zone}
    if blackout_id is not None:
        detail["blackout"] = blackout_id
    return AuditNote(action, job_name=spec.job, target_name=spec.target, detail=detail)


def _fill(
    session: Session,
    row: Blackout,
    spec: BlackoutSpec,
    now: datetime,
    actor: Actor,
    *,
    known_jobs: frozenset[str] = frozenset(),
) -> None:
    """Check every field of ``spec`` and write it into ``row`` (nothing is flushed before
    all checks passed, so a refusal saves nothing). ``known_jobs``: jobs taken as existing
    (those a schedule file declares, before its apply writes them). A new row is of the
    project the actor acts in; its job and target are named in that project."""
    if row.project_id is None:
        row.project_id = place(session, actor)
    name = _check_name(session, spec.name, now, row)
    reason = _check_reason(spec.reason)
    zone = _check_zone(spec.zone)
    job, target, selector = _check_scope(session, spec, row.project_id, known_jobs)
    window = _check_time(spec, zone, now)
    row.name, row.reason, row.zone = name, reason, zone
    row.job_name, row.target_name, row.selector = job, target, selector
    row.kind = window.kind
    row.start_wall = window.start.isoformat() if window.start else None
    row.end_wall = window.end.isoformat() if window.end else None
    row.cron = window.cron
    row.duration_s = int(window.duration.total_seconds()) if window.duration else None
    row.until = window.until
    row.expires_at = rule.expires_at(window)
    row.updated_by, row.updated_at = actor.name, now


def _check_name(session: Session, name: str, now: datetime, row: Blackout) -> str:
    """The name, stripped; InvalidInput when another window in force of the row's project
    has it."""
    name = name.strip()
    if not 1 <= len(name) <= NAME_MAX:
        raise InvalidInput(
            f"name: give the window a name of 1 to {NAME_MAX} characters",
            field="name",
            value=name,
            allowed=f"1..{NAME_MAX} characters",
        )
    for other in in_force(session, now):
        mine = other.scope.project == row.project_id
        if mine and other.name == name and other.id != row.id:
            raise InvalidInput(
                f"name: window #{other.id} in force is already called {name!r}; "
                "choose another name, or change or lift that window",
                field="name",
                value=name,
                allowed="a name no window in force has",
            )
    return name


def _check_reason(reason: str) -> str:
    reason = reason.strip()
    if not 1 <= len(reason) <= REASON_MAX:
        raise InvalidInput(
            f"reason: say why, in 1 to {REASON_MAX} characters",
            field="reason",
            value=len(reason),
            allowed=f"1..{REASON_MAX} characters",
        )
    return reason


def _check_zone(zone: str) -> str:
    if zone == TARGET_LOCAL:
        return zone
    return validate_zone(zone, field="zone", extra=f', or "{TARGET_LOCAL}" (each target\'s own)')


def _check_scope(
    session: Session, spec: BlackoutSpec, pid: int, known_jobs: frozenset[str] = frozenset()
) -> tuple[str | None, str | None, str | None]:
    """The job, target (the project's own or one shared into it) and selector a window of
    project ``pid`` covers; NotFound for a job or target the project does not have."""
    if spec.job is None and spec.target is None and not spec.selector:
        raise InvalidInput(
            "job: name a job, a target and/or a selector the window covers",
            field="job",
            allowed="--job, --target and/or --selector",
        )
    if spec.job is not None and spec.job not in known_jobs:
        found(lambda: get_job(session, spec.job or "", pid), "job")
    if spec.target is not None:
        found(lambda: get_target(session, spec.target or "", pid, shared=True), "target")
    selector = matching_selector(session, spec.selector) if spec.selector else None
    return spec.job, spec.target, selector


def _check_time(spec: BlackoutSpec, zone: str, now: datetime) -> rule.Window:
    """The window's time fields, checked, as a core window (scope left empty)."""
    base = rule.Window(id=0, name="", scope=rule.Scope(), zone=zone, kind="once")
    recurring = spec.cron is not None or spec.weekly is not None
    if recurring == (spec.start is not None):
        raise InvalidInput(
            "start: give a start (a one-off window) or a cron or weekly rule (a recurring "
            "one), not both",
            field="start",
            allowed="--start with --end or --duration, or --cron/--weekly with --duration",
        )
    if recurring:
        return _recurring(spec, base, now)
    return _once(spec, base, now)


def _once(spec: BlackoutSpec, base: rule.Window, now: datetime) -> rule.Window:
    start = _wall(spec.start or "", "start")
    if (spec.end is None) == (spec.duration_s is None):
        raise InvalidInput(
            "end: give an end or a duration (one of them)",
            field="end",
            allowed="--end TIME or --duration SECONDS",
        )
    if spec.end is not None:
        end = _wall(spec.end, "end")
    else:
        end = start + timedelta(seconds=spec.duration_s or 0)
    rule.check_once(start, end)
    window = replace(base, kind="once", start=start, end=end)
    expires = rule.expires_at(window)
    if expires is not None and expires <= now:
        raise InvalidInput(
            f"end: {end.isoformat()} ({base.zone}) has already passed",
            field="end",
            value=end.isoformat(),
            allowed=f"a time after now ({now.isoformat()})",
        )
    return window


def _recurring(spec: BlackoutSpec, base: rule.Window, now: datetime) -> rule.Window:
    if spec.cron is not None and spec.weekly is not None:
        raise InvalidInput(
            "cron: give a cron expression or a weekly rule, not both",
            field="cron",
            allowed="--cron or --weekly",
        )
    expression = spec.cron if spec.cron is not None else rule.weekly_cron(spec.weekly or "")
    schedule = parse(expression, "UTC" if base.zone == TARGET_LOCAL else base.zone)
    if spec.duration_s is None:
        raise InvalidInput(
            "duration: a recurring window needs a duration (how long each one lasts)",
            field="duration",
            allowed=f"1 minute to {rule.MAX_DURATION.days} days, in seconds",
        )
    duration = timedelta(seconds=spec.duration_s)
    rule.check_duration(duration)
    _check_lifts(schedule, duration, now)
    until = _until(spec.until, base.zone) if spec.until else None
    if until is not None and until <= now:
        raise InvalidInput(
            f"until: {until.isoformat()} has already passed",
            field="until",
            value=spec.until,
            allowed=f"a time after now ({now.isoformat()})",
        )
    return replace(base, kind="cron", cron=schedule.text, duration=duration, until=until)


def _check_lifts(schedule: CronSchedule, duration: timedelta, now: datetime) -> None:
    """Refuse a recurring window whose occurrences would meet: it would never lift."""
    openings = list(itertools.islice(schedule.iter_after(now), CHAIN_SAMPLE))
    gaps = [b - a for a, b in itertools.pairwise(openings)]
    if gaps and duration >= min(gaps):
        raise InvalidInput(
            f"duration: {duration} is as long as the time between two openings "
            f"({min(gaps)}): the window would never lift",
            field="duration",
            value=int(duration.total_seconds()),
            allowed=f"less than {int(min(gaps).total_seconds())} seconds",
        )


def _wall(text: str, field_name: str) -> datetime:
    """A wall-clock time (``2027-01-10 22:00``); an offset is refused, since the window's
    zone says where the time is read."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        value = None
    if value is None or value.tzinfo is not None:
        raise InvalidInput(
            f"{field_name}: {text!r} is not a date and time such as 2027-01-10 22:00 "
            "(read in the window's zone, without an offset)",
            field=field_name,
            value=text,
            allowed="YYYY-MM-DD HH:MM",
        )
    return value.replace(second=0, microsecond=0)


def _until(text: str, zone: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            f"until: {text!r} is not a date and time such as 2027-03-31 00:00",
            field="until",
            value=text,
            allowed="YYYY-MM-DD HH:MM, optionally with an offset",
        ) from None
    if value.tzinfo is not None:
        return value.astimezone(UTC)
    return rule.wall(value, "UTC" if zone == TARGET_LOCAL else zone)


def _in_force_row(session: Session, actor: Actor, blackout_id: int, now: datetime) -> Blackout:
    row = _own_row(session, actor, blackout_id)
    if not _active(row, now):
        ended = row.lifted_at or row.expires_at
        raise InvalidInput(
            f"blackout: window #{blackout_id} is no longer in force "
            f"(ended {ended.isoformat() if ended else 'already'})",
            field="blackout",
            value=blackout_id,
            allowed="a window in force (fleetcron blackout list)",
        )
    return row


def _active(row: Blackout, now: datetime) -> bool:
    return row.lifted_at is None and (row.expires_at is None or row.expires_at > now)


def _when(window: rule.Window) -> str:
    if window.kind == "once":
        assert window.start is not None and window.end is not None
        return f"{window.start:%Y-%m-%d %H:%M} to {window.end:%Y-%m-%d %H:%M} ({window.zone})"
    assert window.cron is not None and window.duration is not None
    text = f"{parse(window.cron).describe()}, for {window.duration} ({window.zone})"
    return text + (f", until {window.until.isoformat()}" if window.until else "")


def _view(session: Session, row: Blackout, now: datetime) -> BlackoutView:
    window = as_window(row)
    active = _active(row, now)
    others = (
        [w for w in in_force(session, now) if w.scope.project == row.project_id] if active else []
    )
    return BlackoutView(
        id=row.id,
        name=row.name,
        reason=row.reason,
        scope=window.scope.words(),
        job=row.job_name,
        target=row.target_name,
        selector=row.selector,
        zone=row.zone,
        kind=row.kind,
        when=_when(window),
        start=row.start_wall,
        end=row.end_wall,
        cron=row.cron,
        duration_s=row.duration_s,
        until=row.until,
        expires_at=row.expires_at,
        created_by=row.created_by,
        created_at=row.created_at,
        updated_by=row.updated_by,
        updated_at=row.updated_at,
        lifted_by=row.lifted_by,
        lifted_at=row.lifted_at,
        active=active,
        overlaps=[w.id for w in rule.overlapping(window, others)],
    )


__all__ = [
    "BlackoutSpec",
    "BlackoutView",
    "add_blackout",
    "change_blackout",
    "lift_blackout",
    "list_blackouts",
    "show_blackout",
]
