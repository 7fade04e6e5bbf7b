"""Jobs: bulk jobs over many targets and individual jobs on one.

A bulk job has one assignment per selected paired target, each with its own enabled
flag; its schedule, command and notes are shared by all (no per-target divergence).
An individual job has exactly one assignment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from fleetcron.app import Actor, App
from fleetcron.core import job_options
from fleetcron.core import validation as v
from fleetcron.core.bounded import named_few
from fleetcron.core.calendars import Calendar, rule_of
from fleetcron.core.duplicates import Registration, find_duplicates
from fleetcron.core.labels import format_selector, parse_selector
from fleetcron.core.start_window import start_window
from fleetcron.core.target_zones import effective_zone, validate_job_timezone
from fleetcron.cron import parse
from fleetcron.errors import Conflict, InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, audited, command_excerpt
from fleetcron.services.fleet.assignments import (
    get_target,
    new_assignment,
    next_fire,
    refire_assignments,
    sync_bulk_membership,
)
from fleetcron.services.fleet.local_gate import (
    local_commands_privileged,
    require_cleared,
    stamp_author,
)
from fleetcron.services.jobs.version_writes import record_version
from fleetcron.services.projects.scope import place
from fleetcron.store.calendar_sets import load_calendars
from fleetcron.store.schema import Assignment, Job, Target


@dataclass(frozen=True)
class AssignmentView:
    target: str
    enabled: bool
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    #: The zone the job fires in on this target (the target's own for a job in the
    #: ``target`` zone; the default zone when the target has none), and the next fire as
    #: that zone's wall time (ISO 8601 with its offset).
    timezone: str = ""
    next_fire_local: str | None = None
    #: Seconds after each slot at which this target starts: its place in the job's spread
    #: window (``core.start_window``; 0 without a spread), before any jitter.
    spread_offset_s: float = 0.0
    #: Seconds after each scheduled slot at which this target's command starts: its place
    #: in the job's whole start window, spread offset plus jitter (``StartWindow.delay_s``).
    start_delay_s: float = 0.0


@dataclass(frozen=True)
class JobView:
    """A job as the CLI, API and pages show it."""

    id: int
    name: str
    origin: str
    schedule: str
    timezone: str
    command: str
    notes: str
    selector: str
    timeout_s: int
    overlap: str
    catchup: str
    jitter_s: int
    spread_s: int
    retries: int
    retry_on: list[str]
    retry_backoff_s: int
    allow_duplicate: bool
    batch: str
    batch_pause_s: int
    max_failures: str
    canary: str
    on_blackout: str
    run_only_on: str
    never_on: str
    dst_gap: str
    dst_fold: str
    keep_successes_days: int
    keep_failures_days: int
    created_by: str
    updated_by: str
    created_at: datetime
    updated_at: datetime
    enabled: int
    total: int
    target: str | None = None
    assignments: list[AssignmentView] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_DEFAULT = job_options.defaults()


@dataclass(frozen=True)
class JobSpec:
    """Everything a job holds besides its name; the defaults are the declaration's
    (:mod:`fleetcron.core.job_options`), with which a test keeps these fields in step."""

    schedule: str
    command: str
    timezone: str | None = None
    notes: str = _DEFAULT["notes"]
    timeout_s: int | None = None
    overlap: str = _DEFAULT["overlap"]
    catchup: str = _DEFAULT["catchup"]
    jitter_s: int = _DEFAULT["jitter_s"]
    spread_s: int = _DEFAULT["spread_s"]
    retries: int = _DEFAULT["retries"]
    retry_on: Sequence[str] = _DEFAULT["retry_on"]
    retry_backoff_s: int = _DEFAULT["retry_backoff_s"]
    allow_duplicate: bool = _DEFAULT["allow_duplicate"]
    batch: str = _DEFAULT["batch"]
    batch_pause_s: int = _DEFAULT["batch_pause_s"]
    max_failures: str = _DEFAULT["max_failures"]
    canary: str = _DEFAULT["canary"]
    on_blackout: str = _DEFAULT["on_blackout"]
    run_only_on: str = _DEFAULT["run_only_on"]
    never_on: str = _DEFAULT["never_on"]
    dst_gap: str = _DEFAULT["dst_gap"]
    dst_fold: str = _DEFAULT["dst_fold"]
    keep_successes_days: int = _DEFAULT["keep_successes_days"]
    keep_failures_days: int = _DEFAULT["keep_failures_days"]


#: The fields :func:`edit_job` changes: every declared option, and a bulk job's selector.
EDITABLE = (*(o.name for o in job_options.OPTIONS), "selector")


def get_job(session: Session, name: str, pid: int) -> Job:
    """Job ``name`` of project ``pid``; NotFound otherwise, whatever other projects hold."""
    job = session.scalar(
        select(Job)
        .where(Job.name == name, Job.project_id == pid)
        .options(selectinload(Job.assignments))
    )
    if job is None:
        raise NotFound("job", name)
    return job


#: The options checked here with the settings or the cron engine, before the declaration's
#: own rules (the zone and the schedule are checked by ``cron``, the command against the
#: ``command_max_length`` setting).
_CONTEXT_CHECKED = frozenset({"timezone", "schedule", "command"})


def validated_job_fields(
    app: App, values: dict[str, Any], *, calendars: Mapping[str, Calendar] | None = None
) -> dict[str, Any]:
    """Check every given job field (as in :data:`EDITABLE`); returns them normalized.
    Shared by the jobs service and schedules as code, so both apply the same rules.
    ``calendars``: those a job may name (a schedule file's own with the store's, read in
    its transaction); by default the store's."""
    out = dict(values)
    if "timezone" in out:
        out["timezone"] = validate_job_timezone(out["timezone"] or app.settings.timezone)
    if "schedule" in out:
        v.validate_length(out["schedule"], field="schedule", limit=v.SCHEDULE_MAX_CHARS)
        parse(out["schedule"], effective_zone(out.get("timezone") or "UTC", None, "UTC"))
    if "command" in out:
        v.validate_command(out["command"], max_length=app.settings.command_max_length)
    # The rules the declaration states (ranges, choices, lengths), for every other option.
    out.update(
        job_options.check_options(
            {key: value for key, value in out.items() if key not in _CONTEXT_CHECKED}
        )
    )
    if "selector" in out:
        out["selector"] = parse_selector(out["selector"])
    if out.get("run_only_on") or out.get("never_on"):
        _require_calendars(app, out, calendars)
    return out


