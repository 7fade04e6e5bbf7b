"""A job or a target may not be named after a page of the web's own: ``/jobs/new`` is the
form that adds a job (and ``/targets/new`` the one that adds a target), so a job named
``new`` would have no page. The one check in ``core/validation.py`` names the field, the
value and what is allowed; names that merely contain the word are accepted."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fleetcron.core import validation as v
from fleetcron.core.schedule_file import ScheduleFileError, parse_schedule_file
from fleetcron.errors import InvalidInput


@pytest.mark.parametrize("check", [v.validate_job_name, v.validate_target_name])
def test_new_is_refused_naming_the_field_the_value_and_what_is_allowed(
    check: Callable[..., str],
) -> None:
    with pytest.raises(InvalidInput) as caught:
        check("new", field="name")
    error = caught.value
    assert error.field == "name" and error.value == "new"
    assert error.message.startswith("name: 'new' is reserved (/")
    assert "/new is the form that adds a" in error.message
    assert "other than new" in error.message and v.NAME_RULE in error.message


@pytest.mark.parametrize("name", ["new-db", "news", "renew", "new.1", "new2"])
def test_a_name_that_only_contains_the_word_is_accepted(name: str) -> None:
    assert v.validate_job_name(name) == name
    assert v.validate_target_name(name) == name


def test_the_plain_name_rule_still_applies_first() -> None:
    with pytest.raises(InvalidInput, match="is not a valid name"):
        v.validate_job_name("New")


def test_the_other_names_keep_the_word() -> None:
    # negative control: users, tokens and channels have no page at /<kind>/new to hide
    assert v.validate_name("new") == "new"


def test_a_schedule_file_with_a_job_named_new_is_refused_at_its_line() -> None:
    text = "version: 1\njobs:\n  - name: new\n    bulk: true\n    schedule: '@daily'\n"
    text += "    command: 'true'\n"
    with pytest.raises(ScheduleFileError) as caught:
        parse_schedule_file(text, source="fleet.yaml")
    (problem,) = caught.value.problems
    assert problem.render("fleet.yaml").startswith("fleet.yaml:3: jobs[0].name: 'new' is reserved")
    assert parse_schedule_file(text.replace("name: new", "name: new-db")).names == {"new-db"}
