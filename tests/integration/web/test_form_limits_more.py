"""The rest of the forms never change what the user typed (issue 10, item 5): the target
form, the log-in form, the token and password forms; and one length limit per job field
(schedule, notes, command) that the web form, the API and the service all apply, with the
same message naming the field, the value's length and the limit.

Real form posts and API requests over HTTP to the real application. The tests that store a
schedule run on SQLite and PostgreSQL: the schedule column holds 255 characters.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from cli_env import point_the_cli_at
from fleetcron.app import Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core import validation as v
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.cron import parse
from fleetcron.errors import InvalidInput, NotFound
from fleetcron.services.accounts import users as users_svc
from fleetcron.services.jobs import edit as jobs_svc
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets_svc
from fleetcron.services.targets import reads as target_reads
from integration.web.conftest import (
    API,
    bearer,
    csrf_token_of,
    error_of,
    log_in,
    new_client,
    sqlite_only,
    token_for,
)
from integration.web.test_job_forms import counter, field_error, form_fields, input_value, textarea

ADMIN = Actor("admin", "admin")


@pytest.fixture
def operator_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "operator")
        yield client


@pytest.fixture
def admin_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "admin")
        yield client


def post(client: TestClient, url: str, **fields: str | list[str]) -> httpx.Response:
    response: httpx.Response = client.post(
        url, data={**fields, "csrf_token": csrf_token_of(client)}
    )
    return response


def too_long(field: str, length: int, limit: int) -> str:
    return f"{field}: is {length} characters long; at most {limit} are allowed"


def schedule_of(length: int) -> str:
    """A valid cron expression of exactly ``length`` characters (180 to 308): a list of every
    minute, padded with leading zeros, which cron reads as the same numbers."""
    fields = [[str(n) for n in range(60)]]

    def text() -> str:
        return " ".join(",".join(items) for items in fields) + " * * * *"

    assert len(text()) <= length, len(text())
    while len(text()) < length:
        items = next(items for items in fields if any(len(item) < 4 for item in items))
        index = next(i for i, item in enumerate(items) if len(item) < 4)
        items[index] = "0" + items[index]
    expression = text()
    assert len(expression) == length
    parse(expression, "UTC")  # the engine reads it (it takes up to 1000 characters)
    return expression


# -- the target form ----------------------------------------------------------------------

TARGET_FORM = {
    "name": "web-01",
    "kind": "ssh",
    "host": "web-01.example.com",
    "user": "deploy",
    "private_key": "not a key at all",
    "labels": "env=prod, role=web",
    "notes": "\nThe first line is empty on purpose.\r\nSecond line.",
}


def no_target(app: App, name: str = "web-01") -> bool:
    try:
        target_reads.show_target(app, ADMIN, name)
    except NotFound:
        return True
    return False


@sqlite_only
@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_a_typed_port_out_of_range_is_refused_beside_the_field_and_kept_as_typed(
    app: App, operator_browser: TestClient, port: str
) -> None:
    response = post(operator_browser, "/targets/new", **TARGET_FORM, port=port)
    assert response.status_code == 422, response.text
    assert field_error(response.text, "port") == f"port: {port} is out of range 1-65535"
    assert input_value(response.text, "port") == port
    assert input_value(response.text, "host") == TARGET_FORM["host"]
    assert input_value(response.text, "labels") == TARGET_FORM["labels"]
    assert textarea(response.text, "notes") == TARGET_FORM["notes"].replace("\r\n", "\n")
    assert no_target(app)


@sqlite_only
def test_an_empty_port_means_22_and_the_form_says_so(
    app: App, operator_browser: TestClient
) -> None:
    """The control of the test above: with the port left empty the port is accepted (the
    next check, of the key, refuses), so the port error there is the port's own."""
    page = operator_browser.get("/targets/new").text
    assert "1-65535; empty: 22" in html.unescape(page)
    response = post(operator_browser, "/targets/new", **TARGET_FORM, port="")
    assert response.status_code == 422, response.text
    assert field_error(response.text, "port") == ""
    assert field_error(response.text, "private_key") != ""
    assert input_value(response.text, "port") == ""
    assert no_target(app)