def _require_calendars(
    app: App, values: Mapping[str, Any], calendars: Mapping[str, Calendar] | None
) -> None:
    """The calendars a job names exist (InvalidInput naming ``run_only_on`` or ``never_on``
    and the calendars there are)."""
    if calendars is None:
        with app.db.read() as session:
            calendars = load_calendars(session)
    rule_of(values.get("run_only_on") or "", values.get("never_on") or "", calendars)


def add_job(
    app: App,
    actor: Actor,
    name: str,
    spec: JobSpec,
    *,
    target: str | None = None,
    bulk: bool = False,
    selector: str | None = None,
    disabled_on: Sequence[str] = (),
) -> JobView:
    """Create an individual job on ``target``, or a bulk job over the selected targets
    (those in ``disabled_on`` get a paused assignment)."""
    origin = "bulk" if bulk else "individual"
    note = AuditNote(
        "job.add",
        job_name=name,
        detail={
            "origin": origin,
            "schedule": spec.schedule,
            "command": command_excerpt(spec.command),
        },
    )
    with audited(app, actor, note) as session:
        actor.authorize_in("job.add")
        pid = place(session, actor)
        v.validate_job_name(name)
        _check_kind(bulk=bulk, target=target, selector=selector, disabled_on=disabled_on)
        values = validated_job_fields(app, {**asdict(spec), "selector": selector or ""})
        job_options.check_job({**values, "origin": origin, "today": app.now()})
        if session.scalar(select(Job.id).where(Job.name == name, Job.project_id == pid)):
            raise Conflict(f"job {name} already exists", field="name")
        job = _new_job(app, actor, name, origin, values)
        job.project_id = pid
        session.add(job)
        if bulk:
            _cover_selected(session, app, job, disabled_on, note)
        else:
            assert target is not None
            _assign_individual(session, app, actor, job, target=target, note=note)
        session.flush()
        require_cleared(app, job)
        refuse_duplicates(session, job)
        note.job_id = job.id
        record_version(session, app, actor, job, note)
        view = _view(job)
        note.detail.update({"enabled": view.enabled, "total": view.total})
        return view


