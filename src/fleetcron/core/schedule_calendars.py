"""The ``calendars:`` section of a schedule file: calendars declared next to the jobs that
name them, planned and applied in the jobs' transaction (docs/schedules-as-code.md).

One calendar, with the fields of ``fleetcron calendar add``::

    calendars:
      - name: holidays
        description: public holidays
        dates: ["2027-01-01", "2027-12-25"]
      - name: business-days
        weekdays: mon-fri
        except: holidays

Pure: shape and values are checked here (the name, each date, the weekdays, at least one
of dates and weekdays); that an ``except`` calendar exists, in the store or in the file,
and that no ``except`` chain loops, is the service's check against the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal

from yaml.nodes import Node, ScalarNode, SequenceNode

from fleetcron.core.calendars import NAME, NAME_RULE, Calendar, parse_weekdays, weekdays_text
from fleetcron.core.yaml_nodes import TAGS, Problem, Reader, kind_of, line_of
from fleetcron.errors import InvalidInput

#: Keys of one calendar, in the order export writes them (the CLI's fields).
CALENDAR_KEYS = ("name", "description", "dates", "weekdays", "except")

_DATE_TAGS = frozenset({TAGS["string"], "tag:yaml.org,2002:timestamp"})


@dataclass(frozen=True)
class CalendarState:
    """A calendar as plain data, wanted (from the file) or current (from the store):
    its dates sorted, its weekdays as ``weekdays_text`` writes them."""

    name: str
    description: str = ""
    dates: tuple[date, ...] = ()
    weekdays: str = ""
    except_name: str | None = None

    def as_calendar(self, without: Calendar | None) -> Calendar:
        days = parse_weekdays(self.weekdays) if self.weekdays else frozenset()
        return Calendar(self.name, frozenset(self.dates), days, without)


@dataclass(frozen=True)
class CalendarDecl:
    """One calendar as the file declares it, checked for shape and values."""

    index: int
    line: int
    state: CalendarState
    lines: Mapping[str, int]

    def problem(self, key: str, message: str) -> Problem:
        path = f"calendars[{self.index}]" + (f".{key}" if key else "")
        return Problem(self.lines.get(key, self.line), path, message)


@dataclass(frozen=True)
class CalendarChange:
    """Create a calendar, or change one (the fields that differ)."""

    kind: Literal["create", "change"]
    name: str
    before: CalendarState | None
    after: CalendarState
    fields: tuple[str, ...] = ()


def read_calendars(reader: Reader, node: Node) -> list[CalendarDecl]:
    """The calendars of the section that read without a problem, each name once."""
    if isinstance(node, ScalarNode) and node.tag.endswith(":null"):
        return []
    if not isinstance(node, SequenceNode):
        reader.fail(node, "calendars", f"expected a list of calendars, got {kind_of(node)}")
        return []
    out: list[CalendarDecl] = []
    first: dict[str, int] = {}
    for index, item in enumerate(node.value):
        decl = _read_calendar(reader, item, index)
        if decl is None:
            continue
        if decl.state.name in first:
            where = first[decl.state.name]
            message = f"calendar {decl.state.name} is declared twice (first on line {where})"
            reader.problems.append(decl.problem("name", message))
            continue
        first[decl.state.name] = decl.lines["name"]
        out.append(decl)
    return out


def _read_calendar(reader: Reader, node: Node, index: int) -> CalendarDecl | None:
    path = f"calendars[{index}]"
    before = len(reader.problems)
    keys = reader.mapping(node, path, CALENDAR_KEYS, "a calendar (a mapping with name, dates, ...)")
    if keys is None:
        return None
    lines = {key: line_of(value) for key, (_, value) in keys.items()}
    values: dict[str, Any] = {}
    for key in ("name", "description", "weekdays", "except"):
        if key in keys:
            values[key] = reader.scalar(keys[key][1], f"{path}.{key}", "string")
    dates = _dates(reader, keys["dates"][1], f"{path}.dates") if "dates" in keys else ()

    def fail(key: str | None, message: str) -> None:
        where = lines.get(key, line_of(node)) if key else line_of(node)
        reader.problems.append(Problem(where, f"{path}.{key}" if key else path, message))

    name = values.get("name")
    if "name" not in keys:
        fail(None, "missing required key name")
    elif name is not None and not NAME.fullmatch(name):
        fail("name", f"{name!r} is not a calendar name ({NAME_RULE})")
    if dates == () and not values.get("weekdays"):
        fail(None, "give the calendar's dates, or its weekdays (less an except calendar)")
    weekdays = _weekdays(values.get("weekdays") or "", fail)
    if len(reader.problems) > before or dates is None:
        return None
    state = CalendarState(
        name=str(name),
        description=(values.get("description") or "").strip(),
        dates=dates,
        weekdays=weekdays,
        except_name=values.get("except") or None,
    )
    return CalendarDecl(index=index, line=line_of(node), state=state, lines=lines)


def _weekdays(text: str, fail: Any) -> str:
    if not text:
        return ""
    try:
        return weekdays_text(parse_weekdays(text))
    except InvalidInput as exc:
        fail("weekdays", exc.message.removeprefix("weekdays: "))
        return ""


def _dates(reader: Reader, node: Node, path: str) -> tuple[date, ...] | None:
    """A list of ``YYYY-MM-DD`` dates (quoted or not), sorted, each once."""
    if not isinstance(node, SequenceNode):
        reader.fail(node, path, f"expected a list of dates YYYY-MM-DD, got {kind_of(node)}")
        return None
    days: set[date] = set()
    ok = True
    for i, item in enumerate(node.value):
        text = item.value if isinstance(item, ScalarNode) and item.tag in _DATE_TAGS else None
        try:
            days.add(date.fromisoformat(str(text).strip()))
        except ValueError:
            reader.fail(item, f"{path}[{i}]", f"{kind_of(item)} is not a date YYYY-MM-DD")
            ok = False
    return tuple(sorted(days)) if ok else None


def calendar_changes(
    wanted: Iterable[CalendarState], current: Mapping[str, CalendarState]
) -> tuple[CalendarChange, ...]:
    """Creates and changes, in the file's order, that bring the store to ``wanted``."""
    out: list[CalendarChange] = []
    for state in wanted:
        old = current.get(state.name)
        if old is None:
            out.append(CalendarChange("create", state.name, None, state))
            continue
        names = ("description", "dates", "weekdays", "except_name")
        diff = tuple(n for n in names if getattr(old, n) != getattr(state, n))
        if diff:
            out.append(CalendarChange("change", state.name, old, state, diff))
    return tuple(out)


