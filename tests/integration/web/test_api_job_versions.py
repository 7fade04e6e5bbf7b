"""/api/v1/jobs/{name}/versions and /revert on SQLite and PostgreSQL: the list, one
version with what changed, a revert, where each change came from, and the refusals."""

from __future__ import annotations

from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, csrf_token_of, error_of, log_in

Headers = dict[str, str]


def a_job_with_three_versions(client: TestClient, headers: Headers, app: App) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("alpha", TargetKind.LOCAL))
    created = client.post(
        f"{API}/jobs",
        json={"name": "backup", "target": "alpha", "schedule": "0 3 * * *", "command": "b1"},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    for change in ({"schedule": "0 4 * * *"}, {"command": "b2", "notes": "new binary"}):
        edited = client.patch(f"{API}/jobs/backup", json=change, headers=headers)
        assert edited.status_code == 200, edited.text


def test_the_versions_of_a_job_come_newest_first_and_say_they_came_from_the_api(
    client: TestClient, as_operator: Headers, app: App
) -> None:
    a_job_with_three_versions(client, as_operator, app)

    response = client.get(f"{API}/jobs/backup/versions", headers=as_operator)

    assert response.status_code == 200, response.text
    listed = response.json()
    assert [(v["version"], v["source"], v["current"]) for v in listed] == [
        (3, "api", True),
        (2, "api", False),
        (1, "api", False),
    ]
    assert listed[1]["changed"] == ["schedule"]
    assert all(v["definition"] is None for v in listed)


def test_one_version_carries_its_definition_and_what_changed_from_the_one_before(
    client: TestClient, as_viewer: Headers, as_operator: Headers, app: App
) -> None:
    a_job_with_three_versions(client, as_operator, app)

    response = client.get(f"{API}/jobs/backup/versions/3", headers=as_viewer)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["definition"]["command"] == "b2"
    assert [(c["field"], c["old"], c["new"]) for c in body["changes"]] == [
        ("command", "b1", "b2"),
        ("notes", "", "new binary"),
    ]


def test_a_revert_over_the_api_writes_the_next_version(
    client: TestClient, as_operator: Headers, app: App
) -> None:
    a_job_with_three_versions(client, as_operator, app)

    response = client.post(f"{API}/jobs/backup/revert", json={"to": 1}, headers=as_operator)

    assert response.status_code == 200, response.text
    assert (response.json()["version"], response.json()["reverted_to"]) == (4, 1)
    job = client.get(f"{API}/jobs/backup", headers=as_operator).json()
    assert (job["schedule"], job["command"], job["notes"]) == ("0 3 * * *", "b1", "")


def test_a_viewer_may_not_revert(
    client: TestClient, as_viewer: Headers, as_operator: Headers, app: App
) -> None:
    a_job_with_three_versions(client, as_operator, app)

    response = client.post(f"{API}/jobs/backup/revert", json={"to": 1}, headers=as_viewer)

    assert response.status_code == 403
    assert client.get(f"{API}/jobs/backup", headers=as_viewer).json()["command"] == "b2"


def test_a_missing_version_and_a_bad_body_are_4xx_naming_the_field(
    client: TestClient, as_operator: Headers, app: App
) -> None:
    a_job_with_three_versions(client, as_operator, app)

    missing = client.get(f"{API}/jobs/backup/versions/9", headers=as_operator)
    assert missing.status_code == 422 and error_of(missing)["field"] == "version"
    bad = client.post(f"{API}/jobs/backup/revert", json={"to": "x"}, headers=as_operator)
    assert bad.status_code == 422 and error_of(bad)["field"] == "to"
    unknown = client.get(f"{API}/jobs/nope/versions", headers=as_operator)
    assert unknown.status_code == 404


def test_a_change_made_from_a_page_is_recorded_as_from_the_web(
    client: TestClient, as_operator: Headers, app: App
) -> None:
    a_job_with_three_versions(client, as_operator, app)
    log_in(client, "operator")

    reverted = client.post(
        f"{API}/jobs/backup/revert",
        json={"to": 2},
        headers={"X-CSRF-Token": csrf_token_of(client)},
    )
    assert reverted.status_code == 200, reverted.text
    page = client.post(
        "/jobs/backup/revert", data={"to": "1", "csrf_token": csrf_token_of(client)}
    )

    assert page.status_code in (200, 303), page.text
    listed = client.get(f"{API}/jobs/backup/versions", headers=as_operator).json()
    assert [(v["version"], v["source"]) for v in listed[:2]] == [(5, "web"), (4, "api")]
