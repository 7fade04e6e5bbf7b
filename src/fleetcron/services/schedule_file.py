"""Schedules as code: apply a schedule file in one transaction, export the store as one,
and list every (job, target) schedule once.

An apply plans in a read transaction first: a file with problems, or one that matches
the store already, writes nothing. Otherwise the plan is made again inside the write
transaction (the store may have moved in between) and carried out there, all or nothing,
with one audit event per job created, changed or deleted and one ``schedule.apply`` event
for the whole. A refused apply leaves only its failed ``schedule.apply`` event.

The file parses in :mod:`fleetcron.core.schedule_file`; field values are checked here by
the jobs service's own rules, so a job from a file obeys exactly what ``job add`` obeys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from fleetcron.app import Actor, App
from fleetcron.core.calendars import Calendar
from fleetcron.core.duplicates import Registration, duplicates_to_allow, find_duplicates
from fleetcron.core.job_options import BY_KEY, OPTIONS, check_job
from fleetcron.core.labels import format_selector, parse_selector, selector_matches
from fleetcron.core.permissions import may
from fleetcron.core.schedule_calendars import CalendarState, build_calendars, calendar_changes
from fleetcron.core.schedule_file import (
    SPEC_FIELDS,
    Defaults,
    JobChange,
    JobDecl,
    JobState,
    Plan,
    Problem,
    Rendered,
    ScheduleFile,
    ScheduleFileError,
    parse_schedule_file,
    plan_changes,
    render_schedule_file,
)
from fleetcron.core.target_zones import effective_zone
from fleetcron.errors import FleetcronError, InvalidInput
from fleetcron.services.audit import AuditNote, audited, command_excerpt, record, record_failure
from fleetcron.services.blackouts.declared import (
    FileWindows,
    plan_blackouts,
    rows_in_force,
    window_mapping,
    write_blackout_changes,
)
from fleetcron.services.calendars.declared import (
    calendar_states,
    check_declared,
    write_calendar_changes,
)
from fleetcron.services.fleet.assignments import (
    new_assignment,
    next_fire,
    refire_assignments,
    sync_bulk_membership,
)
from fleetcron.services.fleet.local_gate import require_cleared, stamp_author
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.edit import validated_job_fields as validated_fields
from fleetcron.services.jobs.version_writes import record_version
from fleetcron.services.projects.scope import place, target_reaches
from fleetcron.store.schema import Assignment, Job, Target


@dataclass(frozen=True)
class ApplyResult:
    """What an apply found to do, and whether it was done (not on a dry run or no change)."""

    source: str
    plan: Plan
    applied: bool


@dataclass(frozen=True)
class ScheduleEntry:
    """One job on one target. An individual job whose target is unpaired is listed too,
    not enabled and without a next fire, so that no declared job is invisible."""

    job: str
    origin: str
    target: str
    schedule: str
    timezone: str
    next_fire_at: datetime | None
    enabled: bool
    paired: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def job_defaults() -> Defaults:
    """The product's defaults for the keys a file may leave out (from the declaration)."""
    return Defaults(
        **{
            f.name: BY_KEY[f.name].plain(BY_KEY[f.name].default)
            for f in dataclasses.fields(Defaults)
        }
    )


# --- reading the store --------------------------------------------------------------------


def _load_jobs(session: Session, pid: int) -> dict[str, Job]:
    """The jobs of project ``pid``: all a schedule file of that project may change."""
    query = (
        select(Job)
        .where(Job.project_id == pid)
        .options(
            selectinload(Job.assignments).selectinload(Assignment.target),
            selectinload(Job.target),
        )
    )
    return {job.name: job for job in session.scalars(query.order_by(Job.name))}


def _load_targets(session: Session, pid: int) -> dict[str, Target]:
    """The targets a schedule file of project ``pid`` may name: its own, then those shared
    into it (an own target wins a name both have)."""
    query = select(Target).where(target_reaches(pid))
    rows = session.scalars(query.order_by(Target.project_id != pid, Target.name))
    found: dict[str, Target] = {}
    for target in rows:
        found.setdefault(target.name, target)
    return found


def state_of(job: Job) -> JobState:
    """A stored job as plain data."""
    bulk = job.origin == "bulk"
    assignments = job.assignments
    return JobState(
        name=job.name,
        bulk=bulk,
        target=None if bulk or job.target is None else job.target.name,
        selector=format_selector(job.selector) if bulk else "",
        disabled_on=tuple(sorted(a.target.name for a in assignments if not a.enabled))
        if bulk
        else (),
        enabled=None if bulk or not assignments else assignments[0].enabled,
        **{o.key: o.plain(getattr(job, o.name)) for o in OPTIONS},
    )