@sqlite_only
def test_target_notes_starting_with_a_line_break_keep_it_on_the_edit_form(
    app: App, operator_browser: TestClient
) -> None:
    notes = "\n\nindented below:\n  rack 4"
    targets_svc.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL, notes=notes))
    page = operator_browser.get("/targets/box/edit").text
    assert textarea(page, "notes") == notes
    assert counter(page, "notes")[1] == f"{len(notes)} / {v.NOTES_MAX_CHARS} characters"


@sqlite_only
def test_target_notes_over_the_limit_are_refused_on_the_form_the_api_and_the_service(
    app: App, operator_browser: TestClient, operator: Actor
) -> None:
    notes = "n" * (v.NOTES_MAX_CHARS + 1)
    expected = too_long("notes", v.NOTES_MAX_CHARS + 1, v.NOTES_MAX_CHARS)
    form = {**TARGET_FORM, "notes": notes, "port": "22"}
    response = post(operator_browser, "/targets/new", **form)
    assert response.status_code == 422, response.text
    assert field_error(response.text, "notes") == expected
    assert textarea(response.text, "notes") == notes
    assert counter(response.text, "notes") == (
        str(v.NOTES_MAX_CHARS),
        f"{len(notes)} / {v.NOTES_MAX_CHARS} characters: 1 too many",
    )
    assert no_target(app)

    answer = operator_browser.post(
        f"{API}/targets",
        json={"name": "web-02", "kind": "local", "notes": notes},
        headers=bearer(token_for(app, "admin")),
    )
    assert answer.status_code == 422, answer.text
    assert error_of(answer)["message"] == expected

    # the service (which the CLI calls) refuses on add and on edit, and a target at the
    # limit is kept whole
    with pytest.raises(InvalidInput, match=re.escape(expected)):
        targets_svc.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL, notes=notes))
    targets_svc.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL, notes=notes[:-1]))
    with pytest.raises(InvalidInput, match=re.escape(expected)):
        targets_svc.edit_target(app, ADMIN, "box", targets_svc.TargetChanges(notes=notes))
    assert target_reads.show_target(app, ADMIN, "box")[0].notes == notes[:-1]


# -- one limit per job field ----------------------------------------------------------------


