"""Target labels and the label selectors of bulk jobs."""

from __future__ import annotations

import pytest

from fleetcron.core.labels import (
    format_selector,
    parse_label,
    parse_labels,
    parse_selector,
    selector_matches,
)
from fleetcron.errors import InvalidInput


def test_it_splits_a_label_into_key_and_value() -> None:
    assert parse_label("env=prod") == ("env", "prod")


def test_it_strips_spaces_around_key_and_value() -> None:
    assert parse_label(" role = pbx ") == ("role", "pbx")


def test_it_accepts_dots_slashes_and_dashes_in_a_key() -> None:
    assert parse_label("example.com/tier-1=gold") == ("example.com/tier-1", "gold")


def test_it_rejects_a_label_without_an_equals_sign() -> None:
    with pytest.raises(InvalidInput, match=r'^label: "env" is not key=value$') as info:
        parse_label("env")
    assert (info.value.field, info.value.value, info.value.allowed) == ("label", "env", "key=value")


@pytest.mark.parametrize("key", ["Env", "-env", "", "e nv", "k" * 64])
def test_it_rejects_a_bad_key_and_says_what_keys_may_hold(key: str) -> None:
    with pytest.raises(InvalidInput, match="allowed: lowercase letters") as info:
        parse_label(f"{key}=x")
    assert info.value.field == "label"


def test_it_accepts_a_key_of_63_characters() -> None:
    assert parse_label("k" * 63 + "=x") == ("k" * 63, "x")


@pytest.mark.parametrize("value", ["two words", "a,b", "v" * 64, "é"])
def test_it_rejects_a_bad_value_and_names_its_key(value: str) -> None:
    with pytest.raises(InvalidInput, match=f'value "{value}" of "env" is not valid'):
        parse_label(f"env={value}")


def test_it_names_the_field_it_was_given_in_errors() -> None:
    with pytest.raises(InvalidInput, match=r"^selector: ") as info:
        parse_label("env", field="selector")
    assert info.value.field == "selector"


def test_it_collects_several_labels() -> None:
    assert parse_labels(["env=prod", "role=pbx"]) == {"env": "prod", "role": "pbx"}


def test_it_rejects_a_key_given_twice_with_different_values() -> None:
    with pytest.raises(InvalidInput, match=r"\"env\" is given twice \('prod' and 'dev'\)"):
        parse_labels(["env=prod", "env=dev"])


def test_it_accepts_a_label_repeated_with_the_same_value() -> None:
    assert parse_labels(["env=prod", "env=prod"]) == {"env": "prod"}


def test_it_parses_a_selector_of_comma_separated_pairs() -> None:
    assert parse_selector("env=prod,role=pbx") == {"env": "prod", "role": "pbx"}


@pytest.mark.parametrize("text", [None, "", "   "])
def test_an_empty_selector_selects_everything(text: str | None) -> None:
    assert parse_selector(text) == {}


def test_it_rejects_a_selector_pair_without_a_value_naming_the_selector() -> None:
    with pytest.raises(InvalidInput, match=r'^selector: "env" is not key=value$') as info:
        parse_selector("env")
    assert info.value.field == "selector"


def test_it_formats_a_selector_sorted_by_key() -> None:
    assert format_selector({"role": "pbx", "env": "prod"}) == "env=prod,role=pbx"


def test_a_formatted_selector_parses_back_to_itself() -> None:
    selector = {"env": "prod", "role": "pbx", "example.com/tier": "gold"}
    assert parse_selector(format_selector(selector)) == selector


def test_the_empty_selector_matches_every_target() -> None:
    assert selector_matches({}, {})
    assert selector_matches({}, {"env": "prod"})


def test_a_selector_matches_a_target_that_has_all_its_pairs() -> None:
    assert selector_matches(
        {"env": "prod", "role": "pbx"}, {"env": "prod", "role": "pbx", "x": "y"}
    )


def test_a_selector_does_not_match_when_one_pair_differs() -> None:
    assert not selector_matches({"env": "prod", "role": "pbx"}, {"env": "prod", "role": "web"})


def test_a_selector_does_not_match_a_target_without_its_key() -> None:
    assert not selector_matches({"env": "prod", "role": "pbx"}, {"env": "prod"})
