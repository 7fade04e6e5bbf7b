"""Parsing and validation: what is accepted, how it normalizes, and what each error says."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

import fleetcron.cron
from fleetcron.cron import CronSchedule, parse, validate_timezone
from fleetcron.errors import CronError, FleetcronError, InvalidInput


def test_the_package_exports_exactly_its_public_api() -> None:
    assert sorted(fleetcron.cron.__all__) == [
        "CronSchedule",
        "DstPolicy",
        "parse",
        "parse_cached",
        "validate_timezone",
    ]
    for name in fleetcron.cron.__all__:
        assert hasattr(fleetcron.cron, name)


def test_cron_error_is_a_fleetcron_error_and_a_value_error() -> None:
    with pytest.raises(CronError) as caught:
        parse("61 * * * *")
    assert isinstance(caught.value, FleetcronError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("*/5 * * * *", "*/5 * * * *"),
        ("0  2\t* * SUN", "0 2 * * 0"),
        ("0 9 * jan-Mar mon-fri", "0 9 * 1-3 1-5"),
        ("0 0 1,15 * *", "0 0 1,15 * *"),
        ("05 04 * * *", "5 4 * * *"),
        ("0 0 * * sat-sun", "0 0 * * 6-7"),
        ("0 0 l * 5l", "0 0 L * 5L"),
        ("0 0 lw * mon#2", "0 0 LW * 1#2"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
    ],
)
def test_it_normalizes_names_macros_and_spacing(text: str, normalized: str) -> None:
    assert parse(text).normalized == normalized


def test_it_keeps_the_text_as_given() -> None:
    assert parse(" 0 2 * * sun ").text == " 0 2 * * sun "


def test_schedules_are_equal_and_hash_alike_when_normalized_text_and_zone_match() -> None:
    assert parse("0 0 * * sun") == parse("0 0 * * 0")
    assert hash(parse("0 0 * * sun")) == hash(parse("@weekly"))
    assert parse("0 0 * * 0") != parse("0 0 * * 0", "Europe/Berlin")


def test_a_schedule_cannot_be_modified() -> None:
    schedule = parse("0 0 * * *")
    with pytest.raises(AttributeError):
        schedule.text = "1 1 * * *"


def test_it_accepts_a_zone_by_name_or_as_zoneinfo() -> None:
    assert parse("0 0 * * *", "Europe/Berlin").tz == ZoneInfo("Europe/Berlin")
    assert parse("0 0 * * *", ZoneInfo("Asia/Tokyo")).tz.key == "Asia/Tokyo"
    assert isinstance(parse("0 0 * * *"), CronSchedule)


def test_plain_cron_reports_no_extensions() -> None:
    assert parse("*/5 1-3 * jan mon-fri").extensions == ()


@pytest.mark.parametrize(
    ("text", "extensions"),
    [
        ("0 0 L * *", ("L",)),
        ("0 0 LW * *", ("LW",)),
        ("0 0 * * 1#1", ("#",)),
        ("0 0 * * 5L", ("DOWL",)),
        ("0 0 1,L * fri#3,5L", ("L", "#", "DOWL")),
    ],
)
def test_it_lists_the_extensions_an_expression_uses(text: str, extensions: tuple[str, ...]) -> None:
    assert parse(text).extensions == extensions


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ("30 2 * * *", True),
        ("0-59 0-23 * * *", True),
        ("@daily", True),
        ("@weekly", True),
        ("@monthly", True),
        ("@yearly", True),
        ("* 2 * * *", False),
        ("30 * * * *", False),
        ("0 */2 * * *", False),
        ("@hourly", False),
    ],
)
def test_fixed_time_follows_debian_cron_first_character_rule(text: str, fixed: bool) -> None:
    assert parse(text).is_fixed_time is fixed


def test_it_describes_a_schedule_in_english() -> None:
    assert parse("0 2 * * 0").describe() == "At 02:00, only on Sunday"


def _error(text: str) -> CronError:
    with pytest.raises(CronError) as caught:
        parse(text)
    return caught.value


def test_it_names_field_value_and_range_for_an_out_of_range_minute() -> None:
    error = _error("60 * * * *")
    assert error.message == "minute: 60 is out of range 0-59"
    assert (error.field, error.value, error.allowed) == ("minute", "60", "0-59")


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day-of-month"),
        ("* * 32 * *", "day-of-month"),
        ("* * * 13 *", "month"),
        ("* * * 0 *", "month"),
        ("* * * * 8", "day-of-week"),
    ],
)
def test_it_rejects_out_of_range_values_naming_the_field(text: str, field: str) -> None:
    error = _error(text)
    assert error.field == field
    assert "out of range" in error.message


def test_it_rejects_a_zero_step() -> None:
    error = _error("*/0 * * * *")
    assert error.field == "minute"
    assert "step 0" in error.message


def test_it_allows_a_step_larger_than_the_range() -> None:
    assert parse("*/60 * * * *").normalized == "*/60 * * * *"
    assert parse("10-20/30 * * * *").next_after(_utc(2026, 1, 1)) == _utc(2026, 1, 1, 0, 10)


def test_it_rejects_a_step_larger_than_the_field() -> None:
    assert "out of range 1-60" in _error("*/61 * * * *").message


def test_it_rejects_a_step_without_a_range_with_a_hint() -> None:
    assert _error("5/15 * * * *").message == (
        'minute: "5/15" has a step without a range; write "5-59/15"'
    )


def test_it_rejects_a_reversed_range() -> None:
    error = _error("* 5-3 * * *")
    assert error.field == "hour"
    assert "reversed" in error.message


@pytest.mark.parametrize("text", ["0 0 * * sat-sun", "0 0 * * 5-0", "0 0 * * fri-0"])
def test_it_reads_a_day_of_week_range_ending_in_zero_as_up_to_sunday(text: str) -> None:
    assert parse(text).normalized.endswith("-7")


def test_it_rejects_names_as_steps() -> None:
    assert _error("* * * */jan *").field == "month"


def test_it_rejects_names_in_numeric_fields() -> None:
    assert _error("mon * * * *").field == "minute"


def test_it_rejects_unknown_names() -> None:
    error = _error("0 0 * * sunday")
    assert error.field == "day-of-week"
    assert "sunday" in error.message


@pytest.mark.parametrize("count", ["* * * *", "* * * * * *", "*"])
def test_it_rejects_the_wrong_number_of_fields(count: str) -> None:
    assert "expected 5" in _error(count).message


@pytest.mark.parametrize("text", ["", "   ", " \t "])
def test_it_rejects_empty_input(text: str) -> None:
    assert "empty" in _error(text).message


def test_it_rejects_non_ascii_input() -> None:
    assert "non-ASCII" in _error("０ * * * *").message


def test_it_rejects_trailing_junk_in_a_field() -> None:
    assert _error("5x * * * *").field == "minute"


def test_it_rejects_an_empty_list_item() -> None:
    assert "empty list item" in _error("1,,2 * * * *").message


def test_it_rejects_reboot_with_a_clear_message() -> None:
    assert "@reboot" in _error("@reboot").message


def test_it_rejects_unknown_macros() -> None:
    assert "unknown macro" in _error("@fortnightly").message


def test_it_rejects_text_after_a_macro() -> None:
    assert "unexpected text" in _error("@daily now").message


@pytest.mark.parametrize("text", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 feb *"])
def test_it_rejects_a_schedule_that_can_never_fire(text: str) -> None:
    error = _error(text)
    assert "never fire" in error.message


def test_a_leap_day_schedule_is_possible() -> None:
    assert parse("0 0 29 2 *").normalized == "0 0 29 2 *"


@pytest.mark.parametrize(
    "text",
    ["0 0 L-2 * *", "0 0 W * *", "0 0 15W * *", "0 0 * * 1#6", "0 0 * * 1#0", "0 0 * * L",
     "0 0 * * #2", "0 0 L/2 * *", "0 0 * * 1#1-2"],
)  # fmt: skip
def test_it_rejects_malformed_extensions(text: str) -> None:
    error = _error(text)
    assert error.field in {"day-of-month", "day-of-week"}


def test_it_rejects_a_huge_number_without_converting_it() -> None:
    assert _error("9" * 500 + " * * * *").message.endswith("is out of range 0-59")


def test_it_rejects_overlong_input() -> None:
    assert "longer than" in _error("1," * 600 + "2 * * * *").message


def test_validate_timezone_returns_the_zone() -> None:
    assert validate_timezone("America/New_York").key == "America/New_York"


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "Europe/Berlin "])
def test_validate_timezone_rejects_unknown_zones_naming_the_field(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_timezone(name)
    assert caught.value.field == "timezone"


def test_parse_rejects_an_unknown_zone_as_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse("0 0 * * *", "Nowhere/Town")


def _utc(
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    microsecond: int = 0,
) -> datetime:
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)


def test_parse_cached_returns_the_same_schedule_for_the_same_expression_and_zone() -> None:
    first = fleetcron.cron.parse_cached("0 2 * * *", "Europe/Berlin")

    assert fleetcron.cron.parse_cached("0 2 * * *", "Europe/Berlin") is first
    assert first == fleetcron.cron.parse("0 2 * * *", "Europe/Berlin")