def _covered(state: JobState, targets: Mapping[str, Target]) -> frozenset[str]:
    """The targets a job registers its command on (paused or not; an individual job's
    target even while unpaired)."""
    if not state.bulk:
        return frozenset([state.target]) if state.target else frozenset()
    selector = parse_selector(state.selector)
    return frozenset(
        t.name for t in targets.values() if t.paired and selector_matches(selector, t.labels)
    )


# --- from declarations to wanted states ------------------------------------------------


def _wanted(
    app: App,
    decl: JobDecl,
    targets: Mapping[str, Target],
    problems: list[Problem],
    calendars: Mapping[str, Calendar],
) -> JobState | None:
    """The state a declaration asks for, with its values checked by the jobs service's
    rules (``calendars``: those a job may name, the file's own included); problems (each
    at its field's line) go to ``problems``."""
    before = len(problems)
    spec, timezone, selector = _checked_fields(app, decl, problems, calendars)
    if decl.bulk:
        _check_disabled_on(decl, targets, selector, problems)
        target = None
    else:
        target = _declared_target(decl, targets, problems)
    if len(problems) == before:
        try:
            check_job(
                {**spec, "timezone": timezone, "today": app.now()}
                | {"origin": "bulk" if decl.bulk else "individual"}
            )
        except InvalidInput as exc:
            key = str(exc.field)
            problems.append(decl.problem(key, exc.message.removeprefix(f"{key}: ")))
    if len(problems) > before or timezone is None:
        return None
    return JobState(
        name=decl.name,
        bulk=decl.bulk,
        target=decl.target,
        selector=format_selector(selector),
        disabled_on=tuple(sorted(set(decl.disabled_on))),
        enabled=decl.enabled if target is not None and target.paired else None,
        **{
            o.key: o.plain(spec[o.name])
            if spec[o.name] is not None or o.setting is None
            else getattr(app.settings, o.setting)
            for o in OPTIONS
        }
        | {"timezone": timezone, "allow_duplicate": decl.allow_duplicate},
    )


def _checked_fields(
    app: App, decl: JobDecl, problems: list[Problem], calendars: Mapping[str, Calendar]
) -> tuple[dict[str, Any], str | None, dict[str, str]]:
    """The declaration's fields, each checked by the jobs service's rules: the spec, the
    zone (None when it is wrong) and the selector; problems go to ``problems``."""
    spec = asdict(JobSpec(**decl.spec))

    def check(key: str, values: dict[str, Any]) -> dict[str, Any]:
        try:
            return validated_fields(app, values, calendars=calendars)
        except InvalidInput as exc:
            problems.append(decl.problem(key, exc.message.removeprefix(f"{key}: ")))
            return {}

    timezone = check("timezone", {"timezone": spec["timezone"]}).get("timezone")
    if timezone is not None:
        check("schedule", {"schedule": spec["schedule"], "timezone": timezone})
    for key, name in SPEC_FIELDS.items():
        if key not in ("schedule", "timezone"):
            spec[name] = check(key, {name: spec[name]}).get(name, spec[name])
    selector = check("selector", {"selector": decl.selector}).get("selector", {})
    return spec, timezone, selector


def _check_disabled_on(
    decl: JobDecl, targets: Mapping[str, Target], selector: dict[str, str], problems: list[Problem]
) -> None:
    """A bulk job's ``disabled_on``: targets that exist and that the job covers."""
    covered = {
        t.name for t in targets.values() if t.paired and selector_matches(selector, t.labels)
    }
    for name in decl.disabled_on:
        if name not in targets:
            problems.append(decl.problem("disabled_on", f"target {name} does not exist"))
        elif name not in covered:
            problems.append(
                decl.problem(
                    "disabled_on",
                    f"{name} would not run this job (unpaired, or not matched by the selector)",
                )
            )


def _declared_target(
    decl: JobDecl, targets: Mapping[str, Target], problems: list[Problem]
) -> Target | None:
    """An individual job's target, which must exist."""
    assert decl.target is not None
    target = targets.get(decl.target)
    if target is None:
        problems.append(
            decl.problem(
                "target",
                f"target {decl.target} does not exist (a schedule file refers to "
                "targets; add them with `fleetcron target add`)",
            )
        )
    return target