def test_a_schedule_of_255_characters_is_saved_and_256_is_refused_everywhere(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    at_limit, over = schedule_of(v.SCHEDULE_MAX_CHARS), schedule_of(v.SCHEDULE_MAX_CHARS + 1)
    expected = too_long("schedule", len(over), v.SCHEDULE_MAX_CHARS)

    response = post(operator_browser, "/jobs/new", **form_fields(schedule=over))
    assert response.status_code == 422, response.text
    assert field_error(response.text, "schedule") == expected
    assert input_value(response.text, "schedule") == over
    assert counter(response.text, "schedule")[1] == f"{len(over)} / 255 characters: 1 too many"

    answer = operator_browser.post(
        f"{API}/jobs",
        json={"name": "api-job", "bulk": True, "schedule": over, "command": "/bin/true"},
        headers=bearer(token_for(app, "operator")),
    )
    assert answer.status_code == 422, answer.text
    assert error_of(answer) == {"code": "invalid", "message": expected, "field": "schedule"}

    with pytest.raises(InvalidInput, match=re.escape(expected)):
        jobs_svc.add_job(app, operator, "cli-job", JobSpec(over, "/bin/true"), bulk=True)
    assert {view.name for view in jobs_svc.list_jobs(app, operator)} == set()

    response = post(operator_browser, "/jobs/new", **form_fields(schedule=at_limit))
    assert response.status_code == 303, response.text
    assert jobs_svc.show_job(app, operator, "nightly-report").schedule == at_limit
    with pytest.raises(InvalidInput, match=re.escape(expected)):
        jobs_svc.edit_job(app, operator, "nightly-report", schedule=over)
    assert jobs_svc.show_job(app, operator, "nightly-report").schedule == at_limit


@sqlite_only
def test_job_notes_of_10000_characters_are_saved_and_10001_are_refused_everywhere(
    app: App, operator: Actor, operator_browser: TestClient
) -> None:
    limit = v.NOTES_MAX_CHARS
    notes = "\nwhy:\n" + "w" * (limit + 1 - 6)
    assert len(notes) == limit + 1
    expected = too_long("notes", limit + 1, limit)

    response = post(operator_browser, "/jobs/new", **form_fields(notes=notes))
    assert response.status_code == 422, response.text
    assert field_error(response.text, "notes") == expected
    assert textarea(response.text, "notes") == notes
    assert counter(response.text, "notes")[1] == f"{limit + 1} / {limit} characters: 1 too many"

    with pytest.raises(InvalidInput, match=re.escape(expected)):
        jobs_svc.add_job(
            app, operator, "cli-job", JobSpec("0 2 * * *", "/bin/true", notes=notes), bulk=True
        )
    assert jobs_svc.list_jobs(app, operator) == []

    response = post(operator_browser, "/jobs/new", **form_fields(notes=notes[:-1]))
    assert response.status_code == 303, response.text
    assert jobs_svc.show_job(app, operator, "nightly-report").notes == notes[:-1]

    answer = operator_browser.patch(
        f"{API}/jobs/nightly-report",
        json={"notes": notes},
        headers=bearer(token_for(app, "operator")),
    )
    assert answer.status_code == 422, answer.text
    assert error_of(answer) == {"code": "invalid", "message": expected, "field": "notes"}
    with pytest.raises(InvalidInput, match=re.escape(expected)):
        jobs_svc.edit_job(app, operator, "nightly-report", notes=notes)
    assert jobs_svc.show_job(app, operator, "nightly-report").notes == notes[:-1]


@sqlite_only
def test_the_job_form_counts_schedule_and_notes_against_the_servers_limits(
    operator_browser: TestClient,
) -> None:
    page = operator_browser.get("/jobs/new").text
    assert counter(page, "schedule") == (
        str(v.SCHEDULE_MAX_CHARS),
        f"0 / {v.SCHEDULE_MAX_CHARS} characters",
    )
    assert counter(page, "notes") == (str(v.NOTES_MAX_CHARS), f"0 / {v.NOTES_MAX_CHARS} characters")
    assert "maxlength" not in page


@sqlite_only
@pytest.mark.parametrize("length", [513, v.COMMAND_MAX_CHARS + 1])
def test_the_api_refuses_a_long_command_with_the_servers_setting_as_the_limit(
    app: App, operator_browser: TestClient, length: int
) -> None:
    """The API schema has no maximum of its own for a command: the limit is the
    ``command_max_length`` setting (512 here), whatever the length sent."""
    command = "/bin/echo " + "x" * (length - 10)
    answer = operator_browser.post(
        f"{API}/jobs",
        json={"name": "api-job", "bulk": True, "schedule": "0 2 * * *", "command": command},
        headers=bearer(token_for(app, "operator")),
    )
    assert answer.status_code == 422, answer.text
    assert error_of(answer) == {
        "code": "invalid",
        "message": too_long("command", length, app.settings.command_max_length),
        "field": "command",
    }


@sqlite_only
def test_the_cli_refuses_over_long_notes_and_schedules_with_the_same_message(
    app: App,
    operator: Actor,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_the_cli_at(app, monkeypatch)
    notes, over = "n" * (v.NOTES_MAX_CHARS + 1), schedule_of(v.SCHEDULE_MAX_CHARS + 1)
    job = ["job", "add", "cli-job", "--bulk", "--command", "/bin/true"]
    for args, message in (
        (
            [*job, "--schedule", "0 2 * * *", "--notes", notes],
            too_long("notes", len(notes), v.NOTES_MAX_CHARS),
        ),
        ([*job, "--schedule", over], too_long("schedule", len(over), v.SCHEDULE_MAX_CHARS)),
        (
            ["target", "add", "box", "--local", "--notes", notes],
            too_long("notes", len(notes), v.NOTES_MAX_CHARS),
        ),
    ):
        assert run_cli(cli, args) == 2
        _, err = capsys.readouterr()
        assert err.strip() == f"error: {message}", err
    assert jobs_svc.list_jobs(app, operator) == []
    assert no_target(app, "box")
    # the control: at the limits, the same commands succeed
    assert run_cli(cli, [*job, "--schedule", over[1:], "--notes", notes[1:]]) == 0, (
        capsys.readouterr()
    )
    assert jobs_svc.show_job(app, operator, "cli-job").notes == notes[1:]


# -- the log-in form ------------------------------------------------------------------------


def login_page(response: httpx.Response) -> tuple[str, str]:
    """(the message, the user name field's value) of a log-in form answer."""
    assert '<form method="post" action="/login">' in response.text, response.text
    assert "Error 422" not in response.text
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', response.text, re.S)
    assert found is not None, response.text
    return html.unescape(found.group(1)), input_value(response.text, "username")


@sqlite_only
@pytest.mark.parametrize(
    ("username", "password", "message"),
    [
        ("u" * 65, "operator-password", too_long("user", 65, 64) + "."),
        ("olivia", "p" * 1025, too_long("password", 1025, 1024) + "."),
    ],
)
def test_an_over_long_user_name_or_password_comes_back_on_the_log_in_form(
    app: App, username: str, password: str, message: str
) -> None:
    with new_client(app) as client:
        response = client.post("/login", data={"username": username, "password": password})
        assert response.status_code == 422
        assert login_page(response) == (message, username)
        assert password not in response.text  # the password is never sent back
        assert "fleetcron_session" not in response.cookies


@sqlite_only
def test_a_wrong_password_at_the_limits_is_an_ordinary_failed_log_in(app: App) -> None:
    """The control: at exactly 64 and 1024 characters the form is checked as usual."""
    with new_client(app) as client:
        response = client.post("/login", data={"username": "u" * 64, "password": "p" * 1024})
        assert response.status_code == 401
        assert login_page(response) == ("Unknown user or wrong password.", "u" * 64)
        assert input_value(client.get("/login").text, "username") == ""


@sqlite_only
@pytest.mark.parametrize(
    ("next_path", "landing"), [("/jobs", "/jobs"), ("/runs?q=" + "x" * 1993, "/")]
)
def test_an_over_long_next_path_logs_in_to_the_dashboard_instead_of_failing(
    app: App, next_path: str, landing: str
) -> None:
    with new_client(app) as client:
        response = client.post(
            "/login",
            data={"username": "olivia", "password": "operator-password", "next": next_path},
        )
        assert response.status_code == 303, response.text
        assert response.headers["location"] == landing


# -- the token form -------------------------------------------------------------------------


@sqlite_only
def test_the_token_expiry_shows_its_range_and_has_no_browser_pattern(
    admin_browser: TestClient,
) -> None:
    page = admin_browser.get("/tokens").text
    field = re.search(r'<input id="token-expires_in_days"[^>]*>', page)
    assert field is not None
    assert "pattern=" not in field.group(0)
    assert " min=" not in field.group(0) and " max=" not in field.group(0)
    assert f"1-{users_svc.MAX_TOKEN_DAYS} days" in page


@sqlite_only
@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("0", f"expires_in_days: 0 is out of range 1-{users_svc.MAX_TOKEN_DAYS}"),
        ("-5", f"expires_in_days: -5 is out of range 1-{users_svc.MAX_TOKEN_DAYS}"),
        ("3651", f"expires_in_days: 3651 is out of range 1-{users_svc.MAX_TOKEN_DAYS}"),
        ("30 days", "expires_in_days: '30 days' is not a whole number"),
    ],
)
def test_a_token_expiry_out_of_range_is_refused_with_the_range_and_kept_as_typed(
    app: App, admin: Actor, admin_browser: TestClient, typed: str, message: str
) -> None:
    response = post(admin_browser, "/tokens/new", name="backup-script", expires_in_days=typed)
    assert response.status_code == 422, response.text
    assert field_error(response.text, "expires_in_days", "token-").startswith(message)
    assert input_value(response.text, "expires_in_days") == typed
    assert input_value(response.text, "name") == "backup-script"
    assert users_svc.list_tokens(app, admin, "admin") == []


