"""/api/v1/blackouts: roles, CSRF, the audit, and bad input refused naming the field with
nothing saved. The app's clock reads 2026-03-02 09:00:30 UTC."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Blackout
from integration.web.conftest import API, csrf_token_of, error_of, sqlite_only

pytestmark = sqlite_only

WINDOW: dict[str, Any] = {
    "name": "patch",
    "reason": "kernel",
    "job": "backup",
    "zone": "Europe/Warsaw",
    "start": "2026-03-02 22:00",
    "end": "2026-03-03 02:00",
}


@pytest.fixture
def fleet(app: App) -> None:
    admin = Actor("admin", "admin")
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL, labels=["rack=r12"]))
    jobs.add_job(app, admin, "backup", JobSpec("0 2 * * *", "backup"), target="web1")


def windows(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(Blackout)) or 0)


def test_an_operator_adds_changes_and_lifts_a_window_a_viewer_reads_it(
    app: App,
    client: TestClient,
    fleet: None,
    as_operator: dict[str, str],
    as_viewer: dict[str, str],
) -> None:
    refused = client.post(f"{API}/blackouts", json=WINDOW, headers=as_viewer)
    added = client.post(f"{API}/blackouts", json=WINDOW, headers=as_operator)
    assert refused.status_code == 403
    assert added.status_code == 201, added.text
    wid = added.json()["id"]
    assert added.json()["when"] == "2026-03-02 22:00 to 2026-03-03 02:00 (Europe/Warsaw)"

    changed = client.put(
        f"{API}/blackouts/{wid}", json={**WINDOW, "end": "2026-03-03 04:00"}, headers=as_operator
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["end"] == "2026-03-03T04:00:00"
    shown = client.get(f"{API}/blackouts/{wid}", headers=as_viewer).json()
    assert shown["updated_by"] == "olivia"

    lifted = client.post(
        f"{API}/blackouts/{wid}/lift", json={"reason": "done"}, headers=as_operator
    )
    assert lifted.status_code == 200 and lifted.json()["active"] is False
    assert client.get(f"{API}/blackouts", headers=as_viewer).json() == []
    assert len(client.get(f"{API}/blackouts?ended=true", headers=as_viewer).json()) == 1
    with app.db.read() as session:
        actions = session.scalars(
            select(AuditEvent.action)
            .where(AuditEvent.action.like("blackout.%"), AuditEvent.success.is_(True))
            .order_by(AuditEvent.id)
        ).all()
    assert actions == ["blackout.add", "blackout.change", "blackout.lift"]


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"zone": "Mars/Olympus"}, 422, "zone"),
        ({"end": "2026-03-02 21:00"}, 422, "end"),
        ({"job": "nosuch"}, 404, "job"),
        ({"start": None, "end": None, "cron": "0 2 * * *", "duration_s": 90000}, 422, "duration"),
        ({"start": None, "end": None, "weekly": "sat 22", "duration_s": 3600}, 422, "weekly"),
        ({"reason": " "}, 422, "reason"),
    ],
)
def test_bad_input_is_a_json_error_naming_the_field_with_nothing_saved(
    app: App,
    client: TestClient,
    fleet: None,
    as_operator: dict[str, str],
    change: dict[str, Any],
    status: int,
    field: str,
) -> None:
    answer = client.post(f"{API}/blackouts", json={**WINDOW, **change}, headers=as_operator)

    assert answer.status_code == status, answer.text
    assert error_of(answer)["field"] == field
    assert windows(app) == 0


def test_a_browser_needs_the_csrf_token_to_add_a_window(
    app: App, browser: TestClient, fleet: None
) -> None:
    without = browser.post(f"{API}/blackouts", json=WINDOW)
    with_token = browser.post(
        f"{API}/blackouts", json=WINDOW, headers={"X-CSRF-Token": csrf_token_of(browser)}
    )

    assert without.status_code == 403
    assert with_token.status_code == 201, with_token.text
    assert windows(app) == 1


def test_the_windows_form_needs_the_csrf_token(app: App, browser: TestClient, fleet: None) -> None:
    form = {k: v for k, v in WINDOW.items()}
    without = browser.post("/blackouts", data=form, follow_redirects=False)
    with_token = browser.post(
        "/blackouts", data={**form, "csrf_token": csrf_token_of(browser)}, follow_redirects=False
    )

    assert without.status_code == 403
    assert with_token.status_code == 303, with_token.text
    assert windows(app) == 1