def _plan(
    session: Session, app: App, actor: Actor, parsed: ScheduleFile, *, prune: bool
) -> tuple[Plan, dict[str, Job], dict[str, Target]]:
    """The plan from the store to the file; raises :class:`ScheduleFileError` on any
    problem, duplicate registrations included."""
    pid = place(session, actor)
    jobs = _load_jobs(session, pid)
    targets = _load_targets(session, pid)
    current_calendars = calendar_states(session)
    problems = check_declared(current_calendars, parsed.calendars)
    file_calendars = [decl.state for decl in parsed.calendars]
    calendars = build_calendars(current_calendars | {c.name: c for c in file_calendars})
    wanted: list[JobState] = []
    for decl in parsed.jobs:
        state = _wanted(app, decl, targets, problems, calendars)
        if state is not None:
            wanted.append(state)
    windows, window_problems = plan_blackouts(
        session, actor, FileWindows(parsed.blackouts, parsed.names), app.now()
    )
    problems += window_problems
    if problems:
        raise ScheduleFileError(parsed.source, problems)

    plan = dataclasses.replace(
        plan_changes(wanted, (state_of(job) for job in jobs.values()), prune=prune),
        calendars=calendar_changes(file_calendars, current_calendars),
        blackouts=windows,
    )
    problems = _duplicate_problems(parsed, wanted, plan.kept, jobs, targets)
    if problems:
        raise ScheduleFileError(parsed.source, problems)
    return plan, jobs, targets


def _duplicate_problems(
    parsed: ScheduleFile,
    wanted: Sequence[JobState],
    kept: Sequence[str],
    jobs: Mapping[str, Job],
    targets: Mapping[str, Target],
) -> list[Problem]:
    """The duplicate registrations the file's jobs would make, each at the command of the
    job declared last (the one that adds it); the ``kept`` jobs still hold their targets."""
    decls = {decl.name: decl for decl in parsed.jobs}
    registrations = [
        Registration(s.name, s.command, _covered(s, targets), decls[s.name].allow_duplicate)
        for s in wanted
    ]
    registrations += [
        Registration(
            name,
            jobs[name].command,
            _covered(state_of(jobs[name]), targets),
            jobs[name].allow_duplicate,
        )
        for name in kept
    ]
    problems: list[Problem] = []
    for duplicate in find_duplicates(registrations, among=parsed.names):
        declared = [decls[name] for name in duplicate.jobs if name in decls]
        culprit = max(declared, key=lambda d: d.index)
        problems.append(
            culprit.problem("command", f"duplicate registration: {duplicate.describe()}")
        )
    return problems


# --- applying ---------------------------------------------------------------------------


def apply_schedule(
    app: App,
    actor: Actor,
    text: str,
    *,
    source: str = "schedule.yaml",
    prune: bool = False,
    dry_run: bool = False,
) -> ApplyResult:
    """Bring the jobs in the store to what the schedule file declares, in one transaction.

    Creates and changes the declared jobs; with ``prune`` deletes the jobs the file does
    not declare. With ``dry_run`` only plans. Raises :class:`ScheduleFileError` (naming
    line and field of every problem) or PermissionDenied; then nothing is written but the
    failed ``schedule.apply`` audit event (none on a dry run).
    """
    note = AuditNote("schedule.apply", detail={"source": source, "prune": prune})
    note.detail["project"] = actor.project
    try:
        actor.authorize_in("job.read")
        parsed = parse_schedule_file(text, source=source)
        with app.db.read() as session:
            plan, _, _ = _plan(session, app, actor, parsed, prune=prune)
        if dry_run or plan.empty:
            return ApplyResult(source, plan, applied=False)
        _authorize(actor, plan)
    except FleetcronError as exc:
        if not dry_run:
            record_failure(app, actor, note, exc)
        raise
    with audited(app, actor, note) as session:
        plan, jobs, targets = _plan(session, app, actor, parsed, prune=prune)
        _authorize(actor, plan)
        write_calendar_changes(session, app, actor, plan.calendars, source=source)
        _carry_out(session, app, actor, plan, jobs, targets, source=source)
        session.flush()  # the windows may cover the jobs just written
        write_blackout_changes(session, app, actor, plan.blackouts, parsed.blackouts, source=source)
        note.detail.update(
            {kind: plan.count(kind) for kind in ("create", "change", "delete")}
            | {"jobs": [change.name for change in plan.changes]}
            | {"calendars": [change.name for change in plan.calendars]}
            | {"blackouts": [change.name for change in plan.blackouts]}
        )
    return ApplyResult(source, plan, applied=True)


