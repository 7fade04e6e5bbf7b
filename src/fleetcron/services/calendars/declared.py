"""Calendars declared in a schedule file (``core/schedule_calendars.py``): the store's
calendars as plain states, the checks that need the store (an ``except`` calendar exists,
in the store or in the file; no ``except`` chain loops), and the writes, in the apply's
own transaction, audited as ``calendar.add`` (a new calendar) and ``calendar.change``
(the dates, weekdays, ``except`` or description of one the file changes), with the
``calendar.add`` permission the CLI's add and import need."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.schedule_calendars import (
    CalendarChange,
    CalendarDecl,
    CalendarState,
    except_loops,
)
from fleetcron.core.yaml_nodes import Problem
from fleetcron.services.audit import AuditNote, record
from fleetcron.store.schema import CalendarDate, CalendarRow


def calendar_states(session: Session) -> dict[str, CalendarState]:
    """Every calendar in the store as plain data, by name."""
    rows = list(session.scalars(select(CalendarRow).order_by(CalendarRow.name)))
    days: dict[int, list[date]] = defaultdict(list)
    for calendar_id, day in session.execute(select(CalendarDate.calendar_id, CalendarDate.day)):
        days[calendar_id].append(day)
    return {
        row.name: CalendarState(
            name=row.name,
            description=row.description,
            dates=tuple(sorted(days[row.id])),
            weekdays=row.weekdays,
            except_name=row.except_name,
        )
        for row in rows
    }


def check_declared(
    current: Mapping[str, CalendarState], decls: Sequence[CalendarDecl]
) -> list[Problem]:
    """The problems of the declared calendars against the store: an ``except`` naming no
    calendar, and ``except`` chains that loop (each at the ``except`` line)."""
    merged = {**current, **{d.state.name: d.state for d in decls}}
    problems: list[Problem] = []
    for decl in decls:
        other = decl.state.except_name
        if other is None:
            continue
        if other not in merged:
            known = ", ".join(sorted(merged)) or "none"
            problems.append(
                decl.problem("except", f"there is no calendar {other!r} (known: {known})")
            )
        elif except_loops(merged, decl.state.name):
            problems.append(
                decl.problem("except", f"{other!r} leads back to {decl.state.name!r}: a loop")
            )
    return problems


def write_calendar_changes(
    session: Session, app: App, actor: Actor, changes: Sequence[CalendarChange], *, source: str
) -> None:
    """Create and change the calendars in the caller's transaction, each audited."""
    now = app.now()
    rows = {row.name: row for row in session.scalars(select(CalendarRow))}
    for change in changes:
        state = change.after
        row = rows.get(change.name)
        if row is None:
            row = CalendarRow(name=state.name, created_by=actor.name, created_at=now)
            session.add(row)
        row.description, row.weekdays = state.description, state.weekdays
        row.except_name, row.source = state.except_name, "hand"
        row.updated_by, row.updated_at = actor.name, now
        session.flush()
        session.execute(delete(CalendarDate).where(CalendarDate.calendar_id == row.id))
        session.add_all(CalendarDate(calendar_id=row.id, day=day) for day in state.dates)
        detail: dict[str, object] = {
            "calendar": state.name,
            "source": "hand",
            "via": "schedule.apply",
            "file": source,
            "dates": len(state.dates),
        }
        if change.kind == "change":
            detail["changed"] = list(change.fields)
        action = "calendar.add" if change.kind == "create" else "calendar.change"
        record(session, app, actor, AuditNote(action, detail=detail), success=True)
    session.flush()


__all__ = ["calendar_states", "check_declared", "write_calendar_changes"]
