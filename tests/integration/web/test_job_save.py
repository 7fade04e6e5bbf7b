"""Saving the job edit form is one transaction, on SQLite and PostgreSQL: the changed fields
and the changed per-target checkboxes are saved together, audited as one ``job.edit``
event naming both, or, when the save is refused, not at all."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent
from integration.web.conftest import ACCOUNTS, csrf_token_of, log_in, new_client

NAMES = ("alpha", "bravo", "charlie")
OPERATOR = ACCOUNTS["operator"][0]


@pytest.fixture
def browser(app: App) -> Iterator[TestClient]:
    admin = Actor("admin", "admin")
    for name in NAMES:
        labels = ["tier=edge"] if name != "charlie" else []
        targets.add_target(app, admin, TargetSpec(name, TargetKind.LOCAL, labels=labels))
    jobs.add_job(app, admin, "reload", JobSpec("0 2 * * *", "reload", notes="old"), bulk=True)
    with new_client(app) as client:
        log_in(client, "operator")
        yield client


def edit_form(**overrides: str | list[str]) -> dict[str, str | list[str]]:
    fields: dict[str, str | list[str]] = {
        "schedule": "0 2 * * *",
        "timezone": "UTC",
        "command": "reload",
        "notes": "old",
        "selector": "",
        "timeout": "",
        "overlap": "allow",
        "catchup": "none",
        "jitter": "0",
        "spread": "0",
        "retries": "0",
        "retry_on": ["connect_error"],
        "retry_backoff": "30",
        "picker": list(NAMES),
        "enabled_on": list(NAMES),
    }
    fields.update(overrides)
    return fields


def save(browser: TestClient, fields: dict[str, str | list[str]]) -> tuple[int, str]:
    response = browser.post(
        "/jobs/reload/edit", data={**fields, "csrf_token": csrf_token_of(browser)}
    )
    return response.status_code, response.text


def flags(app: App) -> dict[str, bool]:
    view = jobs.show_job(app, Actor("admin", "admin"), "reload")
    return {a.target: a.enabled for a in view.assignments}


def job_events(app: App) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent)
                .where(AuditEvent.action.like("job.%"), AuditEvent.actor == OPERATOR)
                .order_by(AuditEvent.id)
            )
        )


def test_fields_and_checkboxes_are_saved_together_as_one_audited_edit(
    app: App, browser: TestClient
) -> None:
    status, _ = save(browser, edit_form(notes="new", enabled_on=["alpha", "charlie"]))

    assert status == 303
    assert flags(app) == {"alpha": True, "bravo": False, "charlie": True}
    assert jobs.show_job(app, Actor("admin", "admin"), "reload").notes == "new"
    events = job_events(app)
    assert [(e.action, e.success) for e in events] == [("job.edit", True)]
    assert events[0].detail["changed"] == ["notes"]
    assert events[0].detail["enabled_on"] == {"bravo": False}


def test_only_checkboxes_changed_is_one_edit_too(app: App, browser: TestClient) -> None:
    status, _ = save(browser, edit_form(enabled_on=["alpha"]))

    assert status == 303
    assert flags(app) == {"alpha": True, "bravo": False, "charlie": False}
    events = job_events(app)
    assert [e.action for e in events] == ["job.edit"]
    assert events[0].detail["enabled_on"] == {"bravo": False, "charlie": False}


def test_a_refused_save_keeps_every_checkbox_as_it_was(app: App, browser: TestClient) -> None:
    # another job already runs this command on every target: the duplicate registration
    # is found after the flags were set in the same transaction, so nothing stays
    jobs.add_job(app, Actor("admin", "admin"), "other", JobSpec("0 3 * * *", "taken"), bulk=True)

    status, page = save(browser, edit_form(command="taken", enabled_on=["alpha"]))

    assert status == 422
    assert "duplicate registration" in page
    assert flags(app) == dict.fromkeys(NAMES, True)
    assert jobs.show_job(app, Actor("admin", "admin"), "reload").command == "reload"
    assert [(e.action, e.success) for e in job_events(app)] == [("job.edit", False)]


def test_nothing_changed_saves_nothing_and_says_so(app: App, browser: TestClient) -> None:
    response = browser.post(
        "/jobs/reload/edit",
        data={**edit_form(), "csrf_token": csrf_token_of(browser)},
        follow_redirects=True,
    )

    assert response.status_code == 200
    assert re.search(r"Nothing changed in job reload", response.text)
    assert job_events(app) == []


def test_a_new_selector_and_a_changed_box_of_a_target_it_drops_save_in_one_go(
    app: App, browser: TestClient
) -> None:
    # charlie loses the label match: its unchecked box goes with it, bravo's counts
    status, _ = save(browser, edit_form(selector="tier=edge", enabled_on=["alpha"]))

    assert status == 303
    assert flags(app) == {"alpha": True, "bravo": False}
    events = job_events(app)
    assert [e.action for e in events] == ["job.edit"]
    assert events[0].detail["enabled_on"] == {"bravo": False}
    assert events[0].detail["removed"] == 1