def _authorize(actor: Actor, plan: Plan) -> None:
    if plan.calendars:
        actor.authorize("calendar.add")
    for kind, action in (("create", "blackout.add"), ("change", "blackout.change")):
        if any(change.kind == kind for change in plan.blackouts):
            actor.authorize_in(action)
    for kind, action in (("create", "job.add"), ("change", "job.edit"), ("delete", "job.remove")):
        if plan.count(kind):
            actor.authorize_in(action)


def _carry_out(
    session: Session,
    app: App,
    actor: Actor,
    plan: Plan,
    jobs: Mapping[str, Job],
    targets: Mapping[str, Target],
    *,
    source: str,
) -> None:
    now = app.now()
    for change in plan.of("delete"):
        job = jobs[change.name]
        _audit(session, app, actor, "job.remove", job, change, source)
        session.delete(job)
    for change in plan.changes:
        if change.kind == "delete":
            continue
        assert change.after is not None
        if change.kind == "create":
            job = Job(
                name=change.name,
                project_id=place(session, actor),
                created_by=actor.name,
                created_at=now,
            )
        else:
            job = jobs[change.name]
        added, removed = _write(session, app, actor, job, change, targets, now)
        session.flush()
        if change.kind == "create" or change.changed("command", "selector", "target", "bulk"):
            require_cleared(app, job)
        record_version(session, app, actor, job, source="apply", summary=f"apply {source}")
        _audit(
            session,
            app,
            actor,
            "job.add" if change.kind == "create" else "job.edit",
            job,
            change,
            source,
            added=added,
            removed=removed,
        )


def _keep_one_target(
    session: Session, app: App, job: Job, target: Target, *, state: JobState, now: datetime
) -> tuple[int, int]:
    """An individual job's one assignment, on ``target``: others removed, its own made when
    the target is paired; returns (added, removed)."""
    added = removed = 0
    for assignment in list(job.assignments):
        if assignment.target is not target:
            job.assignments.remove(assignment)
            removed += 1
    # On an unpaired target the job waits; pairing gives it its assignment.
    if target.paired and not job.assignments:
        new_assignment(session, app, job, target, enabled=state.enabled is not False, now=now)
        added += 1
    return added, removed


def _write(
    session: Session,
    app: App,
    actor: Actor,
    job: Job,
    change: JobChange,
    targets: Mapping[str, Target],
    now: datetime,
) -> tuple[int, int]:
    """Set a job's fields and assignments to ``change.after``; returns the assignments
    (added, removed)."""
    state = change.after
    assert state is not None
    job.origin = "bulk" if state.bulk else "individual"
    for option in OPTIONS:
        setattr(job, option.name, option.stored(getattr(state, option.key)))
    job.selector = parse_selector(state.selector)
    job.updated_by, job.updated_at = actor.name, now
    if change.changed("schedule", "timezone", "dst_gap", "dst_fold"):
        refire_assignments(job.assignments, job, now, app.settings.timezone)
    session.add(job)
    job.target = None if state.bulk else targets[state.target or ""]
    if change.kind == "create" or change.changed("command", "selector", "target", "bulk"):
        stamp_author(job, actor)  # before any assignment: the local gate reads it
    if state.bulk:
        added, removed = sync_bulk_membership(session, app, job, disabled_on=state.disabled_on)
        enabled = {a.target.name: a.target.name not in state.disabled_on for a in job.assignments}
    else:
        assert state.target is not None
        added, removed = _keep_one_target(
            session, app, job, targets[state.target], state=state, now=now
        )
        enabled = {state.target: state.enabled is not False}
    for assignment in job.assignments:
        want = enabled[assignment.target.name]
        if assignment.enabled != want:
            assignment.enabled = want
            assignment.updated_at = now
            if want:
                # A paused assignment resumes at its next slot, not at the ones it skipped.
                assignment.next_fire_at = next_fire(
                    job, now, target=assignment.target, default_zone=app.settings.timezone
                )
    return added, removed


