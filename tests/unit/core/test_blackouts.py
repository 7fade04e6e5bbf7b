"""Blackout windows as a pure rule: which slots a window covers, what the planner does
with them (skip or defer), and that lifting a window gives back the cron's fire times.

Zones pinned by their transitions: Europe/Warsaw springs forward on 2027-03-28 (02:00 ->
03:00) and falls back on 2027-10-31 (03:00 -> 02:00); Australia/Lord_Howe moves by 30
minutes (2027-04-04 02:00 -> 01:30)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.core.blackouts import (
    Scope,
    Subject,
    Window,
    check_duration,
    check_once,
    clear_at,
    expires_at,
    hit_at,
    overlapping,
    weekly_cron,
    with_lift,
)
from fleetcron.core.planning import BlackoutState, Plan, SlotOutcome, black_out
from fleetcron.core.statuses import SkipKind
from fleetcron.cron import parse_cached
from fleetcron.errors import InvalidInput

ZONES = ["UTC", "Europe/Warsaw", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
WEB1 = Subject(job="backup", target="web1", labels={"rack": "r12"}, zone="Europe/Warsaw")


def once(start: str, end: str, *, zone: str = "UTC", scope: Scope | None = None) -> Window:
    return Window(
        id=1,
        name="patch",
        scope=scope or Scope(job="backup"),
        zone=zone,
        kind="once",
        start=datetime.fromisoformat(start),
        end=datetime.fromisoformat(end),
    )


def recurring(cron: str, minutes: int, *, zone: str = "UTC", wid: int = 2) -> Window:
    return Window(
        id=wid,
        name="weekly",
        scope=Scope(selector={"rack": "r12"}),
        zone=zone,
        kind="cron",
        cron=cron,
        duration=timedelta(minutes=minutes),
    )


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fire(slot: datetime) -> Plan:
    return Plan((SlotOutcome(slot, "fire"),), slot + timedelta(hours=1))


# -- which instants a window covers ---------------------------------------------------


def test_a_one_off_window_covers_its_start_and_not_its_end() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00")
    assert hit_at([window], WEB1, utc("2027-01-10T22:00")) is not None
    assert hit_at([window], WEB1, utc("2027-01-11T01:59")) is not None
    assert hit_at([window], WEB1, utc("2027-01-11T02:00")) is None
    assert hit_at([window], WEB1, utc("2027-01-10T21:59")) is None


def test_a_window_in_each_targets_zone_follows_the_target() -> None:
    window = once("2027-01-10T22:00", "2027-01-10T23:00", zone="target")
    # 22:00 in Warsaw (UTC+1 in winter) is 21:00 UTC.
    assert hit_at([window], WEB1, utc("2027-01-10T21:30")) is not None
    assert hit_at([window], replace(WEB1, zone="UTC"), utc("2027-01-10T21:30")) is None


def test_a_window_covers_only_its_scope() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00", scope=Scope(job="backup", target="db1"))
    assert hit_at([window], WEB1, utc("2027-01-10T23:00")) is None
    assert hit_at([window], replace(WEB1, target="db1"), utc("2027-01-10T23:00")) is not None


def test_a_recurring_window_opens_at_each_fire_time_for_its_duration() -> None:
    window = recurring("0 22 * * 6", 240, zone="Europe/Warsaw")  # Saturdays 22:00-02:00
    # Saturday 2027-01-09 22:00 Warsaw is 21:00 UTC; the window ends 01:00 UTC Sunday.
    hit = hit_at([window], WEB1, utc("2027-01-10T00:30"))
    assert hit is not None and hit.ends_at == utc("2027-01-10T01:00")
    assert hit_at([window], WEB1, utc("2027-01-10T01:00")) is None
    assert hit_at([window], WEB1, utc("2027-01-11T00:30")) is None  # a Monday


def test_a_recurring_window_ends_at_its_until() -> None:
    window = replace(recurring("0 * * * *", 30), until=utc("2027-01-10T05:10"))
    assert hit_at([window], WEB1, utc("2027-01-10T05:05")) is not None
    assert hit_at([window], WEB1, utc("2027-01-10T05:15")) is None
    assert hit_at([window], WEB1, utc("2027-01-10T06:05")) is None


def test_a_one_off_window_across_the_spring_gap_lasts_one_hour_less() -> None:
    window = once("2027-03-28T01:00", "2027-03-28T04:00", zone="Europe/Warsaw")
    hit = hit_at([window], WEB1, utc("2027-03-28T00:00"))  # 01:00 CET
    assert hit is not None and hit.ends_at == utc("2027-03-28T02:00")  # 04:00 CEST


def test_clear_at_follows_windows_that_meet() -> None:
    first = once("2027-01-10T22:00", "2027-01-10T23:00")
    second = replace(once("2027-01-10T23:00", "2027-01-11T01:00"), id=5)
    assert clear_at([first, second], WEB1, utc("2027-01-10T22:30")) == utc("2027-01-11T01:00")
    assert clear_at([first, second], WEB1, utc("2027-01-11T03:00")) == utc("2027-01-11T03:00")


# -- what the planner does with a covered slot -----------------------------------------


def test_a_covered_slot_is_skipped_naming_the_window() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00")
    plan = black_out(fire(utc("2027-01-10T23:00")), BlackoutState([window], WEB1))
    (outcome,) = plan.outcomes
    assert outcome.outcome == "skipped"
    assert outcome.skip_kind is SkipKind.BLACKOUT
    assert outcome.reason == ('blackout window #1 "patch" until 2027-01-11T02:00:00+00:00')


def test_a_deferring_job_waits_for_the_end_keeping_its_slot() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00")
    slot = utc("2027-01-10T23:00")
    plan = black_out(fire(slot), BlackoutState([window], WEB1, on_blackout="defer"))
    (outcome,) = plan.outcomes
    assert (outcome.outcome, outcome.slot, outcome.trigger) == ("deferred", slot, "deferred")
    assert outcome.not_before == utc("2027-01-11T02:00")
    assert outcome.reason is not None and '"patch"' in outcome.reason


def test_only_one_run_per_assignment_waits_for_a_window() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00")
    state = BlackoutState([window], WEB1, on_blackout="defer", deferred_waiting=True)
    (outcome,) = black_out(fire(utc("2027-01-10T23:00")), state).outcomes
    assert outcome.outcome == "skipped" and outcome.skip_kind is SkipKind.BLACKOUT
    assert outcome.reason is not None and "already waits" in outcome.reason


def test_missed_slots_stay_missed_in_a_window() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00")
    missed = SlotOutcome(utc("2027-01-10T23:00"), "missed", reason="scheduler was not running")
    plan = Plan((missed,), utc("2027-01-11T00:00"))
    assert black_out(plan, BlackoutState([window], WEB1)) == plan


# -- properties over zones and years -----------------------------------------------------


def fired_slots(
    planner: Callable[[Plan, BlackoutState], Plan],
    cron: str,
    zone: str,
    windows: list[Window],
    start: datetime,
    hours: int,
) -> list[datetime]:
    schedule = parse_cached(cron, zone)
    fired = []
    for slot in schedule.between(start, start + timedelta(hours=hours)):
        plan = planner(fire(slot), BlackoutState(windows, replace(WEB1, zone=zone)))
        fired += [o.slot for o in plan.outcomes if o.outcome == "fire"]
    return fired


def skipped_iff_inside(
    planner: Callable[[Plan, BlackoutState], Plan], window: Window, zone: str, start: datetime
) -> None:
    """The guarantee: a slot is skipped iff a window covers it, and fires otherwise."""
    schedule = parse_cached("*/15 * * * *", zone)
    for slot in schedule.between(start, start + timedelta(hours=30)):
        plan = planner(fire(slot), BlackoutState([window], replace(WEB1, zone=zone)))
        (outcome,) = plan.outcomes
        inside = hit_at([window], replace(WEB1, zone=zone), slot) is not None
        assert (outcome.outcome == "skipped") is inside, (slot, outcome)


starts = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2060, 12, 31)).map(
    lambda d: d.replace(second=0, microsecond=0)
)


@settings(max_examples=60, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    start=starts,
    minutes=st.integers(min_value=1, max_value=26 * 60),
    target_zone=st.booleans(),
)
def test_a_slot_is_skipped_iff_inside_a_one_off_window(
    zone: str, start: datetime, minutes: int, target_zone: bool
) -> None:
    window = once(
        start.isoformat(),
        (start + timedelta(minutes=minutes)).isoformat(),
        zone="target" if target_zone else zone,
    )
    skipped_iff_inside(black_out, window, zone, start.replace(tzinfo=UTC) - timedelta(hours=16))


@settings(max_examples=40, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    day=st.integers(min_value=0, max_value=6),
    hour=st.integers(min_value=0, max_value=23),
    minutes=st.integers(min_value=1, max_value=600),
    year=st.integers(min_value=2001, max_value=2059),
    month=st.integers(min_value=1, max_value=12),
)
def test_a_recurring_window_covers_exactly_the_brute_force_ranges(
    zone: str, day: int, hour: int, minutes: int, year: int, month: int
) -> None:
    window = recurring(f"0 {hour} * * {day}", minutes, zone=zone)
    opens = parse_cached(window.cron or "", zone)
    start = datetime(year, month, 1, tzinfo=UTC)
    ranges = [
        (o, o + timedelta(minutes=minutes))
        for o in opens.between(start - timedelta(days=8), start + timedelta(days=9))
    ]
    for slot in parse_cached("*/20 * * * *", zone).between(start, start + timedelta(days=8)):
        expected = any(a <= slot < b for a, b in ranges)
        assert (hit_at([window], replace(WEB1, zone=zone), slot) is not None) is expected


@settings(max_examples=40, deadline=None)
@given(zone=st.sampled_from(ZONES), start=starts, minutes=st.integers(1, 600))
def test_lifting_a_window_restores_exactly_the_crons_fire_times(
    zone: str, start: datetime, minutes: int
) -> None:
    window = replace(recurring("*/30 * * * *", minutes, zone=zone), scope=Scope(job="backup"))
    begin = start.replace(tzinfo=UTC)
    cron_times = list(parse_cached("*/10 * * * *", zone).between(begin, begin + timedelta(hours=6)))
    lifted = with_lift(window, begin)
    assert fired_slots(black_out, "*/10 * * * *", zone, [lifted], begin, 6) == cron_times
    # And while in force, nothing fires inside it (every slot is on a :30 opening's range).
    assert fired_slots(black_out, "*/10 * * * *", zone, [window], begin, 6) == [
        t for t in cron_times if hit_at([window], replace(WEB1, zone=zone), t) is None
    ]


@settings(max_examples=40, deadline=None)
@given(zone=st.sampled_from(ZONES), start=starts, minutes=st.integers(1, 3000))
def test_the_deferred_start_is_the_first_instant_no_window_covers(
    zone: str, start: datetime, minutes: int
) -> None:
    windows = [
        recurring("0 */6 * * *", minutes % 350 + 1, zone=zone),
        once(start.isoformat(), (start + timedelta(minutes=minutes)).isoformat(), zone=zone),
    ]
    windows = [replace(w, scope=Scope(job="backup")) for w in windows]
    subject = replace(WEB1, zone=zone)
    instant = start.replace(tzinfo=UTC)
    clear = clear_at(windows, subject, instant)
    assert clear >= instant
    assert hit_at(windows, subject, clear) is None


def test_the_skip_checker_catches_a_planner_that_ignores_windows() -> None:
    """Negative control: the property's checker fails on a planner without the rule."""
    window = once("2027-01-10T22:00", "2027-01-11T02:00")
    with pytest.raises(AssertionError):
        skipped_iff_inside(lambda plan, _state: plan, window, "UTC", utc("2027-01-10T12:00"))