@sqlite_only
def test_a_token_expiry_at_the_limit_is_created_and_the_field_is_cleared(
    app: App, admin: Actor, admin_browser: TestClient
) -> None:
    days = str(users_svc.MAX_TOKEN_DAYS)
    response = post(admin_browser, "/tokens/new", name="backup-script", expires_in_days=days)
    assert response.status_code == 201, response.text
    assert input_value(response.text, "expires_in_days") == ""
    (token,) = users_svc.list_tokens(app, admin, "admin")
    assert token.expires_at is not None
    assert (token.expires_at - token.created_at).days == users_svc.MAX_TOKEN_DAYS


# -- the password fields ----------------------------------------------------------------------


@sqlite_only
@pytest.mark.parametrize(
    ("path", "field"), [("/users", "new-password"), ("/account", "acct-new_password")]
)
def test_the_password_fields_show_and_use_the_servers_limits(
    admin_browser: TestClient, path: str, field: str
) -> None:
    page = admin_browser.get(path).text
    tag = re.search(rf'<input id="{field}"[^>]*>', page)
    assert tag is not None
    assert f'minlength="{v.PASSWORD_MIN_CHARS}"' in tag.group(0)
    assert "maxlength" not in page
    assert f"{v.PASSWORD_MIN_CHARS}-{v.PASSWORD_MAX_CHARS} characters" in page