def build_calendars(states: Mapping[str, CalendarState]) -> dict[str, Calendar]:
    """The calendars as the core reads them, each ``except`` resolved; a name in a loop of
    ``except`` calendars is left out (see :func:`except_loops`)."""
    built: dict[str, Calendar] = {}

    def build(name: str, seen: frozenset[str]) -> Calendar | None:
        state = states.get(name)
        if state is None or name in seen:
            return None
        if name not in built:
            without = build(state.except_name, seen | {name}) if state.except_name else None
            built[name] = state.as_calendar(without)
        return built[name]

    for name in states:
        if not except_loops(states, name):
            build(name, frozenset())
    return built


def except_loops(states: Mapping[str, CalendarState], name: str) -> bool:
    """Whether following ``except`` from ``name`` comes back to a calendar already seen."""
    seen: set[str] = set()
    current: str | None = name
    while current is not None and current in states:
        if current in seen:
            return True
        seen.add(current)
        current = states[current].except_name
    return False


def calendar_mapping(state: CalendarState) -> dict[str, Any]:
    """A calendar as the file writes it (the keys it needs, in :data:`CALENDAR_KEYS` order)."""
    out: dict[str, Any] = {"name": state.name}
    if state.description:
        out["description"] = state.description
    if state.dates or not state.weekdays:
        out["dates"] = [d.isoformat() for d in state.dates]
    if state.weekdays:
        out["weekdays"] = state.weekdays
    if state.except_name:
        out["except"] = state.except_name
    return out


__all__ = [
    "CALENDAR_KEYS",
    "CalendarChange",
    "CalendarDecl",
    "CalendarState",
    "build_calendars",
    "calendar_changes",
    "calendar_mapping",
    "except_loops",
    "read_calendars",
]
