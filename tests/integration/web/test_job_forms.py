"""The job forms never change what the user typed (issue 10, item 5).

Real form posts over HTTP to the real application (SQLite and PostgreSQL): a value within the
server's limit is saved exactly as typed; one over it is refused with the server's own
message beside the field, and the form comes back with every field as it was sent. Nothing
in the page cuts a value short (no ``maxlength``): the limit is shown and counted instead.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core import validation as v
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import NotFound
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets_svc
from integration.web.conftest import csrf_token_of, log_in, new_client, sqlite_only

#: the default of FLEETCRON_COMMAND_MAX_LENGTH, and a larger configured one
DEFAULT_MAX = 512
CONFIGURED_MAX = 1000


def long_command(length: int) -> str:
    """A shell command of exactly ``length`` characters whose end matters: cut anywhere, it
    would delete something else."""
    tail = " && rm -rf /var/spool/fleetcron-test/tmp-*"
    head = "/usr/local/bin/report --line 'a\"b' --to ops@example.com"
    body = length - len(head) - len(tail)
    assert body > 0
    return head + " #" + "x" * (body - 2) + tail


def with_limit(app: App, limit: int) -> None:
    if app.settings.command_max_length != limit:
        app.settings = app.settings.model_copy(update={"command_max_length": limit})


@pytest.fixture
def operator_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "operator")
        yield client


def form_fields(**overrides: str) -> dict[str, str | list[str]]:
    fields: dict[str, str | list[str]] = {
        "name": "nightly-report",
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "command": "/usr/local/bin/report",
        "notes": "why: the auditors\nwho: ops",
        "selector": "",
        "timeout": "120",
        "overlap": "forbid",
        "catchup": "latest",
        "jitter": "7",
        "retries": "2",
        "retry_on": ["connect_error", "timed_out"],
        "retry_backoff": "45",
    }
    fields.update(overrides)
    return fields


def post(client: TestClient, url: str, fields: dict[str, str | list[str]]) -> httpx.Response:
    response: httpx.Response = client.post(
        url, data={**fields, "csrf_token": csrf_token_of(client)}
    )
    return response


def textarea(page: str, name: str) -> str:
    """A textarea's value as a browser reads it: the one line break right after the opening
    tag is dropped, the rest unescaped."""
    found = re.search(rf'<textarea[^>]* name="{name}"[^>]*>(.*?)</textarea>', page, re.S)
    assert found is not None, f"no textarea {name}"
    raw = found.group(1)
    return html.unescape(raw[1:] if raw.startswith("\n") else raw)


def input_value(page: str, name: str) -> str:
    found = re.search(rf'<input[^>]* name="{name}"[^>]* value="([^"]*)"', page)
    assert found is not None, f"no input {name}"
    return html.unescape(found.group(1))


def field_error(page: str, field: str, prefix: str = "") -> str:
    found = re.search(rf'<p class="field-error" id="{prefix}{field}-error">(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else ""


def counter(page: str, field: str, prefix: str = "") -> tuple[str, str]:
    found = re.search(
        rf'<p class="counter( over)?" id="{prefix}{field}-count" '
        rf'data-counter-for="{prefix}{field}" data-limit="(\d+)">(.*?)</p>',
        page,
    )
    assert found is not None, f"no counter for {field}"
    return found.group(2), found.group(3)


def stored_command(app: App, operator: Actor, name: str) -> str:
    return jobs_svc.show_job(app, operator, name).command


# -- the command: saved whole, or refused with the server's message ------------------------


def test_a_600_character_command_is_saved_whole_when_the_server_allows_it(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    with_limit(app, CONFIGURED_MAX)
    command = long_command(600)
    response = post(operator_browser, "/jobs/new", form_fields(command=command))
    assert response.status_code == 303, response.text
    assert stored_command(app, operator, "nightly-report") == command


@pytest.mark.parametrize("limit", [DEFAULT_MAX, CONFIGURED_MAX])
def test_a_command_of_exactly_the_limit_is_saved_whole(
    app: App, operator: Actor, operator_browser: TestClient, limit: int
) -> None:
    with_limit(app, limit)
    command = long_command(limit)
    response = post(operator_browser, "/jobs/new", form_fields(command=command))
    assert response.status_code == 303, response.text
    assert stored_command(app, operator, "nightly-report") == command


@pytest.mark.parametrize("limit", [DEFAULT_MAX, CONFIGURED_MAX])
def test_a_command_one_over_the_limit_is_refused_beside_the_field_with_the_form_kept(
    app: App, operator: Actor, operator_browser: TestClient, limit: int
) -> None:
    with_limit(app, limit)
    command = long_command(limit + 1)
    sent = form_fields(command=command)
    response = post(operator_browser, "/jobs/new", sent)
    assert response.status_code == 422
    page = response.text
    assert field_error(page, "command") == (
        f"command: is {limit + 1} characters long; at most {limit} are allowed"
    )
    assert "The form was not saved; see the marked field." in page
    # every field as it was sent
    assert textarea(page, "command") == command
    assert textarea(page, "notes") == sent["notes"]
    for name in ("name", "schedule", "timezone", "timeout", "jitter", "retries", "retry_backoff"):
        assert input_value(page, name) == sent[name], name
    assert re.search(r'<option value="forbid" selected>', page)
    assert re.search(r'<option value="latest" selected>', page)
    assert re.search(r'name="retry_on" value="timed_out" checked', page)
    assert not re.search(r'name="retry_on" value="failed" checked', page)
    assert counter(page, "command") == (str(limit), f"{limit + 1} / {limit} characters: 1 too many")
    with pytest.raises(NotFound):
        jobs_svc.show_job(app, operator, "nightly-report")


@sqlite_only
@pytest.mark.parametrize("limit", [DEFAULT_MAX, CONFIGURED_MAX])
def test_the_form_shows_the_servers_limit_and_cuts_nothing(
    app: App, operator_browser: TestClient, limit: int
) -> None:
    with_limit(app, limit)
    page = operator_browser.get("/jobs/new").text
    assert "maxlength" not in page
    assert f"at most {limit} characters" in page
    assert counter(page, "command") == (str(limit), f"0 / {limit} characters")
    assert counter(page, "name") == ("64", "0 / 64 characters")


def test_editing_a_job_with_a_command_over_the_limit_keeps_the_stored_one_and_the_typed_one(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    jobs_svc.add_job(app, operator, "report", JobSpec("0 2 * * *", "/bin/old"), bulk=True)
    command = long_command(DEFAULT_MAX + 1)
    fields = form_fields(command=command)
    del fields["name"]
    response = post(operator_browser, "/jobs/report/edit", fields)
    assert response.status_code == 422
    assert field_error(response.text, "command").startswith(
        f"command: is {DEFAULT_MAX + 1} characters long"
    )
    assert textarea(response.text, "command") == command
    assert stored_command(app, operator, "report") == "/bin/old"
    # and within the limit the edit saves it whole
    command = long_command(DEFAULT_MAX)
    fields["command"] = command
    assert post(operator_browser, "/jobs/report/edit", fields).status_code == 303
    assert stored_command(app, operator, "report") == command


@sqlite_only
def test_the_individual_job_form_on_a_target_page_refuses_and_keeps_a_long_command(
    app: App, admin: Actor, operator_browser: TestClient
) -> None:
    targets_svc.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    command = long_command(DEFAULT_MAX + 1)
    fields = form_fields(command=command)
    del fields["selector"]
    response = post(operator_browser, "/targets/box/jobs", fields)
    assert response.status_code == 422
    page = response.text
    assert field_error(page, "command", "new-").startswith(
        f"command: is {DEFAULT_MAX + 1} characters long"
    )
    assert textarea(page, "command") == command
    assert counter(page, "command", "new-")[1].endswith("1 too many")


@sqlite_only
def test_a_command_starting_with_a_line_break_keeps_it_on_the_edit_form(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    # a browser posts textarea line breaks as CRLF; the server stores them as LF
    typed = "\r\nset -e\r\n/usr/local/bin/a &&\r\n  /usr/local/bin/b\r\n"
    response = post(operator_browser, "/jobs/new", form_fields(command=typed))
    assert response.status_code == 303, response.text
    stored = stored_command(app, operator, "nightly-report")
    assert stored == typed.replace("\r\n", "\n")
    page = operator_browser.get("/jobs/nightly-report/edit").text
    assert textarea(page, "command") == stored  # the leading line break survives a re-render
    assert counter(page, "command")[1] == f"{len(stored)} / {DEFAULT_MAX} characters"


# -- the other fields: the form's limits are the server's ------------------------------------


@sqlite_only
def test_a_name_of_64_characters_is_saved_and_65_is_refused_beside_the_field(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    name = "n" * 65
    response = post(operator_browser, "/jobs/new", form_fields(name=name))
    assert response.status_code == 422
    assert field_error(response.text, "name").startswith(f"name: '{name}' is not a valid name")
    assert input_value(response.text, "name") == name
    assert counter(response.text, "name")[1] == "65 / 64 characters: 1 too many"
    response = post(operator_browser, "/jobs/new", form_fields(name=name[:64]))
    assert response.status_code == 303, response.text
    assert jobs_svc.show_job(app, operator, name[:64]).name == name[:64]


NUMBER_FIELDS = [
    # form field, lowest, highest
    ("timeout", 1, v.MAX_TIMEOUT_S),
    ("jitter", 0, v.MAX_JITTER_S),
    ("retries", 0, v.MAX_RETRIES),
    ("retry_backoff", 1, 3600),
]


@sqlite_only
@pytest.mark.parametrize(("field", "low", "high"), NUMBER_FIELDS)
def test_number_fields_accept_their_range_and_refuse_beyond_it_as_the_help_says(
    app: App, operator: Actor, operator_browser: TestClient, field: str, low: int, high: int
) -> None:
    page = operator_browser.get("/jobs/new").text
    help_text = re.search(rf'id="{field}-help">([^<]*)<', page)
    assert help_text is not None and help_text.group(1).startswith(f"{low}-{high}")
    for value in (low - 1, high + 1):
        response = post(operator_browser, "/jobs/new", form_fields(**{field: str(value)}))
        assert response.status_code == 422, (field, value)
        assert f"{value} is out of range {low}-{high}" in field_error(response.text, field)
        assert input_value(response.text, field) == str(value)
    for index, value in enumerate((low, high)):
        name = f"{field.replace('_', '-')}-{index}"
        response = post(
            operator_browser, "/jobs/new", form_fields(name=name, **{field: str(value)})
        )
        assert response.status_code == 303, response.text


@sqlite_only
def test_a_typed_zero_backoff_is_refused_not_replaced_by_the_default(
    operator_browser: TestClient,
) -> None:
    response = post(operator_browser, "/jobs/new", form_fields(retry_backoff="0"))
    assert response.status_code == 422
    assert "retry_backoff: 0 is out of range 1-3600" in field_error(response.text, "retry_backoff")


@sqlite_only
@pytest.mark.parametrize("typed", ["1_000", "\u0663", "\uff15", "5s", "2.5"])
def test_numbers_are_ascii_digits_only(operator_browser: TestClient, typed: str) -> None:
    # int() would read "1_000" as 1000 and "٣" as 3: a number the user never typed
    response = post(operator_browser, "/jobs/new", form_fields(jitter=typed))
    assert response.status_code == 422
    assert field_error(response.text, "jitter") == f"jitter: {typed!r} is not a whole number"
    assert input_value(response.text, "jitter") == typed


@sqlite_only
def test_a_number_with_thousands_of_digits_is_refused_without_a_server_error(
    operator_browser: TestClient,
) -> None:
    response = post(operator_browser, "/jobs/new", form_fields(timeout="9" * 5000))
    assert response.status_code == 422
    assert "far too large" in field_error(response.text, "timeout")


@sqlite_only
def test_emptying_the_timeout_and_zone_on_the_edit_form_saves_the_defaults_it_shows(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    spec = JobSpec("0 2 * * *", "/bin/true", timezone="Asia/Tokyo", timeout_s=900)
    jobs_svc.add_job(app, operator, "report", spec, bulk=True)
    page = operator_browser.get("/jobs/report/edit").text
    default = app.settings.job_timeout_s
    assert f"empty: {default}" in page
    fields = form_fields(command="/bin/true", timeout="", timezone="")
    del fields["name"]
    assert post(operator_browser, "/jobs/report/edit", fields).status_code == 303
    view = jobs_svc.show_job(app, operator, "report")
    assert (view.timeout_s, view.timezone) == (default, app.settings.timezone)
