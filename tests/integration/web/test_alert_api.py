"""/api/v1/incidents and /api/v1/silences: roles, CSRF, audit, and bad input refused naming
the field with nothing changed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Incident, IncidentTarget, Silence
from integration.web.conftest import API, csrf_token_of, error_of, log_in, sqlite_only

pytestmark = sqlite_only


@pytest.fixture
def fleet(app: App) -> None:
    admin = Actor("admin", "admin")
    targets.add_target(app, admin, TargetSpec("web1", TargetKind.LOCAL, labels=["rack=r12"]))
    jobs.add_job(app, admin, "backup", JobSpec("0 2 * * *", "backup"), target="web1")


def silences(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(Silence)) or 0)


def an_incident(app: App, clock: FakeClock, *, resolved: bool) -> int:
    with app.db.session() as session:
        incident = Incident(
            job_id=1,
            job_name="backup",
            cause="failing",
            status="resolved" if resolved else "open",
            opened_at=clock.now - timedelta(minutes=5),
            resolved_at=clock.now if resolved else None,
            previous_state="ok",
            reason="the command exited with code 3",
        )
        session.add(incident)
        session.flush()
        session.add(
            IncidentTarget(
                incident_id=incident.id,
                assignment_id=1,
                target_id=1,
                target_name="web1",
                joined_at=incident.opened_at,
                last_seen_at=incident.opened_at,
                recovered_at=incident.resolved_at,
            )
        )
        return incident.id


def test_an_operator_adds_a_silence_a_viewer_may_not(
    app: App,
    client: TestClient,
    fleet: None,
    as_operator: dict[str, str],
    as_viewer: dict[str, str],
) -> None:
    body = {"job": "backup", "duration_s": 7200, "reason": "disk swap"}

    refused = client.post(f"{API}/silences", json=body, headers=as_viewer)
    added = client.post(f"{API}/silences", json=body, headers=as_operator)

    assert refused.status_code == 403
    assert added.status_code == 201, added.text
    assert (added.json()["scope"], added.json()["active"]) == ("job=backup", True)
    listed = client.get(f"{API}/silences", headers=as_viewer).json()
    assert [s["id"] for s in listed] == [added.json()["id"]]
    with app.db.read() as session:
        audited = session.scalars(
            select(AuditEvent.success).where(AuditEvent.action == "silence.add")
        ).all()
    assert sorted(audited) == [False, True]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"job": "nosuch", "duration_s": 3600, "reason": "x"}, 404, "job"),
        ({"target": "nosuch", "duration_s": 3600, "reason": "x"}, 404, "target"),
        ({"selector": "rack=r99", "duration_s": 3600, "reason": "x"}, 422, "selector"),
        ({"job": "backup", "duration_s": 30, "reason": "x"}, 422, "duration"),
        ({"job": "backup", "duration_s": 91 * 86400, "reason": "x"}, 422, "duration"),
        ({"job": "backup", "reason": "x"}, 422, "duration"),
        ({"job": "backup", "duration_s": 3600, "reason": " "}, 422, "reason"),
        ({"duration_s": 3600, "reason": "x"}, 422, "job"),
    ],
)
def test_a_bad_silence_is_refused_naming_the_field_and_nothing_is_added(
    app: App,
    client: TestClient,
    fleet: None,
    as_operator: dict[str, str],
    body: dict[str, object],
    status: int,
    field: str,
) -> None:
    answer = client.post(f"{API}/silences", json=body, headers=as_operator)

    assert answer.status_code == status, answer.text
    assert error_of(answer)["field"] == field
    assert silences(app) == 0


def test_a_second_silence_of_the_same_scope_is_refused(
    app: App, client: TestClient, fleet: None, as_operator: dict[str, str]
) -> None:
    body = {"selector": "rack=r12", "duration_s": 3600, "reason": "rack maintenance"}
    assert client.post(f"{API}/silences", json=body, headers=as_operator).status_code == 201

    again = client.post(f"{API}/silences", json=body, headers=as_operator)

    assert again.status_code == 422
    assert error_of(again)["field"] == "until"
    assert silences(app) == 1


def test_an_expired_silence_cannot_be_expired_again(
    app: App, client: TestClient, fleet: None, as_operator: dict[str, str]
) -> None:
    body = {"job": "backup", "duration_s": 3600, "reason": "x"}
    silence_id = client.post(f"{API}/silences", json=body, headers=as_operator).json()["id"]

    first = client.post(f"{API}/silences/{silence_id}/expire", headers=as_operator)
    second = client.post(f"{API}/silences/{silence_id}/expire", headers=as_operator)

    assert first.status_code == 200 and first.json()["active"] is False
    assert second.status_code == 422 and error_of(second)["field"] == "silence"


def test_a_browser_needs_the_csrf_token_to_acknowledge(
    app: App, browser: TestClient, clock: FakeClock, fleet: None
) -> None:
    incident_id = an_incident(app, clock, resolved=False)

    forged = browser.post(f"{API}/incidents/{incident_id}/ack", json={})
    acked = browser.post(
        f"{API}/incidents/{incident_id}/ack",
        json={"note": "on it"},
        headers={"X-CSRF-Token": csrf_token_of(browser)},
    )

    assert forged.status_code == 403
    assert acked.status_code == 200, acked.text
    assert (acked.json()["acked_by"], acked.json()["ack_note"]) == ("olivia", "on it")
    shown = browser.get(f"{API}/incidents/{incident_id}").json()
    assert shown["targets"][0]["name"] == "web1"


def test_a_resolved_incident_cannot_be_acknowledged(
    app: App, client: TestClient, clock: FakeClock, fleet: None, as_operator: dict[str, str]
) -> None:
    incident_id = an_incident(app, clock, resolved=True)

    answer = client.post(f"{API}/incidents/{incident_id}/ack", json={}, headers=as_operator)
    missing = client.post(f"{API}/incidents/987654/ack", json={}, headers=as_operator)

    assert answer.status_code == 422
    assert error_of(answer)["field"] == "incident"
    assert "resolved" in str(error_of(answer)["message"])
    assert missing.status_code == 404 and error_of(missing)["field"] == "incident"
    with app.db.read() as session:
        assert session.scalar(select(Incident.acked_by)) is None


def test_a_viewer_lists_incidents_but_may_not_acknowledge(
    app: App, client: TestClient, clock: FakeClock, fleet: None, as_viewer: dict[str, str]
) -> None:
    incident_id = an_incident(app, clock, resolved=False)

    listed = client.get(f"{API}/incidents", headers=as_viewer)
    refused = client.post(f"{API}/incidents/{incident_id}/ack", json={}, headers=as_viewer)

    assert [i["id"] for i in listed.json()] == [incident_id]
    assert listed.json()[0]["open_targets"] == 1
    assert refused.status_code == 403


def test_the_incidents_page_lists_shows_and_acknowledges(
    app: App, browser: TestClient, clock: FakeClock, fleet: None
) -> None:
    incident_id = an_incident(app, clock, resolved=False)

    listed = browser.get("/incidents")
    shown = browser.get(f"/incidents/{incident_id}")
    acked = browser.post(
        f"/incidents/{incident_id}/ack",
        data={"note": "disk swap", "csrf_token": csrf_token_of(browser)},
    )

    assert listed.status_code == 200 and f'href="/incidents/{incident_id}"' in listed.text
    assert shown.status_code == 200
    assert "web1" in shown.text and "Acknowledge</button>" in shown.text
    assert acked.status_code == 303
    after = browser.get(f"/incidents/{incident_id}").text
    assert "by olivia" in after and "Acknowledge</button>" not in after


def test_a_viewer_sees_the_incident_without_the_acknowledge_button(
    app: App, client: TestClient, clock: FakeClock, fleet: None
) -> None:
    incident_id = an_incident(app, clock, resolved=False)
    log_in(client, "viewer")

    shown = client.get(f"/incidents/{incident_id}")

    assert shown.status_code == 200
    assert "Acknowledge</button>" not in shown.text


def test_the_job_page_shows_its_open_incident_at_the_top(
    app: App, browser: TestClient, clock: FakeClock, fleet: None
) -> None:
    incident_id = an_incident(app, clock, resolved=False)

    shown = browser.get("/jobs/backup")

    assert shown.status_code == 200
    assert f'Open incident <a href="/incidents/{incident_id}">#{incident_id}</a>' in shown.text
    assert "failing on 1 target since" in shown.text


def test_the_dashboard_links_to_the_incidents_page_with_the_open_count(
    app: App, browser: TestClient, clock: FakeClock, fleet: None
) -> None:
    an_incident(app, clock, resolved=False)
    an_incident(app, clock, resolved=True)

    shown = browser.get("/")

    assert shown.status_code == 200
    card = shown.text.split('id="open-incidents"')[1].split("</a>")[0]
    assert '<span class="big">1</span>' in card and "open incident<" in card
    assert '<a class="card" href="/incidents" id="open-incidents">' in shown.text


def test_the_dashboard_says_when_no_incident_is_open(
    app: App, browser: TestClient, clock: FakeClock, fleet: None
) -> None:
    # Negative control of the count above: a resolved incident is not counted.
    an_incident(app, clock, resolved=True)

    card = browser.get("/").text.split('id="open-incidents"')[1].split("</a>")[0]

    assert '<span class="big">0</span>' in card and "open incidents<" in card


def test_the_job_page_links_to_its_incidents_and_the_page_lists_only_them(
    app: App, browser: TestClient, clock: FakeClock, fleet: None
) -> None:
    open_one = an_incident(app, clock, resolved=False)
    resolved = an_incident(app, clock, resolved=True)
    with app.db.session() as session:
        other = Incident(
            job_id=99,
            job_name="reindex",
            cause="late",
            status="open",
            opened_at=clock.now,
            previous_state="ok",
            reason="late",
        )
        session.add(other)
        session.flush()
        other_id = other.id

    job_page = browser.get("/jobs/backup").text
    listed = browser.get("/incidents?job=backup&status=all")

    assert (
        '<a id="job-incidents" href="/incidents?job=backup&amp;status=all">1 open; '
        "every incident of this job</a>" in job_page
    )
    assert listed.status_code == 200
    assert f'href="/incidents/{open_one}"' in listed.text
    assert f'href="/incidents/{resolved}"' in listed.text
    assert f'href="/incidents/{other_id}"' not in listed.text
    # Negative control: every job's list has the other job's incident.
    assert f'href="/incidents/{other_id}"' in browser.get("/incidents?status=all").text
