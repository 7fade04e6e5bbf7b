"""Calendars: add (dates listed by hand, a weekly base less another calendar), import (an
iCalendar file), list, show, remove.

Adding, importing and removing need the operator role and are audited; reading needs a
viewer. Importing into an existing calendar replaces its dates in one transaction (with
``replace``; otherwise the name in use is refused). A calendar a job names, or another
calendar's ``except``, cannot be removed (the error names them). Nothing is saved when any
field is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime
from typing import Any, Final

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from fleetcron.app import Actor, App
from fleetcron.core.calendars import (
    NAME,
    NAME_RULE,
    DateRule,
    calendar_reference,
    parse_reference,
    parse_weekdays,
    rule_of,
    weekdays_text,
)
from fleetcron.core.ics import parse_ics
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.audit import AuditNote, audited
from fleetcron.store.calendar_sets import load_calendars
from fleetcron.store.schema import CalendarDate, CalendarRow, Job

DESCRIPTION_MAX: Final = 500
#: The most dates a calendar listed by hand holds.
DATES_MAX: Final = 20_000


@dataclass(frozen=True)
class CalendarSpec:
    """A calendar by hand: ``dates`` (``YYYY-MM-DD``), and/or ``weekdays`` (``mon-fri``)
    less the dates of the ``except_name`` calendar."""

    name: str
    description: str = ""
    dates: Sequence[str] = ()
    weekdays: str = ""
    except_name: str | None = None


@dataclass(frozen=True)
class CalendarView:
    id: int
    name: str
    description: str
    source: str
    weekdays: str
    except_name: str | None
    count: int
    first: date | None
    last: date | None
    used_by: list[str]
    created_by: str
    updated_at: datetime
    dates: list[date]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_calendar(app: App, actor: Actor, spec: CalendarSpec) -> CalendarView:
    """Create a calendar by hand. Raises InvalidInput naming the field (name, dates,
    weekdays, except) or a name in use, saving nothing."""
    note = AuditNote("calendar.add", detail={"calendar": spec.name, "source": "hand"})
    with audited(app, actor, note) as session:
        actor.authorize("calendar.add")
        _new_name(session, spec.name)
        if not spec.dates and not spec.weekdays:
            raise InvalidInput(
                "dates: give the calendar's dates, or its weekdays (less an except calendar)",
                field="dates",
                allowed="--date YYYY-MM-DD (repeatable) and/or --weekdays mon-fri",
            )
        days = _dates(spec.dates)
        weekdays = weekdays_text(parse_weekdays(spec.weekdays)) if spec.weekdays else ""
        if (
            spec.except_name is not None
            and session.scalar(select(CalendarRow.id).where(CalendarRow.name == spec.except_name))
            is None
        ):
            raise InvalidInput(
                f"except: there is no calendar {spec.except_name!r} (add or import it first)",
                field="except",
                value=spec.except_name,
                allowed="an existing calendar's name",
            )
        row = _row(app, actor, spec.name, spec.description, "hand")
        row.weekdays, row.except_name = weekdays, spec.except_name
        session.add(row)
        session.flush()
        _write_dates(session, row.id, days)
        note.detail["dates"] = len(days)
        return _view(session, row)


def import_calendar(
    app: App, actor: Actor, name: str, data: bytes, *, description: str = "", replace: bool = False
) -> CalendarView:
    """A calendar of the dates an iCalendar file's events cover (``core/ics.py``); with
    ``replace``, an existing calendar's dates are replaced. InvalidInput (field ``file``)
    for a file that does not parse, saving nothing."""
    note = AuditNote("calendar.import", detail={"calendar": name, "replace": replace})
    with audited(app, actor, note) as session:
        actor.authorize("calendar.add")
        days = parse_ics(data)
        row = session.scalar(select(CalendarRow).where(CalendarRow.name == name))
        if row is None or not replace:
            _new_name(session, name)
            row = _row(app, actor, name, description, "ics")
            session.add(row)
            session.flush()
        else:
            session.execute(delete(CalendarDate).where(CalendarDate.calendar_id == row.id))
            row.updated_by, row.updated_at = actor.name, app.now()
            row.description = _description(description) or row.description
            row.source = "ics"
        _write_dates(session, row.id, days)
        note.detail["dates"] = len(days)
        return _view(session, row)


def list_calendars(app: App, actor: Actor) -> list[CalendarView]:
    actor.authorize("calendar.read")
    with app.db.read() as session:
        rows = session.scalars(select(CalendarRow).order_by(CalendarRow.name))
        return [_view(session, row, with_dates=False) for row in rows]


def show_calendar(app: App, actor: Actor, name: str) -> CalendarView:
    actor.authorize("calendar.read")
    with app.db.read() as session:
        return _view(session, _existing(session, name, field_name="calendar"))


def date_rule(app: App, actor: Actor, run_only_on: str, never_on: str) -> DateRule | None:
    """The filter these two job options would put on a schedule (``cron next`` previews
    it); InvalidInput naming the option for an unknown calendar."""
    actor.authorize("calendar.read")
    with app.db.read() as session:
        calendars = load_calendars(session)
    return rule_of(
        calendar_reference(run_only_on, field_name="run_only_on"),
        calendar_reference(never_on, field_name="never_on"),
        calendars,
    )


def remove_calendar(app: App, actor: Actor, name: str) -> None:
    """Remove a calendar no job and no other calendar names; InvalidInput naming them."""
    note = AuditNote("calendar.remove", detail={"calendar": name})
    with audited(app, actor, note) as session:
        actor.authorize("calendar.remove")
        row = _existing(session, name, field_name="calendar")
        users = _used_by(session, name)
        if users:
            raise InvalidInput(
                f"calendar: {name!r} is still used by {', '.join(users)}; change those first",
                field="calendar",
                value=name,
                allowed="a calendar no job or calendar names",
            )
        session.delete(row)


# -- helpers -----------------------------------------------------------------------------


def _row(app: App, actor: Actor, name: str, description: str, source: str) -> CalendarRow:
    now = app.now()
    return CalendarRow(
        name=name,
        description=_description(description),
        weekdays="",
        source=source,
        created_by=actor.name,
        created_at=now,
        updated_by=actor.name,
        updated_at=now,
    )


def _description(text: str) -> str:
    text = text.strip()
    if len(text) > DESCRIPTION_MAX:
        raise InvalidInput(
            f"description: {len(text)} characters; at most {DESCRIPTION_MAX}",
            field="description",
            value=len(text),
            allowed=f"at most {DESCRIPTION_MAX} characters",
        )
    return text


def _new_name(session: Session, name: str) -> None:
    if not NAME.fullmatch(name):
        raise InvalidInput(
            f"name: {name!r} is not a calendar name ({NAME_RULE})",
            field="name",
            value=name,
            allowed=NAME_RULE,
        )
    if session.scalar(select(CalendarRow.id).where(CalendarRow.name == name)) is not None:
        raise InvalidInput(
            f"name: a calendar {name!r} exists; remove it first, or import with --replace",
            field="name",
            value=name,
            allowed="a name no calendar has",
        )


def _existing(session: Session, name: str, *, field_name: str) -> CalendarRow:
    row = session.scalar(select(CalendarRow).where(CalendarRow.name == name))
    if row is None:
        raise NotFound("calendar", name, field=field_name)
    return row


def _dates(texts: Sequence[str]) -> frozenset[date]:
    if len(texts) > DATES_MAX:
        raise InvalidInput(
            f"dates: {len(texts)} dates; at most {DATES_MAX}",
            field="dates",
            value=len(texts),
            allowed=f"at most {DATES_MAX}",
        )
    days: set[date] = set()
    for text in texts:
        try:
            days.add(date.fromisoformat(text.strip()))
        except ValueError:
            raise InvalidInput(
                f"dates: {text!r} is not a date YYYY-MM-DD",
                field="dates",
                value=text,
                allowed="YYYY-MM-DD",
            ) from None
    return frozenset(days)


def _write_dates(session: Session, calendar_id: int, days: frozenset[date]) -> None:
    session.add_all(CalendarDate(calendar_id=calendar_id, day=day) for day in sorted(days))


def _used_by(session: Session, name: str) -> list[str]:
    """The jobs and calendars that name ``name``."""
    pattern = f"{name}:%"
    jobs = session.execute(
        select(Job.name, Job.run_only_on, Job.never_on).where(
            or_(
                Job.run_only_on == name,
                Job.run_only_on.like(pattern),
                Job.never_on == name,
            )
        )
    )
    users = [
        f"job {job}"
        for job, only, never in jobs
        if name in (parse_reference(only, field_name="run_only_on")[0] if only else "", never)
    ]
    calendars = session.scalars(select(CalendarRow.name).where(CalendarRow.except_name == name))
    return users + [f"calendar {other} (its except)" for other in calendars]


def _view(session: Session, row: CalendarRow, *, with_dates: bool = True) -> CalendarView:
    stats = session.execute(
        select(func.count(), func.min(CalendarDate.day), func.max(CalendarDate.day)).where(
            CalendarDate.calendar_id == row.id
        )
    ).one()
    dates: list[date] = []
    if with_dates:
        query = select(CalendarDate.day).where(CalendarDate.calendar_id == row.id)
        dates = list(session.scalars(query.order_by(CalendarDate.day)))
    return CalendarView(
        id=row.id,
        name=row.name,
        description=row.description,
        source=row.source,
        weekdays=row.weekdays,
        except_name=row.except_name,
        count=int(stats[0] or 0),
        first=stats[1],
        last=stats[2],
        used_by=_used_by(session, row.name),
        created_by=row.created_by,
        updated_at=row.updated_at,
        dates=dates,
    )


__all__ = [
    "CalendarSpec",
    "CalendarView",
    "add_calendar",
    "date_rule",
    "import_calendar",
    "list_calendars",
    "remove_calendar",
    "show_calendar",
]