def _audit(
    session: Session,
    app: App,
    actor: Actor,
    action: str,
    job: Job,
    change: JobChange,
    source: str,
    *,
    added: int = 0,
    removed: int = 0,
) -> None:
    state = change.after or change.before
    assert state is not None
    detail: dict[str, Any] = {
        "via": "schedule.apply",
        "source": source,
        "origin": "bulk" if state.bulk else "individual",
        "schedule": state.schedule,
        "command": command_excerpt(state.command),
    }
    if change.kind == "change":
        detail["changed"] = {f.field: [_audited(f.old), _audited(f.new)] for f in change.fields}
    if change.kind == "delete":
        detail["assignments"] = len(job.assignments)
    elif state.bulk:
        detail.update({"selector": state.selector, "added": added, "removed": removed})
    target = None if state.bulk or state.target is None else job.target
    note = AuditNote(
        action,
        job_id=job.id,
        job_name=job.name,
        target_id=target.id if target is not None else None,
        target_name=target.name if target is not None else None,
        detail=detail,
    )
    record(session, app, actor, note, success=True)


def _audited(value: Any) -> Any:
    if isinstance(value, str):
        return command_excerpt(value)
    return list(value) if isinstance(value, tuple) else value


# --- export and list --------------------------------------------------------------------


def export_schedule(app: App, actor: Actor, *, header: Sequence[str] = ()) -> str:
    """The jobs in the store as a schedule file; applying it changes nothing.

    Duplicate registrations already in the store (made outside a schedule file) are
    written with ``allow_duplicate: true`` on one job of each pair and a comment naming
    the pair, so that they show in review instead of breaking the round trip.
    """
    actor.authorize_in("job.read")
    with app.db.read() as session:
        pid = place(session, actor)
        jobs = _load_jobs(session, pid)
        targets = _load_targets(session, pid)
        states = [state_of(job) for job in jobs.values()]
        calendars, windows = _install_wide(session, app, actor, pid)
    marked = duplicates_to_allow(
        find_duplicates(
            Registration(s.name, s.command, _covered(s, targets), s.allow_duplicate) for s in states
        )
    )
    rendered = [
        Rendered(
            state,
            allow_duplicate=state.allow_duplicate or state.name in marked,
            comments=tuple(
                f"duplicate registration: job {_other(d.jobs, state.name)} runs the same command "
                f"on {', '.join(d.targets)}"
                for d in marked.get(state.name, ())
            ),
        )
        for state in states
    ]
    return render_schedule_file(
        rendered, job_defaults(), header=header, calendars=calendars, blackouts=windows
    )


def _install_wide(
    session: Session, app: App, actor: Actor, pid: int
) -> tuple[list[CalendarState], list[dict[str, Any]]]:
    """The calendars and blackout windows an export carries: the calendars are
    install-wide, so only for an actor whose global role reads them; the windows are those
    of the project (``pid``) the export is of, for an actor with a role there."""
    calendars = list(calendar_states(session).values()) if may(actor, "calendar.read") else []
    if not may(actor, "blackout.read", actor.project):
        return calendars, []
    rows = rows_in_force(session, app.now(), pid).values()
    return calendars, [window_mapping(row) for row in rows]


def _other(pair: tuple[str, str], name: str) -> str:
    return pair[1] if pair[0] == name else pair[0]


def list_schedule(app: App, actor: Actor) -> list[ScheduleEntry]:
    """Every job on every target it runs on, once, by job then target."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        entries: list[ScheduleEntry] = []
        for job in _load_jobs(session, place(session, actor)).values():
            for assignment in sorted(job.assignments, key=lambda a: a.target.name):
                entries.append(
                    ScheduleEntry(
                        job=job.name,
                        origin=job.origin,
                        target=assignment.target.name,
                        schedule=job.schedule,
                        timezone=effective_zone(
                            job.timezone, assignment.target.timezone, app.settings.timezone
                        ),
                        next_fire_at=assignment.next_fire_at if assignment.enabled else None,
                        enabled=assignment.enabled,
                        paired=assignment.target.paired,
                    )
                )
            if job.origin == "individual" and not job.assignments and job.target is not None:
                entries.append(
                    ScheduleEntry(
                        job=job.name,
                        origin=job.origin,
                        target=job.target.name,
                        schedule=job.schedule,
                        timezone=job.timezone,
                        next_fire_at=None,
                        enabled=False,
                        paired=job.target.paired,
                    )
                )
        return entries


__all__ = [
    "ApplyResult",
    "ScheduleEntry",
    "apply_schedule",
    "export_schedule",
    "job_defaults",
    "list_schedule",
    "state_of",
]