def _new_job(app: App, actor: Actor, name: str, origin: str, values: dict[str, Any]) -> Job:
    """The job row, made by ``actor`` now (the timeout from the settings when not given)."""
    now = app.now()
    job = Job(
        name=name,
        origin=origin,
        created_by=actor.name,
        updated_by=actor.name,
        created_at=now,
        updated_at=now,
        **{**values, "timeout_s": values["timeout_s"] or app.settings.job_timeout_s},
    )
    stamp_author(job, actor)
    return job


def _check_kind(
    *, bulk: bool, target: str | None, selector: str | None, disabled_on: Sequence[str]
) -> None:
    """A job is bulk or on one target, and only a bulk job takes a selector."""
    if bulk == (target is not None):
        raise InvalidInput(
            "a job needs exactly one of --target T (individual) or --bulk",
            field="target",
            value=target,
            allowed="--target NAME or --bulk",
        )
    if not bulk and (selector or disabled_on):
        raise InvalidInput(
            "--selector and --disabled-on apply to bulk jobs only",
            field="selector",
            value=selector,
            allowed="use them with --bulk",
        )


def _cover_selected(
    session: Session, app: App, job: Job, disabled_on: Sequence[str], note: AuditNote
) -> None:
    """A new bulk job's assignments: every paired target its selector matches, those in
    ``disabled_on`` paused (each must be one of them)."""
    for disabled in disabled_on:
        try:
            get_target(session, disabled, job.project_id, shared=True)
        except NotFound:
            raise NotFound("target", disabled, field="disabled_on") from None
    sync_bulk_membership(session, app, job, disabled_on=disabled_on)
    covered = {a.target.name for a in job.assignments}
    stray = sorted(set(disabled_on) - covered)
    if stray:
        raise InvalidInput(
            f"disabled-on: {', '.join(stray)} would not run this job "
            "(unpaired, or not matched by the selector)",
            field="disabled_on",
            value=stray,
            allowed="paired targets the job's selector matches",
        )
    note.detail["selector"] = format_selector(job.selector)


def _assign_individual(
    session: Session, app: App, actor: Actor, job: Job, *, target: str, note: AuditNote
) -> None:
    """A new individual job's target, and its assignment once the target is paired."""
    the_target = get_target(session, target, job.project_id, shared=True)
    note.target_id, note.target_name = the_target.id, the_target.name
    job.target_id = the_target.id
    stamp_author(job, actor)  # setting the target cleared it
    # On an unpaired target the job waits; pairing gives it its assignment.
    if the_target.paired:
        new_assignment(session, app, job, the_target, enabled=True, now=job.created_at)


#: The fields whose change moves each assignment to its next fire time.
_REFIRED_BY = frozenset({"schedule", "timezone", "dst_gap", "dst_fold", "run_only_on", "never_on"})


def edit_job(
    app: App,
    actor: Actor,
    name: str,
    *,
    enabled_on: Mapping[str, bool] | None = None,
    **changes: Any,
) -> JobView:
    """Change fields of a job, and (``enabled_on``) its enabled flag per target, in one
    transaction; for a bulk job every target sees a field change at once."""
    note = AuditNote("job.edit", job_name=name, detail={"changed": sorted(changes)})
    with audited(app, actor, note) as session:
        actor.authorize_in("job.edit")
        _check_editable(changes)
        job = get_job(session, name, place(session, actor))
        note.job_id = job.id
        if "selector" in changes and job.origin != "bulk":
            raise InvalidInput(
                "only bulk jobs have a selector",
                field="selector",
                value=changes["selector"],
                allowed="--selector on bulk jobs",
            )
        values = _set_fields(app, actor, job, changes)
        now = app.now()
        job.updated_by, job.updated_at = actor.name, now
        if _REFIRED_BY & set(values):
            refire_assignments(job.assignments, job, now, app.settings.timezone)
        if "selector" in values:
            added, removed = sync_bulk_membership(session, app, job)
            note.detail.update({"added": added, "removed": removed})
        for target, enabled in (enabled_on or {}).items():
            actor.authorize_in("job.enable" if enabled else "job.disable")
            _toggle(session, app, job, enabled, target)
        _recheck_command(session, app, job, set(values))
        if enabled_on:
            note.detail["enabled_on"] = dict(enabled_on)
        note.detail.update({"schedule": job.schedule, "command": command_excerpt(job.command)})
        record_version(session, app, actor, job, note)
        session.flush()
        return _view(job)


def _check_editable(changes: Mapping[str, Any]) -> None:
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise InvalidInput(
            f"cannot edit {', '.join(sorted(unknown))}",
            field=sorted(unknown)[0],
            value=None,
            allowed=", ".join(EDITABLE),
        )


