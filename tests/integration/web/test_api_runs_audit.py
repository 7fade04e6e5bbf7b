"""/api/v1/runs, /api/v1/audit and /api/v1/cron/preview on SQLite and PostgreSQL.

Runs come from the real scheduler (one tick of :class:`Scheduler` on a local target, with
the fixture's hand-moved clock) or from "run now" requests. The clock starts at
2026-03-02 09:00:30 UTC, a Monday.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of, sqlite_only

Headers = dict[str, str]


@pytest.fixture
def box(app: App, operator: Actor) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("crate", TargetKind.LOCAL))
    jobs.add_job(app, operator, "hello", JobSpec("* * * * *", "echo hello"), target="box")
    jobs.add_job(app, operator, "oops", JobSpec("* * * * *", "echo oops >&2; exit 3"), target="box")
    jobs.add_job(app, operator, "other", JobSpec("0 3 * * *", "true"), target="crate")
    return "box"


def one_tick(app: App, clock: FakeClock) -> None:
    """Move past the next whole minute and let a real scheduler fire what is due."""

    async def tick() -> None:
        scheduler = Scheduler(app, clock=clock)
        await scheduler.start()
        try:
            await scheduler.tick()
            await scheduler.idle()
        finally:
            await scheduler.shutdown()

    clock.advance(seconds=31)  # 09:01:01
    asyncio.run(tick())


def queue_runs(app: App, clock: FakeClock, operator: Actor, job: str, count: int) -> list[int]:
    """``count`` manual runs, one minute apart (a slot is unique per time)."""
    ids: list[int] = []
    for _ in range(count):
        ids += runs.request_run(app, operator, job)
        clock.advance(minutes=1)
    return ids


def list_runs(client: TestClient, headers: Headers, **params: Any) -> dict[str, Any]:
    response = client.get(f"{API}/runs", params=params, headers=headers)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def test_a_scheduled_run_is_listed_with_its_status_and_output(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, box: str
) -> None:
    one_tick(app, clock)

    [run] = list_runs(client, as_viewer, job="hello")["items"]

    assert (run["status"], run["exit_code"], run["trigger"]) == ("succeeded", 0, "schedule")
    assert run["scheduled_for"] == "2026-03-02T09:01:00Z"
    assert run["stdout"]["head"] == "hello\n"


def test_a_run_is_shown_by_its_id(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, box: str
) -> None:
    one_tick(app, clock)
    [listed] = list_runs(client, as_viewer, job="oops")["items"]

    response = client.get(f"{API}/runs/{listed['id']}", headers=as_viewer)

    assert response.status_code == 200
    assert response.json() == listed
    assert (listed["status"], listed["exit_code"]) == ("failed", 3)


@sqlite_only
def test_an_unknown_run_is_404(client: TestClient, as_viewer: Headers) -> None:
    response = client.get(f"{API}/runs/4242", headers=as_viewer)

    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_runs_filter_by_status(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, operator: Actor, box: str
) -> None:
    one_tick(app, clock)
    [queued] = runs.request_run(app, operator, "hello")

    failed = list_runs(client, as_viewer, status="failed")
    waiting = list_runs(client, as_viewer, status="queued")

    assert [r["job"] for r in failed["items"]] == ["oops"]
    assert [r["id"] for r in waiting["items"]] == [queued]


def test_runs_filter_by_job_and_target(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, operator: Actor, box: str
) -> None:
    runs.request_run(app, operator, "hello")
    runs.request_run(app, operator, "other")

    on_crate = list_runs(client, as_viewer, target="crate")
    hello = list_runs(client, as_viewer, job="hello")

    assert [(r["job"], r["target"]) for r in on_crate["items"]] == [("other", "crate")]
    assert [(r["job"], r["target"]) for r in hello["items"]] == [("hello", "box")]


def test_runs_filter_by_text_in_their_output(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, box: str
) -> None:
    one_tick(app, clock)

    found = list_runs(client, as_viewer, q="oops")

    assert [r["job"] for r in found["items"]] == ["oops"]


def test_runs_are_paged_newest_first_with_total_limit_and_offset(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, operator: Actor, box: str
) -> None:
    ids = queue_runs(app, clock, operator, "hello", 5)

    page = list_runs(client, as_viewer, limit=2, offset=1)

    assert (page["total"], page["limit"], page["offset"]) == (5, 2, 1)
    assert [r["id"] for r in page["items"]] == [ids[3], ids[2]]


@sqlite_only
def test_an_offset_past_the_end_gives_an_empty_page_and_the_total(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, operator: Actor, box: str
) -> None:
    queue_runs(app, clock, operator, "hello", 2)

    page = list_runs(client, as_viewer, offset=10)

    assert (page["total"], page["items"]) == (2, [])


def test_runs_filter_by_a_time_window(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, operator: Actor, box: str
) -> None:
    ids = queue_runs(app, clock, operator, "hello", 4)  # 09:00:30, 09:01:30, 09:02:30, 09:03:30

    page = list_runs(
        client, as_viewer, since="2026-03-02T10:01:00+01:00", until="2026-03-02T09:03:00Z"
    )

    assert [r["id"] for r in page["items"]] == [ids[2], ids[1]]


@sqlite_only
def test_a_time_without_a_zone_in_a_run_filter_is_taken_as_utc(
    client: TestClient, as_viewer: Headers, app: App, clock: FakeClock, operator: Actor, box: str
) -> None:
    ids = queue_runs(app, clock, operator, "hello", 4)  # 09:00:30, 09:01:30, 09:02:30, 09:03:30

    page = list_runs(client, as_viewer, since="2026-03-02T09:01:00", until="2026-03-02T09:03:00")

    assert [r["id"] for r in page["items"]] == [ids[2], ids[1]]


@sqlite_only
def test_a_time_without_a_zone_in_an_audit_filter_is_taken_as_utc(
    client: TestClient, as_viewer: Headers, as_operator: Headers, clock: FakeClock, box: str
) -> None:
    clock.advance(hours=1)  # 10:00:30
    client.post(f"{API}/jobs/hello/disable", json={}, headers=as_operator)

    page = client.get(
        f"{API}/audit",
        params={"since": "2026-03-02T10:00:00", "until": "2026-03-02T11:00:00"},
        headers=as_viewer,
    ).json()

    assert [e["action"] for e in page["items"]] == ["job.disable"]


def test_a_run_id_beyond_the_id_range_is_refused_naming_it(
    client: TestClient, as_viewer: Headers
) -> None:
    # 2**31 is past PostgreSQL's integer: let through, it would reach the driver and fail there.
    response = client.get(f"{API}/runs/{2**31}", headers=as_viewer)

    assert response.status_code == 422
    assert error_of(response)["field"] == "run_id"


@sqlite_only
def test_an_unknown_run_status_is_refused_naming_status(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.get(f"{API}/runs", params={"status": "exploded"}, headers=as_viewer)

    assert response.status_code == 422
    assert error_of(response)["field"] == "status"


@sqlite_only
def test_a_page_larger_than_a_thousand_is_refused_naming_limit(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.get(f"{API}/runs", params={"limit": 1001}, headers=as_viewer)

    assert response.status_code == 422
    assert error_of(response)["field"] == "limit"


def test_the_audit_log_filters_by_actor(
    client: TestClient, as_viewer: Headers, as_operator: Headers, as_admin: Headers, box: str
) -> None:
    client.post(f"{API}/jobs/hello/disable", json={}, headers=as_operator)
    client.post(
        f"{API}/users", json={"name": "nina", "password": "nina-password"}, headers=as_admin
    )

    page = client.get(f"{API}/audit", params={"actor": "admin"}, headers=as_viewer).json()

    actions = [e["action"] for e in page["items"]]
    assert "user.add" in actions
    assert "job.disable" not in actions
    assert {e["actor"] for e in page["items"]} == {"admin"}


def test_the_audit_log_filters_by_action_prefix(
    client: TestClient, as_viewer: Headers, as_operator: Headers, box: str
) -> None:
    client.post(f"{API}/jobs/hello/disable", json={}, headers=as_operator)
    client.post(f"{API}/jobs/hello/enable", json={}, headers=as_operator)

    page = client.get(f"{API}/audit", params={"action": "job."}, headers=as_viewer).json()

    # newest first: the two changes over the API, then the fixture's three job.add events
    assert [e["action"] for e in page["items"]] == [
        "job.enable",
        "job.disable",
        "job.add",
        "job.add",
        "job.add",
    ]


def test_the_audit_log_filters_by_target(
    client: TestClient, as_viewer: Headers, as_operator: Headers, box: str
) -> None:
    client.post(f"{API}/targets/crate/labels", json={"labels": {"env": "qa"}}, headers=as_operator)

    page = client.get(f"{API}/audit", params={"target": "crate"}, headers=as_viewer).json()

    assert {e["target"] for e in page["items"]} == {"crate"}
    assert [e["action"] for e in page["items"]][:1] == ["target.label"]


def test_a_refused_change_is_audited_as_unsuccessful(
    client: TestClient, as_viewer: Headers, as_operator: Headers, box: str
) -> None:
    client.post(
        f"{API}/jobs",
        json={"name": "hello", "schedule": "* * * * *", "command": "true", "target": "box"},
        headers=as_operator,
    )

    page = client.get(f"{API}/audit", params={"action": "job.add"}, headers=as_viewer).json()

    latest = page["items"][0]
    assert (latest["job"], latest["success"]) == ("hello", False)
    assert "already exists" in latest["detail"]["error"]


@sqlite_only
def test_the_audit_log_is_paged_with_its_total(
    client: TestClient, as_viewer: Headers, box: str
) -> None:
    everything = client.get(f"{API}/audit", headers=as_viewer).json()

    page = client.get(f"{API}/audit", params={"limit": 2, "offset": 1}, headers=as_viewer).json()

    assert page["total"] == everything["total"] >= 3
    assert [e["id"] for e in page["items"]] == [e["id"] for e in everything["items"][1:3]]


def test_the_audit_log_filters_by_time(
    client: TestClient, as_viewer: Headers, as_operator: Headers, clock: FakeClock, box: str
) -> None:
    clock.advance(hours=1)  # 10:00:30
    client.post(f"{API}/jobs/hello/disable", json={}, headers=as_operator)

    # (the seeded users were added at the real time of the seeding, long after)
    page = client.get(
        f"{API}/audit",
        params={"since": "2026-03-02T10:00:00Z", "until": "2026-03-02T11:00:00Z"},
        headers=as_viewer,
    ).json()

    assert [e["action"] for e in page["items"]] == ["job.disable"]
    assert page["items"][0]["at"] == "2026-03-02T10:00:30Z"


@sqlite_only
def test_the_cron_preview_lists_the_next_fire_times_in_the_given_zone(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.get(
        f"{API}/cron/preview",
        params={"expr": "0 9 * * 1-5", "tz": "Europe/Berlin", "n": 3},
        headers=as_viewer,
    )

    assert response.status_code == 200, response.text
    preview = response.json()
    assert preview["timezone"] == "Europe/Berlin"
    assert preview["description"].startswith("At 09:00")
    # 09:00 in Berlin is 08:00 UTC in March (CET); Monday's has passed at 10:00:30 CET
    assert preview["next"] == [
        "2026-03-03T09:00:00+01:00",
        "2026-03-04T09:00:00+01:00",
        "2026-03-05T09:00:00+01:00",
    ]


@sqlite_only
def test_the_cron_preview_of_a_bad_expression_names_the_cron_field(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.get(f"{API}/cron/preview", params={"expr": "0 25 * * *"}, headers=as_viewer)

    assert response.status_code == 422
    assert error_of(response)["field"] == "hour"


@sqlite_only
def test_the_cron_preview_in_an_unknown_zone_names_the_timezone_field(
    client: TestClient, as_viewer: Headers
) -> None:
    response = client.get(
        f"{API}/cron/preview", params={"expr": "* * * * *", "tz": "Nowhere/Land"}, headers=as_viewer
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "timezone"
