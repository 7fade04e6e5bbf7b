"""/api/v1/calendars: roles, import, removal refused while in use, and bad input refused
naming the field with nothing saved."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from fleetcron.app import App
from fleetcron.store.schema import CalendarRow
from integration.web.conftest import API, error_of, sqlite_only

pytestmark = sqlite_only

ICS = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:1\r\n"
    "DTSTART;VALUE=DATE:20261225\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)


def calendars(app: App) -> int:
    with app.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(CalendarRow)) or 0)


def test_an_operator_imports_and_adds_calendars_a_viewer_reads_them(
    app: App, client: TestClient, as_operator: dict[str, str], as_viewer: dict[str, str]
) -> None:
    body = {"name": "holidays", "ics": ICS}
    assert client.post(f"{API}/calendars/import", json=body, headers=as_viewer).status_code == 403
    imported = client.post(f"{API}/calendars/import", json=body, headers=as_operator)
    assert imported.status_code == 201, imported.text
    assert imported.json()["dates"] == ["2026-12-25"]

    business = {"name": "business-days", "weekdays": "mon-fri", "except": "holidays"}
    added = client.post(f"{API}/calendars", json=business, headers=as_operator)
    assert added.status_code == 201, added.text
    listed = client.get(f"{API}/calendars", headers=as_viewer).json()
    assert [c["name"] for c in listed] == ["business-days", "holidays"]

    refused = client.delete(f"{API}/calendars/holidays", headers=as_operator)
    assert refused.status_code == 422 and error_of(refused)["field"] == "calendar"
    assert client.delete(f"{API}/calendars/business-days", headers=as_operator).status_code == 204
    assert calendars(app) == 1


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/calendars/import", {"name": "h", "ics": "BEGIN:VCALENDAR\r\nnonsense"}, "file"),
        ("/calendars", {"name": "h", "dates": ["2026-02-30"]}, "dates"),
        ("/calendars", {"name": "H!", "dates": ["2026-02-03"]}, "name"),
        ("/calendars", {"name": "h", "weekdays": "mon-fri", "except": "nosuch"}, "except"),
    ],
)
def test_bad_input_is_a_json_error_naming_the_field(
    app: App,
    client: TestClient,
    as_operator: dict[str, str],
    path: str,
    body: dict[str, object],
    field: str,
) -> None:
    answer = client.post(f"{API}{path}", json=body, headers=as_operator)

    assert answer.status_code == 422, answer.text
    assert error_of(answer)["field"] == field
    assert calendars(app) == 0