def _set_fields(app: App, actor: Actor, job: Job, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The changed fields checked and set on ``job``, then the rules over all of its
    options (a refusal rolls the whole edit back); returns the fields as set."""
    values = validated_job_fields(
        app,
        {
            **changes,
            **(
                {"timezone": changes.get("timezone") or job.timezone}
                if "schedule" in changes or "timezone" in changes
                else {}
            ),
        },
    )
    for key, value in values.items():
        setattr(job, key, value)
    if {"command", "selector"} & set(values):
        stamp_author(job, actor)
    job_options.check_job(
        {o.name: getattr(job, o.name) for o in job_options.OPTIONS}
        | {"origin": job.origin, "today": app.now()}
    )
    return values


def _recheck_command(session: Session, app: App, job: Job, changed: set[str]) -> None:
    """After a change of command, selector or duplicates: the local gate and the rule
    against a duplicate registration, again."""
    if {"command", "selector"} & changed:
        session.flush()
        require_cleared(app, job)
    if {"command", "selector", "allow_duplicate"} & changed:
        session.flush()
        refuse_duplicates(session, job)


def set_enabled(
    app: App, actor: Actor, name: str, enabled: bool, *, target: str | None = None
) -> JobView:
    """Enable or disable a job everywhere, or only on one target (one assignment)."""
    action = "job.enable" if enabled else "job.disable"
    note = AuditNote(action, job_name=name, target_name=target)
    with audited(app, actor, note) as session:
        actor.authorize_in(action)
        job = get_job(session, name, place(session, actor))
        note.job_id = job.id
        changed = _toggle(session, app, job, enabled, target)
        session.flush()
        view = _view(job)
        note.detail.update({"changed": changed, "enabled": view.enabled, "total": view.total})
        return view


def _toggle(session: Session, app: App, job: Job, enabled: bool, target: str | None) -> int:
    """Set the enabled flag of every assignment of ``job``, or of its one on ``target``;
    returns how many assignments that concerned."""
    assignments = job.assignments
    if target is not None:
        the_target = get_target(session, target, job.project_id, shared=True)
        assignments = [a for a in job.assignments if a.target_id == the_target.id]
        if not assignments:
            raise NotFound(f"assignment of job {job.name} on target", target)
    now = app.now()
    for assignment in assignments:
        if assignment.enabled != enabled:
            assignment.enabled = enabled
            assignment.updated_at = now
            if enabled:
                # A paused assignment resumes at its next slot, not at the ones it skipped.
                assignment.next_fire_at = next_fire(
                    job, now, target=assignment.target, default_zone=app.settings.timezone
                )
    return len(assignments)


def remove_job(app: App, actor: Actor, name: str) -> int:
    """Delete the job and all its assignments in one transaction; run history stays."""
    note = AuditNote("job.remove", job_name=name)
    with audited(app, actor, note) as session:
        actor.authorize_in("job.remove")
        job = get_job(session, name, place(session, actor))
        note.job_id = job.id
        count = len(job.assignments)
        note.detail.update(
            {
                "origin": job.origin,
                "assignments": count,
                "schedule": job.schedule,
                "command": command_excerpt(job.command),
            }
        )
        session.delete(job)
        return count


def list_jobs(
    app: App, actor: Actor, *, origin: str | None = None, target: str | None = None
) -> list[JobView]:
    actor.authorize_in("job.read")
    with app.db.read() as session:
        pid = place(session, actor)
        query = (
            select(Job)
            .where(Job.project_id == pid)
            .options(selectinload(Job.assignments).selectinload(Assignment.target))
        )
        if origin:
            query = query.where(
                Job.origin == v.validate_choice(origin, ("bulk", "individual"), field="origin")
            )
        if target:
            the_target = get_target(session, target, pid, shared=True)
            query = query.where(
                Job.id.in_(select(Assignment.job_id).where(Assignment.target_id == the_target.id))
                | (Job.target_id == the_target.id)
            )
        return [_view(job) for job in session.scalars(query.order_by(Job.name))]


def job_names(app: App, actor: Actor) -> list[str]:
    """Every job's name, sorted: one statement reading only the names (what a filter's
    list of jobs needs, without loading every job's assignments and targets)."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        pid = place(session, actor)
        return list(
            session.scalars(select(Job.name).where(Job.project_id == pid).order_by(Job.name))
        )


def show_job(app: App, actor: Actor, name: str) -> JobView:
    actor.authorize_in("job.read")
    with app.db.read() as session:
        job = get_job(session, name, place(session, actor))
        return _view(job, with_assignments=True, default_zone=app.settings.timezone)


def _assignment_view(a: Assignment, job: Job, default_zone: str) -> AssignmentView:
    zone = effective_zone(job.timezone, a.target.timezone, default_zone)
    local = a.next_fire_at.astimezone(ZoneInfo(zone)).isoformat() if a.next_fire_at else None
    window = start_window(job.id, a.target_id, spread_s=job.spread_s, jitter_s=job.jitter_s)
    return AssignmentView(
        a.target.name,
        a.enabled,
        a.next_fire_at,
        a.last_fire_at,
        zone,
        local,
        window.offset_s,
        round(window.delay_s, 3),
    )


def _view(job: Job, *, with_assignments: bool = False, default_zone: str = "UTC") -> JobView:
    assignments = sorted(job.assignments, key=lambda a: a.target.name)
    return JobView(
        id=job.id,
        name=job.name,
        origin=job.origin,
        selector=format_selector(job.selector),
        **{o.name: o.stored(getattr(job, o.name)) for o in job_options.OPTIONS},
        created_by=job.created_by,
        updated_by=job.updated_by,
        created_at=job.created_at,
        updated_at=job.updated_at,
        enabled=sum(1 for a in assignments if a.enabled),
        total=len(assignments),
        target=job.target.name if job.target is not None else None,
        assignments=[_assignment_view(a, job, default_zone) for a in assignments]
        if with_assignments
        else [],
    )


__all__ = [
    "AssignmentView",
    "JobSpec",
    "JobView",
    "Target",
    "add_job",
    "edit_job",
    "get_job",
    "list_jobs",
    "local_commands_privileged",
    "remove_job",
    "set_enabled",
    "show_job",
]


def require_local_clearance(app: App, actor: Actor, job: Job) -> None:
    """``actor`` writes the job's command or selector now: record them as its author and
    ask the local gate of every local target it covers (raises LocalRefused, a 403)."""
    stamp_author(job, actor)
    require_cleared(app, job)


def covered_targets(job: Job) -> frozenset[str]:
    """The targets a job registers its command on: paused or not; an individual job's
    target even while it is unpaired."""
    names = {a.target.name for a in job.assignments}
    if job.target is not None:
        names.add(job.target.name)
    return frozenset(names)


def refuse_duplicates(session: Session, job: Job) -> None:
    """Refuse a second registration of the same command on the same target by another job
    of the same project (a duplicate registration), unless one of the two jobs allows
    duplicates. Another project's jobs are neither compared (target names repeat across
    projects) nor named."""
    mine = Registration(job.name, job.command, covered_targets(job), job.allow_duplicate)
    if mine.allow_duplicate or not mine.targets:
        return
    # Only the jobs whose command holds this one's are read (a superset of those equal to
    # it without surrounding whitespace, compared below): adding a job costs the same
    # however many jobs there are, where it loaded every job with its targets.
    others = session.scalars(
        select(Job)
        .where(
            Job.id != job.id,
            Job.project_id == job.project_id,
            Job.allow_duplicate.is_(False),
            Job.command.contains(job.command.strip(), autoescape=True),
        )
        .options(selectinload(Job.assignments).selectinload(Assignment.target))
    )
    registrations = [mine] + [
        Registration(o.name, o.command, covered_targets(o))
        for o in others
        if o.command.strip() == job.command.strip()
    ]
    found = find_duplicates(registrations, among={job.name})
    if found:
        duplicate = found[0]
        other = next(name for name in duplicate.jobs if name != job.name)
        raise Conflict(
            f"duplicate registration: jobs {job.name} and {other} would both run "
            f"{job.command.strip()!r} on {len(duplicate.targets):,} target(s): "
            f"{named_few(duplicate.targets)}; remove one, or allow "
            "duplicates on one of them (--allow-duplicate)",
            field="command",
        )


def count_by_origin(app: App, actor: Actor) -> dict[str, int]:
    """How many jobs there are of each origin (``bulk``, ``individual``), in one grouped
    statement: what the dashboard shows, without loading every job's assignments."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        pid = place(session, actor)
        query = select(Job.origin, func.count()).where(Job.project_id == pid)
        rows = session.execute(query.group_by(Job.origin)).all()
    return {origin: int(count) for origin, count in rows}
