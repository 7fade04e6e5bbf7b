"""Calendars as the core reads them (:class:`~fleetcron.core.calendars.Calendar`), and the
filtered schedule of an assignment whose job names calendars."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import date
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcron.core.calendars import Calendar, CalendarSchedule, parse_weekdays, rule_of
from fleetcron.core.target_zones import assignment_schedule, dst_policy
from fleetcron.cron import CronSchedule
from fleetcron.store.schema import CalendarDate, CalendarRow

#: ``except`` chains are followed at most this deep (the service refuses cycles).
MAX_DEPTH = 8


def load_calendars(session: Session) -> dict[str, Calendar]:
    """Every calendar, by name, with its ``except`` calendar resolved."""
    rows = {row.name: row for row in session.scalars(select(CalendarRow))}
    if not rows:
        return {}
    days: dict[int, set[date]] = defaultdict(set)
    for calendar_id, day in session.execute(select(CalendarDate.calendar_id, CalendarDate.day)):
        days[calendar_id].add(day)
    built: dict[str, Calendar] = {}

    def build(name: str, depth: int) -> Calendar | None:
        row = rows.get(name)
        if row is None or depth > MAX_DEPTH:
            return None
        if name not in built:
            without = build(row.except_name, depth + 1) if row.except_name else None
            built[name] = Calendar(
                name,
                frozenset(days[row.id]),
                parse_weekdays(row.weekdays) if row.weekdays else frozenset(),
                without,
            )
        return built[name]

    for name in rows:
        build(name, 0)
    return built


def filtered_schedule(
    row: Any, default_zone: str, calendars: Mapping[str, Calendar]
) -> CronSchedule | CalendarSchedule:
    """The schedule of an assignment (``row`` has the job's ``schedule``, ``timezone``,
    DST choices, ``run_only_on`` and ``never_on`` and the target's ``target_timezone``),
    with its calendars' filter when the job names any."""
    schedule = assignment_schedule(
        row.schedule,
        row.timezone,
        row.target_timezone,
        default_zone,
        dst_policy(row.dst_gap, row.dst_fold),
    )
    rule = rule_of(row.run_only_on or "", row.never_on or "", calendars)
    return schedule if rule is None else CalendarSchedule(schedule, rule)
