"""Versions of a job's definition: listed, compared, reverted. They are written with
every change of the job, in its transaction, by
:mod:`fleetcron.services.jobs.version_writes`; a revert is a job edit
(:func:`fleetcron.services.jobs.edit.edit_job`) to an older version's values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.labels import format_selector
from fleetcron.core.permissions import visible_projects
from fleetcron.core.versions import FieldChange, diff_definitions
from fleetcron.errors import FleetcronError, InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, record_failure
from fleetcron.services.jobs.edit import EDITABLE, edit_job
from fleetcron.services.jobs.version_writes import definition_of, reverting_to
from fleetcron.services.projects.scope import place
from fleetcron.store.schema import Job, JobVersion

# --- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionView:
    job_id: int
    job_name: str
    version: int
    at: datetime
    actor: str
    source: str
    changed: list[str]
    summary: str
    current: bool
    definition: dict[str, Any]

    def as_dict(self, *, with_definition: bool = True) -> dict[str, Any]:
        out = {
            "job": self.job_name,
            "version": self.version,
            "at": self.at.isoformat(),
            "actor": self.actor,
            "source": self.source,
            "changed": self.changed,
            "summary": self.summary,
            "current": self.current,
        }
        if with_definition:
            out["definition"] = self.definition
        return out


@dataclass(frozen=True)
class _Identity:
    """Which job's history: its id and creation time (SQLite may reuse the id of a removed
    job), and its current version (None for a removed job)."""

    job_id: int
    created_at: datetime
    current: int | None

    def where(self) -> tuple[Any, Any]:
        return (JobVersion.job_id == self.job_id, JobVersion.job_created_at == self.created_at)


def _identity(session: Session, actor: Actor, name: str) -> _Identity:
    """Job ``name`` of the project ``actor`` acts in; a removed job's history is found by
    its name (the newest removed job of that name), with no current version, by a global
    role only (as a removed job's runs)."""
    row = session.execute(
        select(Job.id, Job.created_at, Job.version).where(
            Job.name == name, Job.project_id == place(session, actor)
        )
    ).first()
    if row is not None:
        return _Identity(row[0], row[1], row[2])
    if visible_projects(actor) is not None:  # a removed job's project is not kept
        raise NotFound("job", name)
    # a removed job's only: a live job of that name is another project's
    live = select(Job.id).where(
        Job.id == JobVersion.job_id, Job.created_at == JobVersion.job_created_at
    )
    removed = session.execute(
        select(JobVersion.job_id, JobVersion.job_created_at)
        .where(JobVersion.job_name == name, ~exists(live))
        .order_by(JobVersion.at.desc(), JobVersion.id.desc())
        .limit(1)
    ).first()
    if removed is None:
        raise NotFound("job", name)
    return _Identity(removed[0], removed[1], None)


def _view(row: JobVersion, current: int | None) -> VersionView:
    return VersionView(
        job_id=row.job_id,
        job_name=row.job_name,
        version=row.version,
        at=row.at,
        actor=row.actor,
        source=row.source,
        changed=list(row.changed),
        summary=row.summary,
        current=row.version == current,
        definition=dict(row.definition),
    )


def list_versions(app: App, actor: Actor, name: str, *, limit: int = 200) -> list[VersionView]:
    """The versions of job ``name``, newest first."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        job = _identity(session, actor, name)
        rows = session.scalars(
            select(JobVersion).where(*job.where()).order_by(JobVersion.version.desc()).limit(limit)
        )
        return [_view(row, job.current) for row in rows]


def _version(
    session: Session, actor: Actor, name: str, version: int, *, field: str = "version"
) -> JobVersion:
    job = _identity(session, actor, name)
    row = session.scalar(select(JobVersion).where(*job.where(), JobVersion.version == version))
    if row is None:
        newest = session.scalar(select(func.max(JobVersion.version)).where(*job.where()))
        allowed = f"1 to {newest}" if newest else "none: the job has no versions"
        raise InvalidInput(
            f"{field}: job {name} has no version {version} (it has {allowed})",
            field=field,
            value=version,
            allowed=allowed,
        )
    return row


def get_version(app: App, actor: Actor, name: str, version: int) -> VersionView:
    actor.authorize_in("job.read")
    with app.db.read() as session:
        return _view(
            _version(session, actor, name, version), _identity(session, actor, name).current
        )


def diff_versions(
    app: App, actor: Actor, name: str, old: int, new: int | None = None
) -> list[FieldChange]:
    """What changed from version ``old`` to version ``new`` (default: the current one)."""
    actor.authorize_in("job.read")
    with app.db.read() as session:
        current = _identity(session, actor, name).current
        after = new if new is not None else current
        if after is None:
            raise InvalidInput(
                f"job {name} was removed: name both versions",
                field="v2",
                value=None,
                allowed="a version number",
            )
        before_row = _version(session, actor, name, old, field="v1")
        after_row = _version(session, actor, name, after, field="v2")
        return diff_definitions(before_row.definition, after_row.definition)


#: Definition fields a revert cannot set through a job edit (they make another job).
_NOT_REVERTIBLE = ("name", "origin", "target")


def revert_job(app: App, actor: Actor, name: str, to: int) -> tuple[int, list[FieldChange]]:
    """Give job ``name`` the definition of its version ``to`` again, as a new version, in
    one audited transaction (the edit's); returns the new version and what changed."""
    note = AuditNote("job.revert", job_name=name, detail={"reverted_to": to})
    try:
        actor.authorize_in("job.revert")
        with app.db.read() as session:
            target = _version(session, actor, name, to, field="to")
            job = _identity(session, actor, name)
            if job.current is None:
                raise NotFound("job", name)
            note.job_id = job.job_id
            now = session.get_one(Job, job.job_id)
            changes = diff_definitions(definition_of(now), target.definition)
        edits = _revert_edits(name, to, changes, target.definition)
    except FleetcronError as exc:
        record_failure(app, actor, note, exc)
        raise
    with reverting_to(to):
        edit_job(app, actor, name, **edits)
    with app.db.read() as session:
        version = _identity(session, actor, name).current
    assert version is not None
    return version, changes


def _revert_edits(
    name: str, to: int, changes: list[FieldChange], definition: dict[str, Any]
) -> dict[str, Any]:
    """The job edit that brings back version ``to``'s ``definition``: refused when nothing
    differs or when a field differs that an edit cannot set."""
    if not changes:
        raise InvalidInput(
            f"job {name} already has the definition of version {to}",
            field="to",
            value=to,
            allowed="a version whose definition differs from the current one",
        )
    fixed = [c.field for c in changes if c.field in _NOT_REVERTIBLE]
    if fixed:
        raise InvalidInput(
            f"version {to} of job {name} differs in {', '.join(fixed)}, which a revert "
            "cannot change (remove and add the job, or apply a schedule file)",
            field="to",
            value=to,
            allowed="a version with the same name, kind and target",
        )
    edits: dict[str, Any] = {}
    for change in changes:
        if change.field not in definition:
            # An option added after version ``to`` was written: it keeps its value.
            continue
        if change.field not in EDITABLE:
            raise InvalidInput(
                f"version {to} of job {name} differs in {change.field}, "
                "which a job edit cannot set",
                field="to",
                value=to,
                allowed=f"a version that differs only in {', '.join(EDITABLE)}",
            )
        value = change.new
        if change.field == "selector":
            value = format_selector(value or {})
        edits[change.field] = value
    return edits
