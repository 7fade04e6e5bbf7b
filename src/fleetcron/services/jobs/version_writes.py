"""Writing a job's versions: :func:`record_version` is called inside the transaction that
changes a job (add, edit, ``apply``, revert), so a change and its version commit together
or not at all. It compares the job's definition with its newest version and writes a new
one only when they differ: enabling or disabling a job on its targets, a maintenance pause
or a run is state, not definition, and is in the audit log instead.

Where a change came from (``cli``, ``api``, ``web``, ``apply``) is set once per adapter
with :func:`change_source` (the web application sets it per request), so the operations
in ``services/jobs/edit.py`` need no extra argument. Reading, comparing and reverting versions
is :mod:`fleetcron.services.jobs.versions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.versions import changed_fields, diff_definitions, summarize
from fleetcron.services.audit import AuditNote
from fleetcron.store.schema import Job, JobVersion

SOURCES = ("cli", "api", "web", "apply", "migration")

#: Job columns that are not part of its definition (identity and bookkeeping).
NOT_DEFINITION = frozenset(
    {
        "id",
        "target_id",
        "version",
        "created_by",
        "updated_by",
        "created_at",
        "updated_at",
        "command_by",
        "command_role",
    }
)

_SOURCE: ContextVar[str] = ContextVar("fleetcron_change_source", default="cli")
_REVERTING: ContextVar[int | None] = ContextVar("fleetcron_reverting_to", default=None)


@contextmanager
def change_source(source: str) -> Iterator[None]:
    """Job changes made inside this block are recorded as coming from ``source``."""
    if source not in SOURCES:
        raise ValueError(f"unknown change source {source!r}")
    token = _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(token)


@contextmanager
def reverting_to(version: int) -> Iterator[None]:
    """The job change made inside this block gives the job its version ``version`` again:
    its version's summary and its audit event say so."""
    token = _REVERTING.set(version)
    try:
        yield
    finally:
        _REVERTING.reset(token)


def current_source() -> str:
    return _SOURCE.get()


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    return value


def definition_of(job: Job) -> dict[str, Any]:
    """The job's definition: every column of ``jobs`` that says what the job does (new
    options are included without a change here), and its target by name."""
    values = {
        column.key: _plain(getattr(job, column.key))
        for column in Job.__table__.columns
        if column.key not in NOT_DEFINITION
    }
    values["target"] = job.target.name if job.target is not None else None
    return values


def _newest_version(session: Session, job: Job) -> JobVersion | None:
    """The job's newest version (of this job: ids are reused after a removal on SQLite,
    so the creation time is part of its key)."""
    return session.scalar(
        select(JobVersion)
        .where(JobVersion.job_id == job.id, JobVersion.job_created_at == job.created_at)
        .order_by(JobVersion.version.desc())
        .limit(1)
    )


def _summary(
    before: dict[str, Any], definition: dict[str, Any], *, first: bool, reverting: int | None
) -> str:
    """What a new version says of itself when the caller gives no summary."""
    if first:
        return "created"
    if reverting is not None:
        return f"revert to version {reverting}"
    return summarize(diff_definitions(before, definition))


def record_version(
    session: Session,
    app: App,
    actor: Actor,
    job: Job,
    note: AuditNote | None = None,
    *,
    source: str | None = None,
    summary: str | None = None,
) -> int | None:
    """Write the job's definition as its next version if it differs from the newest one;
    returns the new version number, or None when the definition did not change. Adds
    ``version`` (and, for a revert, ``reverted_to``) to the audit ``note``."""
    session.flush()
    definition = definition_of(job)
    previous = _newest_version(session, job)
    before = previous.definition if previous is not None else {}
    changed = changed_fields(before, definition)
    if previous is not None and not changed:
        return None
    number = (previous.version if previous is not None else 0) + 1
    reverting = _REVERTING.get()
    if summary is None:
        summary = _summary(before, definition, first=previous is None, reverting=reverting)
    session.add(
        JobVersion(
            job_id=job.id,
            job_created_at=job.created_at,
            job_name=job.name,
            version=number,
            definition=definition,
            changed=changed,
            source=source or current_source(),
            actor=actor.name,
            at=app.now(),
            summary=summary,
        )
    )
    job.version = number
    if note is not None:
        note.detail["version"] = number
        if reverting is not None:
            note.action = "job.revert"
            note.detail["reverted_to"] = reverting
    return number