def test_the_lift_checker_catches_a_planner_that_ignores_the_lift() -> None:
    """Negative control: skipping by the window's range alone, lift or not, is caught."""

    def lift_blind(plan: Plan, state: BlackoutState) -> Plan:
        windows = [replace(w, lifted_at=None) for w in state.windows]
        return black_out(plan, replace(state, windows=windows))

    window = recurring("*/30 * * * *", 20, zone="UTC")
    window = replace(window, scope=Scope(job="backup"))
    begin = utc("2027-01-10T00:00")
    times = list(parse_cached("*/10 * * * *", "UTC").between(begin, begin + timedelta(hours=2)))
    assert (
        fired_slots(lift_blind, "*/10 * * * *", "UTC", [with_lift(window, begin)], begin, 2)
        != times
    )


# -- checking what an operator gives ------------------------------------------------------


def test_a_weekly_rule_is_a_cron_expression() -> None:
    assert weekly_cron("sat,sun 22:00") == "0 22 * * 6,0"
    assert weekly_cron("mon-fri 07:05") == "5 7 * * 1-5"


@pytest.mark.parametrize(
    ("rule", "says"), [("someday 22:00", "'someday'"), ("sat 25:00", "'25:00'"), ("sat", "''")]
)
def test_a_bad_weekly_rule_names_the_field_and_value(rule: str, says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        weekly_cron(rule)
    assert caught.value.field == "weekly"
    assert says in caught.value.message


def test_an_end_before_the_start_is_refused_naming_end() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_once(datetime(2027, 1, 2), datetime(2027, 1, 1))
    assert caught.value.field == "end"
    assert "is not after the start" in caught.value.message


def test_a_duration_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_duration(timedelta(days=8))
    assert caught.value.field == "duration"


def test_a_one_off_window_in_each_targets_zone_expires_after_the_westmost_end() -> None:
    window = once("2027-01-10T22:00", "2027-01-11T02:00", zone="target")
    assert expires_at(window) == utc("2027-01-11T14:00")
    assert expires_at(once("2027-01-10T22:00", "2027-01-11T02:00", zone="Europe/Warsaw")) == utc(
        "2027-01-11T01:00"
    )


def test_overlapping_one_off_windows_of_one_scope_are_found() -> None:
    first = once("2027-01-10T22:00", "2027-01-11T02:00")
    second = replace(once("2027-01-11T01:00", "2027-01-11T03:00"), id=9)
    elsewhere = replace(second, id=10, scope=Scope(job="other"))
    later = replace(once("2027-01-11T02:00", "2027-01-11T03:00"), id=11)
    assert overlapping(first, [first, second, elsewhere, later]) == [second]
