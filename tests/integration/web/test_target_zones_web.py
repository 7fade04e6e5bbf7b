"""Target time zones over real HTTP (SQLite and PostgreSQL): the API sets, shows and
refuses zones, the preview spreads a ``target``-zone schedule over the zones in use, and
the target form sets and keeps a zone."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from integration.web.conftest import API, csrf_token_of, error_of, log_in, new_client

Headers = dict[str, str]
ADMIN = Actor("admin", "admin")


def test_the_api_sets_shows_changes_and_clears_a_zone(
    client: TestClient, as_admin: Headers
) -> None:
    added = client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local", "timezone": "Asia/Tokyo"},
        headers=as_admin,
    )
    assert added.status_code == 201, added.text
    body = added.json()
    assert (body["timezone"], body["timezone_note"]) == (
        "Asia/Tokyo",
        "set by an operator",
    )
    assert body["target"]["timezone_source"] == "operator"

    edited = client.patch(
        f"{API}/targets/box", json={"timezone": "Europe/Berlin"}, headers=as_admin
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["changed"] == ["timezone"]
    shown = client.get(f"{API}/targets/box", headers=as_admin).json()
    assert (shown["timezone"], shown["timezone_source"]) == ("Europe/Berlin", "operator")

    cleared = client.patch(f"{API}/targets/box", json={"timezone": ""}, headers=as_admin)
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["target"]["timezone"] is None


def test_a_local_target_added_without_a_zone_reports_the_detected_one(
    client: TestClient, as_admin: Headers
) -> None:
    added = client.post(f"{API}/targets", json={"name": "box", "kind": "local"}, headers=as_admin)

    body = added.json()
    assert body["target"]["timezone_source"] == "detected"
    assert body["timezone"] == body["target"]["timezone"] and body["timezone"]
    assert body["timezone_note"].startswith("detected by ")


def test_an_unknown_zone_is_a_422_naming_the_field_and_value(
    client: TestClient, as_admin: Headers
) -> None:
    refused = client.post(
        f"{API}/targets",
        json={"name": "box", "kind": "local", "timezone": "Moon/Tranquility"},
        headers=as_admin,
    )

    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["field"] == "timezone"
    assert "'Moon/Tranquility' is not a known time zone" in str(error["message"])
    assert client.get(f"{API}/targets", headers=as_admin).json() == []


def test_the_preview_of_a_target_zone_schedule_spreads_over_the_zones_in_use(
    app: App, client: TestClient, as_viewer: Headers
) -> None:
    for name, zone in (("b1", "Europe/Berlin"), ("b2", "Europe/Berlin"), ("t1", "Asia/Tokyo")):
        targets.add_target(app, ADMIN, TargetSpec(name, TargetKind.LOCAL, timezone=zone))

    answer = client.get(
        f"{API}/cron/preview", params={"expr": "0 2 * * *", "tz": "target"}, headers=as_viewer
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["timezone"] == "target"
    zones = {z["timezone"]: z for z in body["zones"]}
    assert {z: v["targets"] for z, v in zones.items()} == {"Europe/Berlin": 2, "Asia/Tokyo": 1}
    for zone, offsets in (("Europe/Berlin", ("+01:00", "+02:00")), ("Asia/Tokyo", ("+09:00",))):
        for fire in zones[zone]["next"]:
            assert fire[11:19] == "02:00:00" or fire[11:19] == "03:00:00", fire
            assert fire[19:] in offsets, fire
    # The merged list is the earliest fires over both zones, in order of the instant.
    assert len(body["next"]) == 5
    assert body["next"][0] == zones["Asia/Tokyo"]["next"][0]  # Tokyo's 02:00 comes first
    # A fixed zone is today's answer: no spread.
    fixed = client.get(
        f"{API}/cron/preview", params={"expr": "0 2 * * *", "tz": "Asia/Tokyo"}, headers=as_viewer
    ).json()
    assert fixed["zones"] == [] and fixed["timezone"] == "Asia/Tokyo"


@pytest.fixture
def operator_browser(app: App) -> Iterator[TestClient]:
    with new_client(app) as client:
        log_in(client, "operator")
        yield client


def test_the_target_form_sets_a_zone_and_keeps_it_when_it_is_not_changed(
    app: App, operator_browser: TestClient
) -> None:
    targets.add_target(app, ADMIN, TargetSpec("box", TargetKind.LOCAL))
    detected = target_reads.show_target(app, ADMIN, "box")[0].timezone
    jobs.add_job(app, ADMIN, "nightly", JobSpec("0 2 * * *", "true", "target"), target="box")

    def save(**fields: str) -> str:
        data = {"csrf_token": csrf_token_of(operator_browser), "kind": "local", **fields}
        response = operator_browser.post("/targets/box/edit", data=data)
        assert response.status_code in (303, 422), response.text
        if response.status_code == 422:
            return html.unescape(response.text)
        return html.unescape(operator_browser.get(response.headers["location"]).text)

    # The detected zone sent back unchanged with a new note: the zone stays detected.
    page = save(timezone=detected or "", notes="rack 4")
    assert "Saved target box: notes changed." in page
    assert target_reads.show_target(app, ADMIN, "box")[0].timezone_source == "detected"

    page = save(timezone="America/New_York", notes="rack 4")
    assert "Saved target box: timezone changed." in page
    assert "America/New_York" in page and "set by an operator" in page
    assert "(target: America/New_York)" in page  # the job's zone here

    refused = save(timezone="America/Nowhere", notes="rack 4")
    assert "'America/Nowhere' is not a known time zone" in refused
    assert 'value="America/Nowhere"' in refused  # what was typed comes back in the field
    assert target_reads.show_target(app, ADMIN, "box")[0].timezone == "America/New_York"
