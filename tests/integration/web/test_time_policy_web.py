"""A job's DST choices and retention days through the API and the pages (SQLite and
PostgreSQL): set and shown, refused naming the field with nothing saved, previewed on the
job page and the Upcoming page; the retention status for admins only."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from fleetcron.app import SYSTEM, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of

Headers = dict[str, str]


def body(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": "30 2 * * *", "command": "true", "target": "box"} | extra


def add_box(app: App) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL, timezone="Europe/Warsaw"))


def test_the_api_sets_the_choices_and_refuses_a_choice_without_dst(
    app: App, client: TestClient, as_operator: Headers
) -> None:
    add_box(app)
    refused = client.post(
        f"{API}/jobs", json=body("utc", timezone="UTC", dst_gap="skip"), headers=as_operator
    )
    assert refused.status_code == 422
    assert error_of(refused)["field"] == "dst_gap"
    assert client.get(f"{API}/jobs/utc", headers=as_operator).status_code == 404

    made = client.post(
        f"{API}/jobs",
        json=body("nightly", timezone="Europe/Warsaw", dst_fold="last", keep_successes_days=7),
        headers=as_operator,
    )
    assert made.status_code == 201, made.text
    shown = client.get(f"{API}/jobs/nightly", headers=as_operator).json()
    assert (shown["dst_gap"], shown["dst_fold"], shown["keep_successes_days"]) == (
        "cronie",
        "last",
        7,
    )
    upcoming = client.get(f"{API}/upcoming?job=nightly", headers=as_operator).json()
    assert [n["zone"] for n in upcoming["dst"]] == ["Europe/Warsaw", "Europe/Warsaw"]
    assert any("runs once, on the second pass" in n["text"] for n in upcoming["dst"])


def test_the_pages_preview_the_transitions(
    app: App, client: TestClient, as_operator: Headers, browser: TestClient
) -> None:
    add_box(app)
    made = client.post(
        f"{API}/jobs", json=body("nightly", timezone="Europe/Warsaw"), headers=as_operator
    )
    assert made.status_code == 201, made.text

    page = browser.get("/jobs/nightly")
    assert page.status_code == 200
    assert 'id="job-dst"' in page.text
    assert "Europe/Warsaw" in page.text and "does not exist → runs at 03:00" in page.text
    upcoming = browser.get("/upcoming?job=nightly")
    assert 'id="upcoming-dst"' in upcoming.text
    # A job in a zone without DST has no preview (the negative control).
    client.post(f"{API}/jobs", json=body("tokyo", timezone="Asia/Tokyo"), headers=as_operator)
    assert 'id="job-dst"' not in browser.get("/jobs/tokyo").text


def test_the_retention_status_is_for_admins(
    client: TestClient, as_admin: Headers, as_operator: Headers
) -> None:
    shown = client.get(f"{API}/retention", headers=as_admin)
    assert shown.status_code == 200
    assert set(shown.json()) == {"policy", "recent"}
    assert client.get(f"{API}/retention", headers=as_operator).status_code == 403