@sqlite_only
def test_a_new_users_password_over_the_limit_is_refused_beside_the_field(
    app: App, admin: Actor, admin_browser: TestClient
) -> None:
    response = post(
        admin_browser, "/users/new", name="new-user", role="viewer", password="p" * 1025
    )
    assert response.status_code == 422, response.text
    assert field_error(response.text, "password", "new-").startswith(
        "password: 1025 characters is longer than 1024"
    )
    assert input_value(response.text, "name") == "new-user"
    assert "new-user" not in {user.name for user in users_svc.list_users(app, admin)}


# -- the name fields ------------------------------------------------------------------------


@sqlite_only
@pytest.mark.parametrize(
    ("path", "url", "prefix", "fields"),
    [
        ("/targets/new", "/targets/new", "", {**TARGET_FORM, "port": "22"}),
        ("/users", "/users/new", "new-", {"role": "viewer", "password": "a-long-password"}),
        ("/tokens", "/tokens/new", "token-", {}),
    ],
)
def test_every_name_field_counts_against_the_name_limit_and_comes_back_over_it(
    admin_browser: TestClient, path: str, url: str, prefix: str, fields: dict[str, str]
) -> None:
    page = admin_browser.get(path).text
    assert counter(page, "name", prefix) == (
        str(v.NAME_MAX_CHARS),
        f"0 / {v.NAME_MAX_CHARS} characters",
    )
    name = "n" * (v.NAME_MAX_CHARS + 1)
    response = post(admin_browser, url, **{**fields, "name": name})
    assert response.status_code == 422, response.text
    assert field_error(response.text, "name", prefix).startswith(f"name: '{name}' is not a valid")
    assert input_value(response.text, "name") == name
    assert counter(response.text, "name", prefix)[1] == (
        f"{len(name)} / {v.NAME_MAX_CHARS} characters: 1 too many"
    )


# -- the pause reason -----------------------------------------------------------------------


@sqlite_only
def test_a_pause_reason_over_the_limit_comes_back_in_the_open_drawer_as_typed(
    app: App, operator_browser: TestClient
) -> None:
    targets_svc.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL))
    limit = targets_svc.PAUSE_REASON_MAX
    page = operator_browser.get("/targets/box").text
    assert counter(page, "reason", "pause-") == (str(limit), f"0 / {limit} characters")
    assert '<details class="drawer" id="pause-drawer">' in page
    reason = "replacing the disk in bay 4; " + "r" * (limit + 1 - 29)
    assert len(reason) == limit + 1

    response = post(operator_browser, "/targets/box/pause", reason=reason)
    assert response.status_code == 422, response.text
    assert '<details class="drawer" id="pause-drawer" open>' in response.text
    assert field_error(response.text, "reason", "pause-") == (
        f"reason: must be at most {limit} characters (got {limit + 1}); allowed: one line "
        f"of text without control characters, at most {limit} characters"
    )
    assert input_value(response.text, "reason") == reason
    assert counter(response.text, "reason", "pause-")[1] == (
        f"{limit + 1} / {limit} characters: 1 too many"
    )
    assert not target_reads.show_target(app, ADMIN, "box")[0].paused

    response = post(operator_browser, "/targets/box/pause", reason=reason[:-1])
    assert response.status_code == 303, response.text
    paused = target_reads.show_target(app, ADMIN, "box")[0]
    assert paused.paused and paused.paused_reason == reason[:-1]


@sqlite_only
def test_a_pause_reason_with_a_control_character_is_refused_naming_it(
    app: App, operator_browser: TestClient
) -> None:
    """A short reason holding a terminal escape is refused for the escape, not its length."""
    targets_svc.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL))
    reason = "maint \x1b]52;c;aGk=\x07 window"

    response = post(operator_browser, "/targets/box/pause", reason=reason)
    assert response.status_code == 422, response.text
    message = field_error(response.text, "reason", "pause-")
    assert message.startswith("reason: contains the control character '\\x1b' at position 7;")
    assert "without control characters" in message
    assert not target_reads.show_target(app, ADMIN, "box")[0].paused
