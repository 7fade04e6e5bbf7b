"""Property tests: generated expressions parse, every fire time matches, and arbitrary text
only ever raises CronError. The checker below is deliberately slow and independent."""

from __future__ import annotations

import calendar
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.cron import parse
from fleetcron.errors import CronError

BOUNDS = {"minute": (0, 59), "hour": (0, 23), "dom": (1, 31), "month": (1, 12), "dow": (0, 7)}


@dataclass(frozen=True)
class Expr:
    """A generated expression: the text and, per field, the allowed values."""

    text: str
    values: dict[str, frozenset[int]]
    dom_star: bool
    dow_star: bool


@st.composite
def field(draw: st.DrawFn, name: str) -> tuple[str, frozenset[int]]:
    low, high = BOUNDS[name]
    items = []
    values: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["star", "value", "range", "star-step", "range-step"]))
        if kind.startswith("star"):
            step = draw(st.integers(1, high - low + 1)) if kind == "star-step" else 1
            items.append("*" if step == 1 and kind == "star" else f"*/{step}")
            values.update(range(low, high + 1, step))
        elif kind == "value":
            value = draw(st.integers(low, high))
            items.append(str(value))
            values.add(value)
        else:
            a = draw(st.integers(low, high))
            b = draw(st.integers(a, high))
            step = draw(st.integers(1, high - low + 1)) if kind == "range-step" else 1
            items.append(f"{a}-{b}" + (f"/{step}" if kind == "range-step" else ""))
            values.update(range(a, b + 1, step))
    if name == "dow" and 7 in values:
        values = (values - {7}) | {0}
    return ",".join(items), frozenset(values)


@st.composite
def expressions(draw: st.DrawFn) -> Expr:
    parts = {name: draw(field(name)) for name in BOUNDS}
    text = " ".join(parts[name][0] for name in BOUNDS)
    return Expr(
        text,
        {name: parts[name][1] for name in BOUNDS},
        parts["dom"][0].startswith("*"),
        parts["dow"][0].startswith("*"),
    )


def matches(expr: Expr, wall: datetime) -> bool:
    """Slow, direct reading of cron's rules for one wall-clock time."""
    v = expr.values
    if wall.minute not in v["minute"] or wall.hour not in v["hour"]:
        return False
    if wall.month not in v["month"]:
        return False
    dom_ok = wall.day in v["dom"]
    dow_ok = (wall.isoweekday() % 7) in v["dow"]
    if expr.dom_star or expr.dow_star:
        return dom_ok and dow_ok
    return dom_ok or dow_ok


def can_fire(expr: Expr) -> bool:
    for month in expr.values["month"]:
        longest = 29 if month == 2 else calendar.monthrange(2001, month)[1]
        if any(day <= longest for day in expr.values["dom"]):
            return True
        if not (expr.dom_star or expr.dow_star):
            return True  # any day-of-week alone matches some day
    return False


starts = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1))


@settings(max_examples=200, deadline=None)
@given(expressions(), starts)
def test_every_fire_time_matches_and_they_strictly_increase_in_utc(
    expr: Expr, start: datetime
) -> None:
    if not can_fire(expr):
        try:
            parse(expr.text)
        except CronError as error:
            assert "never fire" in error.message
            return
        raise AssertionError(f"{expr.text} should have been rejected")
    schedule = parse(expr.text)
    moment = start.replace(tzinfo=UTC)
    fires = list(itertools.islice(schedule.iter_after(moment), 20))
    assert fires[0] > moment
    for fire in fires:
        assert matches(expr, fire), fire
        assert fire.second == 0 and fire.microsecond == 0
    assert all(a < b for a, b in itertools.pairwise(fires))


@settings(max_examples=200, deadline=None)
@given(expressions(), starts)
def test_nothing_matches_between_a_start_and_its_next_fire(expr: Expr, start: datetime) -> None:
    if not can_fire(expr):
        return
    schedule = parse(expr.text)
    moment = start.replace(tzinfo=UTC, second=0, microsecond=0)
    fire = schedule.next_after(moment)
    # check minute by minute only when the gap is short enough to be cheap
    if fire - moment <= timedelta(days=3):
        probe = moment + timedelta(minutes=1)
        while probe < fire:
            assert not matches(expr, probe), probe
            probe += timedelta(minutes=1)


@settings(max_examples=200, deadline=None)
@given(expressions(), starts, st.sampled_from(["UTC", "America/New_York", "Europe/London"]))
def test_previous_before_the_next_fire_is_at_or_before_the_start(
    expr: Expr, start: datetime, zone: str
) -> None:
    if not can_fire(expr):
        return
    schedule = parse(expr.text, zone)
    moment = start.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
    following = schedule.next_after(moment)
    before = schedule.previous_before(following)
    assert before.astimezone(UTC) <= moment
    assert schedule.next_after(before).astimezone(UTC) == following.astimezone(UTC)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_raises_nothing_but_cron_error(text: str) -> None:
    try:
        schedule = parse(text)
    except CronError as error:
        assert error.message
        assert error.field
    else:
        assert len(schedule.normalized.split()) == 5


CRON_ALPHABET = "0123456789*/-,# LWlw@abcdefghijklmnopqrstuvwxyz\t"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=CRON_ALPHABET, max_size=30))
def test_cron_looking_text_raises_nothing_but_cron_error(text: str) -> None:
    try:
        schedule = parse(text)
    except CronError as error:
        assert error.message
        return
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert schedule.next_after(start) > start
