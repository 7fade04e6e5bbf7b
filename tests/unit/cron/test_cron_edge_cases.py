"""Edge cases found by a differential check against cronie and cronsim (issue 10, item 8).

Transitions used (2026):
  America/New_York  spring forward 2026-03-08 02:00 EST -> 03:00 EDT (02:00-02:59 missing)
                    fall back      2026-11-01 02:00 EDT -> 01:00 EST (01:00-01:59 twice)
  Europe/Berlin     spring forward 2026-03-29 02:00 CET -> 03:00 CEST
                    fall back      2026-10-25 03:00 CEST -> 02:00 CET
  Australia/Lord_Howe  half-hour DST: 2026-04-05 02:00 +11 -> 01:30 +10:30,
                       2026-10-04 02:00 +10:30 -> 02:30 +11
  America/Santiago  spring forward 2026-09-06 00:00 -04 -> 01:00 -03 (no midnight)
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcron.cli.cron_cmd import cron
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.cron import parse
from fleetcron.errors import CronError, InvalidInput

NEW_YORK = ZoneInfo("America/New_York")


def utc(t: datetime) -> datetime:
    return t.astimezone(UTC)


def _error(text: str) -> CronError:
    with pytest.raises(CronError) as caught:
        parse(text)
    return caught.value


# -- a start time inside a DST gap, with the schedule's own zone as tzinfo -----------------


def test_a_start_in_the_gap_gets_a_next_fire_after_it() -> None:
    # 02:30 does not exist in New York that day; fold=0 reads it with the offset before the
    # jump (EST), i.e. the instant 07:30 UTC = 03:30 EDT. The next */15 slot is 03:45 EDT.
    t = datetime(2026, 3, 8, 2, 30, tzinfo=NEW_YORK)
    fire = parse("*/15 * * * *", NEW_YORK).next_after(t)
    assert utc(fire) > utc(t)
    assert fire.isoformat() == "2026-03-08T03:45:00-04:00"


def test_a_start_in_the_gap_gets_a_previous_fire_before_it() -> None:
    t = datetime(2026, 3, 8, 2, 30, tzinfo=NEW_YORK)
    fire = parse("*/15 * * * *", NEW_YORK).previous_before(t)
    assert utc(fire) < utc(t)
    assert fire.isoformat() == "2026-03-08T03:15:00-04:00"


def test_between_from_a_start_in_the_gap_yields_only_later_fires() -> None:
    t = datetime(2026, 3, 8, 2, 30, tzinfo=NEW_YORK)
    end = datetime(2026, 3, 8, 4, 0, tzinfo=NEW_YORK)
    fires = [f.isoformat() for f in parse("*/15 * * * *", NEW_YORK).between(t, end)]
    assert fires == ["2026-03-08T03:45:00-04:00", "2026-03-08T04:00:00-04:00"]


def test_a_gap_start_with_fold_1_is_read_with_the_offset_after_the_jump() -> None:
    # fold=1: 02:30 EDT = 06:30 UTC = 01:30 EST, before the jump.
    t = datetime(2026, 3, 8, 2, 30, tzinfo=NEW_YORK, fold=1)
    assert parse("*/15 * * * *", NEW_YORK).next_after(t).isoformat() == (
        "2026-03-08T01:45:00-05:00"
    )
    # the fixed-time job of the skipped 02:30 has not fired yet: it fires right after the jump
    assert parse("30 2 * * *", NEW_YORK).next_after(t).isoformat() == "2026-03-08T03:00:00-04:00"


def test_a_gap_start_with_fold_0_is_after_the_fixed_time_job_fired_at_the_jump() -> None:
    t = datetime(2026, 3, 8, 2, 30, tzinfo=NEW_YORK)  # = 03:30 EDT
    schedule = parse("30 2 * * *", NEW_YORK)
    assert schedule.next_after(t).isoformat() == "2026-03-09T02:30:00-04:00"
    assert schedule.previous_before(t).isoformat() == "2026-03-08T03:00:00-04:00"


def test_the_cli_reads_a_naive_from_inside_the_gap_as_an_instant() -> None:
    result = CliRunner().invoke(
        cron,
        [
            "next",
            "*/15 * * * *",
            "--tz",
            "America/New_York",
            "--from",
            "2026-03-08T02:30",
            "-n",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.split() == ["2026-03-08T03:45:00-04:00", "2026-03-08T04:00:00-04:00"]


def test_the_cli_names_from_when_a_search_runs_off_the_calendar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["cron", "next", "* * * * *", "--tz", "America/New_York", "--from", "9999-12-31T23:59"]
    assert run_cli(cli, args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --from: 9999-12-31T23:59:00-05:00 is too close to the limits")
    assert "Traceback" not in err


# The property: for every start, including times in gaps and in both passes of a repeat,
# next_after is strictly later and previous_before strictly earlier, as instants, and each is
# the nearest fire time (nothing of the schedule lies between it and the start).

ZONES = ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago")
TRANSITIONS = {
    "America/New_York": [datetime(2026, 3, 8, 2), datetime(2026, 11, 1, 1)],
    "Europe/Berlin": [datetime(2026, 3, 29, 2), datetime(2026, 10, 25, 2)],
    "Australia/Lord_Howe": [datetime(2026, 4, 5, 1, 30), datetime(2026, 10, 4, 2)],
    "America/Santiago": [datetime(2026, 4, 4, 23), datetime(2026, 9, 6, 0)],
}
EXPRESSIONS = (
    "*/15 * * * *",
    "* * * * *",
    "30 2 * * *",
    "0 2 * * *",
    "45 1 * * *",
    "0 0 * * *",
    "0,30 * * * *",
    "*/7 1-3 * * *",
    "15 2,3 * * 0",
    "0 * * * *",
)


@st.composite
def wall_starts(draw: st.DrawFn) -> datetime:
    """A start with the zone as tzinfo, not normalized: near a transition (often in its gap
    or fold) or anywhere, with either fold and with or without seconds."""
    zone = draw(st.sampled_from(ZONES))
    if draw(st.booleans()):
        base = draw(st.sampled_from(TRANSITIONS[zone]))
        wall = base + timedelta(minutes=draw(st.integers(-150, 150)))
    else:
        wall = draw(st.datetimes(datetime(1970, 1, 1), datetime(2090, 1, 1)))
        wall = wall.replace(second=0, microsecond=0)
    wall += timedelta(seconds=draw(st.sampled_from([0, 0, 1, 30, 59])))
    return wall.replace(tzinfo=ZoneInfo(zone), fold=draw(st.integers(0, 1)))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(EXPRESSIONS), wall_starts())
def test_next_after_is_later_and_previous_before_is_earlier_for_every_start(
    text: str, t: datetime
) -> None:
    schedule = parse(text, t.tzinfo)  # type: ignore[arg-type]
    following = schedule.next_after(t)
    preceding = schedule.previous_before(t)
    assert utc(following) > utc(t)
    assert utc(preceding) < utc(t)
    # nearest: stepping back from the next fire lands at or before t, and forward from the
    # previous one at or after it
    assert utc(schedule.previous_before(following)) <= utc(t)
    assert utc(schedule.next_after(preceding)) >= utc(t)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EXPRESSIONS), wall_starts())
def test_a_start_gives_the_same_answers_as_its_instant_in_utc(text: str, t: datetime) -> None:
    schedule = parse(text, t.tzinfo)  # type: ignore[arg-type]
    instant = utc(t)
    assert utc(schedule.next_after(t)) == utc(schedule.next_after(instant))
    assert utc(schedule.previous_before(t)) == utc(schedule.previous_before(instant))
    first = list(itertools.islice(schedule.iter_after(t), 3))
    again = itertools.islice(schedule.iter_after(instant), 3)
    assert [utc(f) for f in first] == [utc(f) for f in again]


# -- day-of-week ranges ending in 0 -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spelling"),
    [("5-0/1", "5-7/1"), ("sat-sun/2", "6-7/2"), ("1-0/2", "1-7/2"), ("MON-SUN/3", "1-7/3")],
)
def test_a_day_of_week_range_ending_in_0_with_a_step_is_refused(text: str, spelling: str) -> None:
    # cronie turns a range end of 0 into 7 only when no "/" follows; with a step the range
    # stays reversed (and sets no day), so refusing is the honest reading.
    error = _error(f"0 0 * * {text}")
    assert error.field == "day-of-week"
    assert error.value == text
    assert "reversed range" in error.message
    assert f'write "{spelling}"' in error.message


@pytest.mark.parametrize(
    ("text", "normalized"),
    [("5-0", "5-7"), ("sat-sun", "6-7"), ("5-7/1", "5-7/1"), ("6-7/2", "6-7/2")],
)
def test_a_day_of_week_range_ending_in_0_without_a_step_still_ends_on_sunday(
    text: str, normalized: str
) -> None:
    assert parse(f"0 0 * * {text}").normalized == f"0 0 * * {normalized}"


# -- numbers with leading zeros ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("00005 * * * *", "5 * * * *"),
        ("0 000000023 * * *", "0 23 * * *"),
        ("0 0 00000031 * *", "0 0 31 * *"),
        ("*/000015 * * * *", "*/15 * * * *"),
        ("0 0 * * 00000-000006", "0 0 * * 0-6"),
        ("00000 0 * * *", "0 0 * * *"),
    ],
)
def test_numbers_with_any_number_of_leading_zeros_are_read_as_cronie_reads_them(
    text: str, normalized: str
) -> None:
    # cronie collects the digits into a MAX_TEMPSTR buffer and atoi()s them
    assert parse(text).normalized == normalized


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("000060 * * * *", "minute: 000060 is out of range 0-59"),
        ("100000 * * * *", "minute: 100000 is out of range 0-59"),
        ("0 0000000000024 * * *", "hour: 0000000000024 is out of range 0-23"),
        ("*/0000061 * * * *", 'minute: step 0000061 in "*/0000061" is out of range 1-60'),
        ("*/00000 * * * *", 'minute: step 00000 in "*/00000" is out of range 1-60'),
    ],
)
def test_numbers_out_of_range_are_still_refused_whatever_their_zeros(
    text: str, message: str
) -> None:
    assert _error(text).message == message


# -- separators other than blanks and tabs ---------------------------------------------------


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\r", "carriage return"),
        ("\n", "line feed"),
        ("\v", "vertical tab"),
        ("\f", "form feed"),
        ("\x00", "NUL"),
        ("\x1c", "control character"),
    ],
)
@pytest.mark.parametrize("where", ["between fields", "at the end"])
def test_control_characters_are_not_field_separators(char: str, name: str, where: str) -> None:
    text = f"0{char}2 * * *" if where == "between fields" else f"0 2 * * *{char}"
    error = _error(text)
    assert error.field == "expression"
    assert f"the {name} {char!r}" in error.message
    assert "spaces or tabs only" in error.message


def test_blanks_and_tabs_still_separate_fields() -> None:
    assert parse(" 0\t2  *\t\t* * ").normalized == "0 2 * * *"


# -- the limits of datetime ------------------------------------------------------------------

EARLY = datetime(1, 1, 1, 0, 0)
LATE = datetime(9999, 12, 31, 23, 59)


@pytest.mark.parametrize(
    ("zone", "start_tz"),
    [
        ("UTC", UTC),
        ("UTC", timezone(timedelta(hours=5))),
        ("UTC", timezone(timedelta(hours=-5))),
        ("America/New_York", NEW_YORK),
        ("America/New_York", UTC),
        ("Asia/Tokyo", ZoneInfo("Asia/Tokyo")),
        ("Asia/Tokyo", timezone(timedelta(hours=-12))),
    ],
)
@pytest.mark.parametrize("wall", [EARLY, LATE], ids=["year-1", "year-9999"])
def test_searches_at_the_ends_of_the_calendar_raise_the_engines_error(
    zone: str, start_tz: timezone | ZoneInfo, wall: datetime
) -> None:
    schedule = parse("* * * * *", zone)
    t = wall.replace(tzinfo=start_tz)
    answers: dict[str, datetime | None] = {}
    for name, search in (
        ("next_after", schedule.next_after),
        ("previous_before", schedule.previous_before),
        ("iter_after", lambda t: next(schedule.iter_after(t))),
    ):
        try:
            answers[name] = search(t)
        except InvalidInput as error:  # never OverflowError
            assert error.field == "t"
            assert "1-9999" in error.message
            answers[name] = None
    # aware datetimes in different zones compare as instants without converting to UTC
    if answers["next_after"] is not None:
        assert answers["next_after"] > t
        assert answers["iter_after"] == answers["next_after"]
    if answers["previous_before"] is not None:
        assert answers["previous_before"] < t
    try:
        start = t - timedelta(minutes=3) if wall is LATE else t
        end = t + timedelta(minutes=3) if wall is EARLY else t
        fires = list(schedule.between(start, end))
    except InvalidInput as error:
        assert error.field in ("start", "end", "t")
    else:
        assert len(fires) <= 3


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_there_is_no_fire_time_before_year_1_or_after_year_9999(zone: str) -> None:
    schedule = parse("* * * * *", zone)
    with pytest.raises(InvalidInput, match="1-9999") as before:
        schedule.previous_before(EARLY.replace(tzinfo=ZoneInfo(zone)))
    with pytest.raises(InvalidInput, match="1-9999") as after:
        schedule.next_after(LATE.replace(tzinfo=ZoneInfo(zone)))
    assert before.value.field == after.value.field == "t"


def test_a_search_with_room_left_near_the_ends_still_answers() -> None:
    schedule = parse("0 0 * * *", "America/New_York")
    t = datetime(2, 1, 1, tzinfo=UTC)
    assert schedule.previous_before(t).isoformat().startswith("0001-12-31T00:00")
    late = datetime(9999, 12, 30, tzinfo=UTC)
    assert schedule.next_after(late).isoformat() == "9999-12-30T00:00:00-05:00"


# -- a ZoneInfo without a key ----------------------------------------------------------------


def test_a_zone_read_from_a_file_without_a_key_is_supported() -> None:
    with open("/usr/share/zoneinfo/America/New_York", "rb") as file:
        keyless = ZoneInfo.from_file(file)
    assert keyless.key is None
    schedule = parse("30 2 * * *", keyless)
    named = parse("30 2 * * *", NEW_YORK)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    got = [utc(f) for f in itertools.islice(schedule.iter_after(start), 10)]
    want = [utc(f) for f in itertools.islice(named.iter_after(start), 10)]
    assert got == want  # including the collapsed fire at 03:00 EDT on 2026-03-08
    assert schedule == parse("30 2 * * *", keyless)
    assert schedule != named  # a key-less zone is only equal to itself
    assert hash(schedule) == hash(parse("30 2 * * *", keyless))
    assert "from_file" in repr(schedule)
