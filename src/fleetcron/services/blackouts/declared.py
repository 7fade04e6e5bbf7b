"""Blackout windows declared in a schedule file (``core/schedule_blackouts.py``): planned
with the blackouts service's own checks (a window may cover a job the same file declares),
written in the apply's transaction after the jobs, and audited as ``blackout.add`` and
``blackout.change`` are from the CLI. A window is known by its name among those in force."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.schedule_blackouts import BlackoutChange, BlackoutDecl, duration_text
from fleetcron.core.yaml_nodes import Problem
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.audit import record
from fleetcron.services.blackouts.windows import BlackoutSpec, _fill, _note
from fleetcron.services.projects.scope import place
from fleetcron.store.run_writes import release_deferred
from fleetcron.store.schema import Blackout

#: The columns that make a window what it is, compared by a plan.
_COMPARED = (
    "reason",
    "zone",
    "job_name",
    "target_name",
    "selector",
    "kind",
    "start_wall",
    "end_wall",
    "cron",
    "duration_s",
    "until",
)


@dataclass(frozen=True)
class FileWindows:
    """The windows a file declares, and the jobs it declares (taken as existing while
    planning, before the apply writes them)."""

    decls: Sequence[BlackoutDecl]
    jobs: frozenset[str]


def rows_in_force(session: Session, now: datetime, project_id: int) -> dict[str, Blackout]:
    """The windows in force of project ``project_id``, by name."""
    query = select(Blackout).where(
        Blackout.project_id == project_id,
        Blackout.lifted_at.is_(None),
        or_(Blackout.expires_at.is_(None), Blackout.expires_at > now),
    )
    return {row.name: row for row in session.scalars(query.order_by(Blackout.id))}


def spec_of(decl: BlackoutDecl) -> BlackoutSpec:
    return BlackoutSpec(**dict(decl.fields))


def plan_blackouts(
    session: Session, actor: Actor, declared: FileWindows, now: datetime
) -> tuple[tuple[BlackoutChange, ...], list[Problem]]:
    """The creates and changes that bring the windows in force to the file; each refused
    field is a problem at its line (nothing is written: rows are checked detached)."""
    pid = place(session, actor)
    current = rows_in_force(session, now, pid)
    changes: list[BlackoutChange] = []
    problems: list[Problem] = []
    for decl in declared.decls:
        old = current.get(decl.name)
        checked = Blackout(id=old.id if old is not None else None, project_id=pid)  # never added
        try:
            _fill(session, checked, spec_of(decl), now, actor, known_jobs=declared.jobs)
        except (InvalidInput, NotFound) as exc:
            key = exc.field or ""
            problems.append(decl.problem(key, str(exc).removeprefix(f"{key}: ")))
            continue
        if old is None:
            changes.append(BlackoutChange("create", decl.name, None))
            continue
        diff = tuple(c for c in _COMPARED if getattr(old, c) != getattr(checked, c))
        if diff:
            changes.append(BlackoutChange("change", decl.name, old.id, diff))
    return tuple(changes), problems


def write_blackout_changes(
    session: Session,
    app: App,
    actor: Actor,
    changes: Sequence[BlackoutChange],
    decls: Sequence[BlackoutDecl],
    *,
    source: str,
) -> None:
    """Create and change the windows in the caller's transaction (after its jobs), each
    audited; a changed window's deferred runs are looked at again."""
    now = app.now()
    by_name = {decl.name: decl for decl in decls}
    for change in changes:
        spec = spec_of(by_name[change.name])
        if change.blackout_id is None:
            row = Blackout(created_by=actor.name, created_at=now)
            _fill(session, row, spec, now, actor)
            session.add(row)
            session.flush()
            note = _note("blackout.add", spec)
        else:
            row = session.get_one(Blackout, change.blackout_id)
            _fill(session, row, spec, now, actor)
            session.flush()
            release_deferred(session, now)
            note = _note("blackout.change", spec, row.id)
            note.detail["changed"] = list(change.fields)
        note.detail.update({"blackout": row.id, "via": "schedule.apply", "source": source})
        record(session, app, actor, note, success=True)


def window_mapping(row: Blackout) -> dict[str, Any]:
    """A window in force as the file writes it (the keys it needs)."""
    out: dict[str, Any] = {"name": row.name, "reason": row.reason}
    for key, value in (("job", row.job_name), ("target", row.target_name)):
        if value is not None:
            out[key] = value
    if row.selector:
        out["selector"] = row.selector
    out["zone"] = row.zone
    if row.kind == "once":
        out["start"] = (row.start_wall or "").replace("T", " ")[:16]
        out["end"] = (row.end_wall or "").replace("T", " ")[:16]
    else:
        out["cron"] = row.cron
        out["duration"] = duration_text(row.duration_s or 0)
        if row.until is not None:
            out["until"] = row.until.isoformat()
    return out


__all__ = [
    "FileWindows",
    "plan_blackouts",
    "rows_in_force",
    "window_mapping",
    "write_blackout_changes",
]
