"""The one declaration of a job's options, and everything derived from it.

Every declared option must reach every place a job's options live: the CLI's ``job add``
and ``job edit``, the API's models, the schedule-file keys, the fields a job edit accepts,
the typed containers (``JobSpec``, ``JobView``, ``JobState``) and the ``jobs`` table. A bad
value is refused naming the field, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import click
import pytest

from fleetcron.cli.job_cmd import add as add_command
from fleetcron.cli.job_cmd import edit as edit_command
from fleetcron.core import job_options
from fleetcron.core import validation as v
from fleetcron.core.job_options import (
    BY_KEY,
    FORM_OPTIONS,
    OPTIONS,
    JobOption,
    check_job,
    check_option,
    check_options,
)
from fleetcron.core.schedule_file import JOB_KEYS, SPEC_FIELDS, JobState
from fleetcron.errors import InvalidInput
from fleetcron.services.jobs.edit import EDITABLE, JobSpec, JobView
from fleetcron.store.schema import Job
from fleetcron.web.schemas import JobIn, JobOut, JobPatch

NAMES = [o.name for o in OPTIONS]


def missing(options: Iterable[JobOption], have: Collection[str], *, by: str = "name") -> list[str]:
    """The options whose ``by`` attribute is not among ``have``."""
    return [getattr(o, by) for o in options if getattr(o, by) not in have]


def flags_of(command: click.Command) -> dict[str, list[str]]:
    return {p.name: list(p.opts) for p in command.params if p.name is not None}


# --- every option reaches every place ----------------------------------------------------


def test_the_checker_finds_an_option_that_is_missing_somewhere() -> None:
    # negative control: an option declared but given no field is reported
    ghost = dataclasses.replace(OPTIONS[0], name="ghost_s", key="ghost")

    assert missing([*OPTIONS, ghost], {f.name for f in dataclasses.fields(JobSpec)}) == [
        "ghost_s"
    ]


def test_names_keys_and_flags_are_unique() -> None:
    assert len(set(NAMES)) == len(OPTIONS)
    assert len({o.key for o in OPTIONS}) == len(OPTIONS)
    assert len({o.flag for o in OPTIONS}) == len(OPTIONS)


def test_every_option_has_a_flag_on_job_add_and_job_edit() -> None:
    for command in (add_command, edit_command):
        flags = flags_of(command)
        assert missing(OPTIONS, flags) == [], command.name
        for o in OPTIONS:
            assert o.flag in flags[o.name], (command.name, o.name)


def test_job_add_requires_what_a_job_needs_and_job_edit_requires_nothing() -> None:
    add_required = {p.name for p in add_command.params if p.required}
    edit_required = {p.name for p in edit_command.params if p.required}

    assert {o.name for o in OPTIONS if o.required} <= add_required
    assert edit_required == {"name"}


def test_every_option_is_a_field_of_the_api_models() -> None:
    assert missing(OPTIONS, JobIn.model_fields) == []
    assert missing(OPTIONS, JobPatch.model_fields) == []
    assert missing(OPTIONS, JobOut.model_fields) == []
    assert all(not JobPatch.model_fields[name].is_required() for name in NAMES)


def test_the_api_models_carry_the_declared_bounds_and_defaults() -> None:
    schema = JobIn.model_json_schema()["properties"]
    for o in OPTIONS:
        field = schema[o.name]
        if o.kind == "int" and o.default is not None:
            assert (field["minimum"], field["maximum"]) == (o.low, o.high), o.name
        if o.kind == "choice":
            assert field["enum"] == list(o.choices), o.name
        if not o.required and o.default is not None and o.kind != "choices":
            assert field["default"] == o.default, o.name


def test_every_option_is_a_schedule_file_key_and_editable() -> None:
    assert missing(OPTIONS, JOB_KEYS, by="key") == []
    assert missing(OPTIONS, SPEC_FIELDS, by="key") == []
    assert missing(OPTIONS, EDITABLE) == []


def test_every_option_has_a_typed_field_in_each_container_and_a_column() -> None:
    assert missing(OPTIONS, {f.name for f in dataclasses.fields(JobSpec)}) == []
    assert missing(OPTIONS, {f.name for f in dataclasses.fields(JobView)}) == []
    assert missing(OPTIONS, {f.name for f in dataclasses.fields(JobState)}, by="key") == []
    assert missing(OPTIONS, set(Job.__table__.columns.keys())) == []


def test_the_job_spec_defaults_are_the_declared_ones() -> None:
    spec = dataclasses.asdict(JobSpec(schedule="* * * * *", command="true"))

    for o in OPTIONS:
        if not o.required:
            assert o.plain(spec[o.name]) == o.plain(o.default), o.name


def test_the_form_shows_the_run_options_and_draws_numbers_texts_and_choices() -> None:
    shown = {o.key for o in FORM_OPTIONS}

    assert {"timeout", "overlap", "catchup", "jitter", "retries", "retry_on"} <= shown
    assert {"schedule", "command", "allow_duplicate"}.isdisjoint(shown)
    assert {o.kind for o in FORM_OPTIONS} <= {"int", "text", "choice", "choices"}


def test_the_limits_are_the_validation_constants() -> None:
    assert BY_KEY["jitter"].high == v.MAX_JITTER_S
    assert BY_KEY["timeout"].high == v.MAX_TIMEOUT_S
    assert BY_KEY["retries"].high == v.MAX_RETRIES
    assert BY_KEY["retry_backoff"].high == v.MAX_RETRY_BACKOFF_S


# --- a bad value names the field, the value and what is allowed ---------------------------


def refusal(option: JobOption, value: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        check_option(option, value)
    return caught.value


@pytest.mark.parametrize("o", [o for o in OPTIONS if o.kind == "int"], ids=lambda o: o.key)
def test_a_number_outside_its_range_is_refused_naming_field_value_and_range(o: JobOption) -> None:
    assert o.low is not None and o.high is not None
    assert check_option(o, o.low) == o.low
    assert check_option(o, o.high) == o.high
    for value in (o.low - 1, o.high + 1):
        error = refusal(o, value)
        assert error.message == f"{o.key}: {value} is out of range {o.low}-{o.high}"
        assert (error.field, error.value, error.allowed) == (o.key, value, f"{o.low}-{o.high}")


@pytest.mark.parametrize("o", [o for o in OPTIONS if o.kind == "int"], ids=lambda o: o.key)
def test_a_number_that_is_not_a_whole_number_is_refused(o: JobOption) -> None:
    for value in ("5", 2.5, True):
        error = refusal(o, value)
        assert error.message == f"{o.key}: {value!r} is not a whole number"
        assert error.field == o.key


@pytest.mark.parametrize(
    "o", [o for o in OPTIONS if o.kind in ("choice", "choices")], ids=lambda o: o.key
)
def test_an_unknown_choice_is_refused_listing_the_choices(o: JobOption) -> None:
    value: Any = "sometimes" if o.kind == "choice" else [o.choices[0], "sometimes"]
    error = refusal(o, value)

    assert error.message == f"{o.key}: 'sometimes' is not one of {', '.join(o.choices)}"
    assert (error.field, error.value, error.allowed) == (o.key, "sometimes", ", ".join(o.choices))


def test_a_list_of_choices_is_normalized_to_a_list() -> None:
    assert check_option(BY_KEY["retry_on"], ("failed", "timed_out")) == ["failed", "timed_out"]


def test_a_flag_must_be_true_or_false() -> None:
    error = refusal(BY_KEY["allow_duplicate"], "yes")

    assert error.message == "allow_duplicate: 'yes' is not true or false"


def test_a_text_over_its_limit_is_refused_never_cut() -> None:
    error = refusal(BY_KEY["notes"], "n" * (v.NOTES_MAX_CHARS + 1))

    assert error.message == (
        f"notes: is {v.NOTES_MAX_CHARS + 1} characters long; at most {v.NOTES_MAX_CHARS} "
        "are allowed"
    )


def test_an_option_a_setting_fills_in_may_be_left_unset() -> None:
    assert check_option(BY_KEY["timeout"], None) is None
    assert check_option(BY_KEY["timezone"], None) is None
    with pytest.raises(InvalidInput):
        check_option(BY_KEY["jitter"], None)


def test_check_options_checks_declared_names_and_passes_the_rest() -> None:
    assert check_options({"jitter_s": 5, "selector": "env=prod"}) == {
        "jitter_s": 5,
        "selector": "env=prod",
    }
    with pytest.raises(InvalidInput, match=r"^retries: 11 is out of range 0-10$"):
        check_options({"retries": 11})


def test_an_extra_rule_runs_after_the_table_and_may_normalize() -> None:
    upper = dataclasses.replace(BY_KEY["notes"], check=str.upper)

    assert check_option(upper, "quiet") == "QUIET"


def test_check_job_runs_every_rule_over_several_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def no_retries_without_backoff(values: Mapping[str, Any]) -> None:
        seen.append(dict(values))
        if values["retries"] and values["retry_backoff_s"] < 5:
            raise InvalidInput("retry_backoff: too short", field="retry_backoff")

    monkeypatch.setattr(job_options, "JOB_RULES", (no_retries_without_backoff,))

    check_job({"retries": 0, "retry_backoff_s": 1})
    with pytest.raises(InvalidInput, match=r"^retry_backoff: too short$"):
        check_job({"retries": 2, "retry_backoff_s": 1})
    assert len(seen) == 2
