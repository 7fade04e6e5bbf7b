"""/api/v1/jobs on SQLite and PostgreSQL: bulk and individual jobs, edits that reach every
target, enabling per target, run now, delete, and the errors of each.

The fixture clock stands at 2026-03-02 09:00:30 UTC (a Monday).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of, sqlite_only

Headers = dict[str, str]
FLEET = ("alpha", "bravo", "charlie")


@pytest.fixture
def fleet(app: App, operator: Actor) -> tuple[str, ...]:
    """Three paired local targets."""
    for name in FLEET:
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))
    return FLEET


def add_job(client: TestClient, headers: Headers, **body: Any) -> dict[str, Any]:
    response = client.post(
        f"{API}/jobs",
        json={"schedule": "0 3 * * *", "command": f"backup --{body.get('name')}", **body},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def show(client: TestClient, headers: Headers, name: str) -> dict[str, Any]:
    response = client.get(f"{API}/jobs/{name}", headers=headers)
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    return job


def enabled_by_target(job: dict[str, Any]) -> dict[str, bool]:
    return {a["target"]: a["enabled"] for a in job["assignments"]}


def test_a_bulk_job_with_disabled_on_counts_enabled_and_total_targets(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    job = add_job(client, as_operator, name="backup", bulk=True, disabled_on=["bravo"])

    assert (job["origin"], job["enabled"], job["total"]) == ("bulk", 2, 3)


def test_an_individual_job_has_exactly_its_one_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    job = add_job(client, as_operator, name="rotate", target="alpha")

    assert (job["origin"], job["target"], job["enabled"], job["total"]) == (
        "individual",
        "alpha",
        1,
        1,
    )


@sqlite_only
def test_a_bulk_job_selects_targets_by_label(
    client: TestClient, as_operator: Headers, app: App, operator: Actor, fleet: tuple[str, ...]
) -> None:
    targets.label_target(app, operator, "alpha", ["env=prod"])

    job = add_job(client, as_operator, name="backup", bulk=True, selector="env=prod")

    assert job["total"] == 1
    assert enabled_by_target(show(client, as_operator, "backup")) == {"alpha": True}


def test_the_job_list_filters_by_origin(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)
    add_job(client, as_operator, name="rotate", target="alpha")

    bulk = client.get(f"{API}/jobs", params={"origin": "bulk"}, headers=as_operator).json()
    individual = client.get(
        f"{API}/jobs", params={"origin": "individual"}, headers=as_operator
    ).json()

    assert [j["name"] for j in bulk] == ["backup"]
    assert [j["name"] for j in individual] == ["rotate"]


def test_the_job_list_filters_by_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)
    add_job(client, as_operator, name="rotate", target="alpha")

    on_bravo = client.get(f"{API}/jobs", params={"target": "bravo"}, headers=as_operator).json()
    on_alpha = client.get(f"{API}/jobs", params={"target": "alpha"}, headers=as_operator).json()

    assert [j["name"] for j in on_bravo] == ["backup"]
    assert [j["name"] for j in on_alpha] == ["backup", "rotate"]


@sqlite_only
def test_the_job_list_by_an_unknown_target_is_404(client: TestClient, as_operator: Headers) -> None:
    response = client.get(f"{API}/jobs", params={"target": "nowhere"}, headers=as_operator)

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_showing_a_job_includes_its_assignments_and_a_description(
    client: TestClient, as_viewer: Headers, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True, disabled_on=["charlie"])

    job = show(client, as_viewer, "backup")

    assert job["description"] == "At 03:00"
    assert enabled_by_target(job) == {"alpha": True, "bravo": True, "charlie": False}
    assert job["assignments"][0]["next_fire_at"] == "2026-03-03T03:00:00Z"


def test_a_patch_to_a_bulk_job_reaches_every_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    response = client.patch(
        f"{API}/jobs/backup",
        json={"schedule": "30 9 * * *", "command": "backup --fast", "notes": "faster"},
        headers=as_operator,
    )

    assert response.status_code == 200, response.text
    job = show(client, as_operator, "backup")
    assert (job["schedule"], job["command"], job["notes"]) == (
        "30 9 * * *",
        "backup --fast",
        "faster",
    )
    assert {a["next_fire_at"] for a in job["assignments"]} == {"2026-03-02T09:30:00Z"}
    assert job["updated_by"] == "olivia"


def test_enabled_on_in_a_patch_toggles_only_the_named_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True, disabled_on=["charlie"])

    response = client.patch(
        f"{API}/jobs/backup",
        json={"enabled_on": {"alpha": False, "charlie": True}},
        headers=as_operator,
    )

    assert response.status_code == 200, response.text
    job = show(client, as_operator, "backup")
    assert enabled_by_target(job) == {"alpha": False, "bravo": True, "charlie": True}
    assert (job["enabled"], job["total"]) == (2, 3)


def test_disabling_with_a_target_pauses_only_that_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    response = client.post(
        f"{API}/jobs/backup/disable", json={"target": "bravo"}, headers=as_operator
    )

    assert response.status_code == 200, response.text
    assert (response.json()["enabled"], response.json()["total"]) == (2, 3)
    assert enabled_by_target(show(client, as_operator, "backup"))["bravo"] is False


@sqlite_only
def test_enabling_with_a_target_resumes_only_that_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True, disabled_on=["alpha", "bravo"])

    response = client.post(
        f"{API}/jobs/backup/enable", json={"target": "alpha"}, headers=as_operator
    )

    assert response.status_code == 200, response.text
    assert enabled_by_target(show(client, as_operator, "backup")) == {
        "alpha": True,
        "bravo": False,
        "charlie": True,
    }


def test_a_patch_refused_for_an_unknown_target_changes_nothing(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    response = client.patch(
        f"{API}/jobs/backup",
        json={"notes": "changed", "enabled_on": {"alpha": False, "nowhere": True}},
        headers=as_operator,
    )

    assert response.status_code == 404
    job = show(client, as_operator, "backup")
    assert job["notes"] == ""
    assert enabled_by_target(job)["alpha"] is True


@sqlite_only
def test_disabling_without_a_target_pauses_every_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    response = client.post(f"{API}/jobs/backup/disable", json={}, headers=as_operator)

    assert (response.json()["enabled"], response.json()["total"]) == (0, 3)


@sqlite_only
def test_enabling_on_a_target_without_the_job_is_404(
    client: TestClient, as_operator: Headers, app: App, operator: Actor, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="rotate", target="alpha")

    response = client.post(
        f"{API}/jobs/rotate/enable", json={"target": "bravo"}, headers=as_operator
    )

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_run_now_answers_202_with_run_ids_that_are_listed_as_queued(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True, disabled_on=["charlie"])

    response = client.post(f"{API}/jobs/backup/run", json={}, headers=as_operator)

    assert response.status_code == 202, response.text
    run_ids = response.json()["run_ids"]
    assert len(run_ids) == 2
    queued = client.get(f"{API}/runs", params={"status": "queued"}, headers=as_operator).json()
    assert sorted(r["id"] for r in queued["items"]) == sorted(run_ids)
    assert {r["target"] for r in queued["items"]} == {"alpha", "bravo"}
    assert {r["trigger"] for r in queued["items"]} == {"manual"}


@sqlite_only
def test_run_now_on_a_named_target_queues_one_run_even_where_the_job_is_paused(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True, disabled_on=["charlie"])

    response = client.post(
        f"{API}/jobs/backup/run", json={"target": "charlie"}, headers=as_operator
    )

    assert response.status_code == 202, response.text
    [run_id] = response.json()["run_ids"]
    assert client.get(f"{API}/runs/{run_id}", headers=as_operator).json()["target"] == "charlie"


@sqlite_only
def test_run_now_of_a_job_enabled_nowhere_is_refused_naming_the_job(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True, disabled_on=list(fleet))

    response = client.post(f"{API}/jobs/backup/run", json={}, headers=as_operator)

    assert response.status_code == 422
    assert error_of(response)["field"] == "job"


def test_deleting_a_job_answers_204_and_then_404(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    deleted = client.delete(f"{API}/jobs/backup", headers=as_operator)
    shown = client.get(f"{API}/jobs/backup", headers=as_operator)

    assert deleted.status_code == 204
    assert shown.status_code == 404
    assert error_of(shown)["code"] == "not_found"


@sqlite_only
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/jobs/ghost", None),
        ("PATCH", "/jobs/ghost", {"notes": "x"}),
        ("DELETE", "/jobs/ghost", None),
        ("POST", "/jobs/ghost/run", {}),
    ],
)
def test_an_unknown_job_is_404_naming_it(
    client: TestClient, as_operator: Headers, method: str, path: str, body: object
) -> None:
    response = client.request(method, f"{API}{path}", json=body, headers=as_operator)

    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "not_found"
    assert "ghost" in str(error["message"])


def post_job(client: TestClient, headers: Headers, **body: Any) -> httpx.Response:
    response: httpx.Response = client.post(
        f"{API}/jobs",
        json={"name": "backup", "schedule": "0 3 * * *", "command": "true", "bulk": True, **body},
        headers=headers,
    )
    return response


@sqlite_only
def test_a_bad_schedule_is_refused_naming_the_cron_field(
    client: TestClient, as_operator: Headers
) -> None:
    response = post_job(client, as_operator, schedule="61 * * * *")

    assert response.status_code == 422
    error = error_of(response)
    assert (error["code"], error["field"]) == ("invalid", "minute")
    assert "61" in str(error["message"])


@sqlite_only
def test_an_unknown_time_zone_is_refused_naming_the_timezone_field(
    client: TestClient, as_operator: Headers
) -> None:
    response = post_job(client, as_operator, timezone="Mars/Olympus_Mons")

    assert response.status_code == 422
    assert error_of(response)["field"] == "timezone"


@sqlite_only
def test_a_command_longer_than_the_configured_limit_is_refused_naming_the_field(
    client: TestClient, as_operator: Headers, app: App
) -> None:
    too_long = "x" * (app.settings.command_max_length + 1)

    response = post_job(client, as_operator, command=too_long)

    assert response.status_code == 422
    assert error_of(response)["field"] == "command"


@sqlite_only
def test_an_unknown_field_in_a_new_job_is_refused_naming_it(
    client: TestClient, as_operator: Headers
) -> None:
    response = post_job(client, as_operator, owner="mallory")

    assert response.status_code == 422
    error = error_of(response)
    assert (error["code"], error["field"]) == ("invalid", "owner")


@sqlite_only
def test_an_unknown_field_in_a_patch_is_refused_and_nothing_changes(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    response = client.patch(
        f"{API}/jobs/backup", json={"notes": "new", "origin": "individual"}, headers=as_operator
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "origin"
    assert show(client, as_operator, "backup")["notes"] == ""


@sqlite_only
def test_a_bad_schedule_in_a_patch_changes_nothing(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="backup", bulk=True)

    response = client.patch(
        f"{API}/jobs/backup",
        json={"schedule": "* * 32 * *", "command": "other"},
        headers=as_operator,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "day-of-month"
    job = show(client, as_operator, "backup")
    assert (job["schedule"], job["command"]) == ("0 3 * * *", "backup --backup")


def test_a_duplicate_job_name_is_a_conflict_naming_the_field(
    client: TestClient, as_operator: Headers
) -> None:
    post_job(client, as_operator)

    response = post_job(client, as_operator)

    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["field"]) == ("conflict", "name")


@sqlite_only
def test_a_job_with_both_a_target_and_bulk_is_refused_naming_target(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    response = post_job(client, as_operator, target="alpha")

    assert response.status_code == 422
    assert error_of(response)["field"] == "target"


@sqlite_only
def test_a_selector_on_an_individual_job_is_refused_naming_selector(
    client: TestClient, as_operator: Headers, fleet: tuple[str, ...]
) -> None:
    add_job(client, as_operator, name="rotate", target="alpha")

    response = client.patch(
        f"{API}/jobs/rotate", json={"selector": "env=prod"}, headers=as_operator
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "selector"
