"""A job's DST policy (cron/dst.py): the default against the cronie-derived oracle (cronsim),
hand-computed vectors for every other choice in several zones, and properties over zones
and years.

Transitions used (from the zone database):
  America/New_York    2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST
  Europe/Warsaw       2027-03-28 02:00 CET -> 03:00 CEST; 2027-10-31 03:00 CEST -> 02:00 CET
  Australia/Lord_Howe 2026-04-05 02:00 +11 -> 01:30 +10:30 (30 minutes repeated);
                      2026-10-04 02:00 +10:30 -> 02:30 +11 (30 minutes skipped)
  Australia/Sydney    2026-04-05 03:00 AEDT -> 02:00 AEST; 2026-10-04 02:00 AEST -> 03:00 AEDT
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.cron import DstPolicy, parse
from fleetcron.cron.dst import Transition, has_dst, transitions
from fleetcron.errors import InvalidInput

NEW_YORK = "America/New_York"
WARSAW = "Europe/Warsaw"
LORD_HOWE = "Australia/Lord_Howe"
SYDNEY = "Australia/Sydney"


def at(zone: str, *fields: int, fold: int = 0) -> datetime:
    year, month, day, hour, minute = (*fields, 0, 0)[:5]
    return datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(zone), fold=fold)


def fires(
    expr: str, zone: str, start: datetime, count: int, gap: str = "cronie", fold: str = "cronie"
) -> list[str]:
    schedule = parse(expr, zone, DstPolicy(gap, fold))
    return [f.isoformat() for f in itertools.islice(schedule.iter_after(start), count)]


# -- the default is Debian cron's rule: the oracle -------------------------------------------


def cronsim_fires(expr: str, start: datetime, count: int) -> list[datetime]:
    result: list[datetime] = []
    threshold = start.astimezone(UTC)
    for fire in CronSim(expr, start):
        moment = fire.astimezone(UTC)
        if moment > threshold:
            result.append(moment)
            threshold = moment
        if len(result) == count:
            break
    return result


TRANSITION_DAYS = [
    (NEW_YORK, datetime(2026, 3, 7, 12)),
    (NEW_YORK, datetime(2026, 10, 31, 12)),
    (WARSAW, datetime(2027, 3, 27, 12)),
    (WARSAW, datetime(2027, 10, 30, 12)),
    (SYDNEY, datetime(2026, 4, 4, 12)),
    (SYDNEY, datetime(2026, 10, 3, 12)),
]
ORACLE_EXPRESSIONS = ["30 2 * * *", "*/30 * * * *", "30 1 * * *", "0 * * * *", "15 1-3 * * *"]


@pytest.mark.parametrize("expr", ORACLE_EXPRESSIONS)
def test_the_default_policy_agrees_with_cronsim_on_transition_days(expr: str) -> None:
    for zone, day in TRANSITION_DAYS:
        start = day.replace(tzinfo=ZoneInfo(zone))
        ours = [
            f.astimezone(UTC)
            for f in itertools.islice(parse(expr, zone, DstPolicy()).iter_after(start), 30)
        ]
        assert ours == cronsim_fires(expr, start, 30), (zone, expr)


@pytest.mark.parametrize("expr", ORACLE_EXPRESSIONS)
def test_naming_cronies_rule_explicitly_gives_the_same_fires(expr: str) -> None:
    schedule = parse(expr, NEW_YORK)
    explicit = (
        DstPolicy("run_at_gap_end", "first")
        if schedule.is_fixed_time
        else DstPolicy("skip", "both")
    )
    for zone, day in TRANSITION_DAYS:
        start = day.replace(tzinfo=ZoneInfo(zone))
        default = list(itertools.islice(parse(expr, zone).iter_after(start), 30))
        named = list(itertools.islice(parse(expr, zone, explicit).iter_after(start), 30))
        assert [f.isoformat() for f in named] == [f.isoformat() for f in default]


def test_the_oracle_comparison_can_fail() -> None:
    # Negative control: a choice that is not cronie's rule differs from cronsim there.
    start = at(NEW_YORK, 2026, 3, 7, 12)
    skipping = [
        f.astimezone(UTC)
        for f in itertools.islice(
            parse("30 2 * * *", NEW_YORK, DstPolicy(gap="skip")).iter_after(start), 5
        )
    ]
    assert skipping != cronsim_fires("30 2 * * *", start, 5)


# -- hand-computed vectors -------------------------------------------------------------------


def test_skip_leaves_out_a_fixed_time_in_the_gap() -> None:
    assert fires("30 2 * * *", NEW_YORK, at(NEW_YORK, 2026, 3, 7, 12), 2, gap="skip") == [
        "2026-03-09T02:30:00-04:00",
        "2026-03-10T02:30:00-04:00",
    ]


def test_skip_keeps_a_time_right_after_the_jump_that_the_expression_names() -> None:
    assert fires("0,30 2,3 * * *", NEW_YORK, at(NEW_YORK, 2026, 3, 8, 1), 3, gap="skip") == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
        "2026-03-09T02:00:00-04:00",
    ]


def test_run_at_gap_end_runs_a_wildcard_schedules_skipped_slot_after_the_jump() -> None:
    assert fires("30 * * * *", NEW_YORK, at(NEW_YORK, 2026, 3, 8, 1), 3, gap="run_at_gap_end") == [
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]


def test_fold_last_runs_a_fixed_time_on_the_second_pass() -> None:
    assert fires("30 1 * * *", NEW_YORK, at(NEW_YORK, 2026, 10, 31, 12), 2, fold="last") == [
        "2026-11-01T01:30:00-05:00",
        "2026-11-02T01:30:00-05:00",
    ]


def test_fold_both_runs_a_fixed_time_on_each_pass() -> None:
    assert fires("30 1 * * *", NEW_YORK, at(NEW_YORK, 2026, 10, 31, 12), 3, fold="both") == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-02T01:30:00-05:00",
    ]


def test_fold_first_and_last_run_a_wildcard_schedule_once_per_wall_time() -> None:
    start = at(NEW_YORK, 2026, 11, 1, 0, 50)
    assert fires("*/30 * * * *", NEW_YORK, start, 4, fold="first") == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T02:30:00-05:00",
    ]
    assert fires("*/30 * * * *", NEW_YORK, start, 4, fold="last") == [
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T02:30:00-05:00",
    ]


def test_fold_last_from_inside_either_pass() -> None:
    first_pass = at(NEW_YORK, 2026, 11, 1, 1, 10)
    second_pass = at(NEW_YORK, 2026, 11, 1, 1, 10, fold=1)
    assert fires("*/20 * * * *", NEW_YORK, first_pass, 2, fold="last") == [
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:20:00-05:00",
    ]
    assert fires("*/20 * * * *", NEW_YORK, second_pass, 2, fold="last") == [
        "2026-11-01T01:20:00-05:00",
        "2026-11-01T01:40:00-05:00",
    ]


def test_fold_last_backwards_never_gives_a_first_pass() -> None:
    schedule = parse("*/20 * * * *", NEW_YORK, DstPolicy(fold="last"))
    moment, found = at(NEW_YORK, 2026, 11, 1, 2, 30), []
    for _ in range(6):
        moment = schedule.previous_before(moment)
        found.append(moment.isoformat())
    assert found == [
        "2026-11-01T02:20:00-05:00",
        "2026-11-01T02:00:00-05:00",
        "2026-11-01T01:40:00-05:00",
        "2026-11-01T01:20:00-05:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T00:40:00-04:00",
    ]


def test_warsaw_in_both_directions() -> None:
    assert fires("30 2 * * *", WARSAW, at(WARSAW, 2027, 3, 27, 12), 1) == [
        "2027-03-28T03:00:00+02:00"
    ]
    assert fires("30 2 * * *", WARSAW, at(WARSAW, 2027, 3, 27, 12), 1, gap="skip") == [
        "2027-03-29T02:30:00+02:00"
    ]
    assert fires("30 2 * * *", WARSAW, at(WARSAW, 2027, 10, 30, 12), 1, fold="last") == [
        "2027-10-31T02:30:00+01:00"
    ]


def test_lord_howes_thirty_minute_gap() -> None:
    start = at(LORD_HOWE, 2026, 10, 3, 12)
    assert fires("15 2 * * *", LORD_HOWE, start, 2) == [
        "2026-10-04T02:30:00+11:00",
        "2026-10-05T02:15:00+11:00",
    ]
    assert fires("15 2 * * *", LORD_HOWE, start, 1, gap="skip") == ["2026-10-05T02:15:00+11:00"]


def test_lord_howes_thirty_minute_fold() -> None:
    start = at(LORD_HOWE, 2026, 4, 4, 12)
    assert fires("45 1 * * *", LORD_HOWE, start, 2) == [
        "2026-04-05T01:45:00+11:00",
        "2026-04-06T01:45:00+10:30",
    ]
    assert fires("45 1 * * *", LORD_HOWE, start, 1, fold="last") == ["2026-04-05T01:45:00+10:30"]
    assert fires("45 1 * * *", LORD_HOWE, start, 2, fold="both") == [
        "2026-04-05T01:45:00+11:00",
        "2026-04-05T01:45:00+10:30",
    ]
    # 01:15 is before the repeated half hour: one fire whatever the choice
    assert fires("15 1 * * *", LORD_HOWE, start, 1, fold="both") == ["2026-04-05T01:15:00+11:00"]


def test_sydney_in_the_southern_autumn_and_spring() -> None:
    assert fires("30 2 * * *", SYDNEY, at(SYDNEY, 2026, 4, 4, 12), 2, fold="both") == [
        "2026-04-05T02:30:00+11:00",
        "2026-04-05T02:30:00+10:00",
    ]
    assert fires("30 2 * * *", SYDNEY, at(SYDNEY, 2026, 10, 3, 12), 1, gap="skip") == [
        "2026-10-05T02:30:00+11:00"
    ]


def test_a_zone_without_dst_is_unaffected() -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    for gap, fold in (("skip", "last"), ("run_at_gap_end", "both")):
        assert fires("30 2 * * *", "Asia/Tokyo", start, 40, gap, fold) == fires(
            "30 2 * * *", "Asia/Tokyo", start, 40
        )


def test_an_unknown_choice_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        DstPolicy(gap="later")
    assert caught.value.field == "dst_gap"
    assert "run_at_gap_end" in str(caught.value)
    with pytest.raises(InvalidInput) as caught:
        DstPolicy(fold="twice")
    assert caught.value.field == "dst_fold"


def test_policies_make_schedules_differ() -> None:
    assert parse("30 2 * * *", NEW_YORK) != parse("30 2 * * *", NEW_YORK, DstPolicy(gap="skip"))
    assert parse("30 2 * * *", NEW_YORK).with_dst(DstPolicy()) == parse("30 2 * * *", NEW_YORK)


# -- transitions -----------------------------------------------------------------------------


def test_transitions_of_warsaw_in_2027() -> None:
    found = list(
        transitions(
            ZoneInfo(WARSAW), datetime(2027, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)
        )
    )
    assert [
        (t.at.isoformat(), t.is_gap, t.wall_start.isoformat(), t.wall_end.isoformat())
        for t in found
    ] == [
        ("2027-03-28T01:00:00+00:00", True, "2027-03-28T02:00:00", "2027-03-28T03:00:00"),
        ("2027-10-31T01:00:00+00:00", False, "2027-10-31T02:00:00", "2027-10-31T03:00:00"),
    ]


def test_lord_howe_moves_by_half_an_hour() -> None:
    found = list(
        transitions(
            ZoneInfo(LORD_HOWE), datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
        )
    )
    assert [abs(t.after - t.before) for t in found] == [timedelta(minutes=30)] * 2
    assert [t.is_gap for t in found] == [False, True]


def test_has_dst() -> None:
    year = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert has_dst(ZoneInfo(WARSAW), *year)
    assert not has_dst(ZoneInfo("Asia/Tokyo"), *year)
    assert not has_dst(ZoneInfo("UTC"), *year)


# -- properties over zones and years ---------------------------------------------------------

DST_ZONES = [
    NEW_YORK,
    WARSAW,
    LORD_HOWE,
    SYDNEY,
    "America/Santiago",
    "Europe/London",
    "Pacific/Auckland",
    "America/Havana",
    "Asia/Tehran",
]
EXPRESSIONS = [
    "30 2 * * *",
    "45 1 * * *",
    "15 0 * * *",
    "*/20 * * * *",
    "30 * * * *",
    "0,30 1-3 * * *",
    "10 2,3 * * *",
]


def transition_fires(
    expr: str, zone: str, year: int, policy: DstPolicy
) -> list[tuple[Transition, list[datetime]]]:
    """Each transition of the year, with the fires from 4 hours before it to 4 after."""
    tz = ZoneInfo(zone)
    schedule = parse(expr, zone, policy)
    out = []
    for transition in transitions(
        tz, datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    ):
        window = timedelta(hours=4)
        found = list(schedule.between(transition.at - window, transition.at + window))
        out.append((transition, found))
    return out


def fires_twice_in_a_fold(found: list[tuple[Transition, list[datetime]]]) -> bool:
    for transition, fired in found:
        if transition.is_gap:
            continue
        walls = Counter(f.replace(tzinfo=None, fold=0) for f in fired)
        if any(n > 1 for n in walls.values()):
            return True
    return False


def fires_in_a_gap_or_off_schedule(
    expr: str, found: list[tuple[Transition, list[datetime]]]
) -> bool:
    schedule = parse(expr)
    for transition, fired in found:
        for fire in fired:
            if not schedule.matches(fire):
                return True
            if (
                transition.is_gap
                and transition.wall_start <= fire.replace(tzinfo=None) < transition.wall_end
            ):
                return True
    return False


zones_and_years = {
    "expr": st.sampled_from(EXPRESSIONS),
    "zone": st.sampled_from(DST_ZONES),
    "year": st.integers(1990, 2060),
}


@settings(max_examples=60, deadline=None)
@given(
    **zones_and_years,
    fold=st.sampled_from(["first", "last"]),
    gap=st.sampled_from(["cronie", "skip", "run_at_gap_end"]),
)
def test_first_and_last_never_fire_twice_in_a_fold(
    expr: str, zone: str, year: int, fold: str, gap: str
) -> None:
    assert not fires_twice_in_a_fold(transition_fires(expr, zone, year, DstPolicy(gap, fold)))


@settings(max_examples=60, deadline=None)
@given(**zones_and_years, fold=st.sampled_from(["cronie", "first", "both", "last"]))
def test_skip_never_fires_in_a_gap_nor_off_schedule(
    expr: str, zone: str, year: int, fold: str
) -> None:
    found = transition_fires(expr, zone, year, DstPolicy("skip", fold))
    assert not fires_in_a_gap_or_off_schedule(expr, found)


@settings(max_examples=60, deadline=None)
@given(
    **zones_and_years,
    gap=st.sampled_from(["cronie", "skip", "run_at_gap_end"]),
    fold=st.sampled_from(["cronie", "first", "both", "last"]),
)
def test_every_policy_is_strictly_increasing_and_reversible(
    expr: str, zone: str, year: int, gap: str, fold: str
) -> None:
    policy = DstPolicy(gap, fold)
    schedule = parse(expr, zone, policy)
    for _, fired in transition_fires(expr, zone, year, policy):
        instants = [f.astimezone(UTC) for f in fired]
        assert instants == sorted(set(instants))
        for earlier, later in itertools.pairwise(fired):
            assert schedule.next_after(earlier).astimezone(UTC) == later.astimezone(UTC)
            assert schedule.previous_before(later).astimezone(UTC) == earlier.astimezone(UTC)


def test_the_property_checkers_can_fail() -> None:
    # Negative controls: both passes do fire twice in New York's fold; run_at_gap_end does
    # run a fixed time off its schedule (at the gap's end).
    both = transition_fires("30 1 * * *", NEW_YORK, 2026, DstPolicy(fold="both"))
    assert fires_twice_in_a_fold(both)
    at_end = transition_fires("30 2 * * *", NEW_YORK, 2026, DstPolicy(gap="run_at_gap_end"))
    assert fires_in_a_gap_or_off_schedule("30 2 * * *", at_end)
