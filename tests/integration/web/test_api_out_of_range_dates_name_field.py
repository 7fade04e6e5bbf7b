"""A date in a query that is no instant in UTC between the years 1 and 9999
(``since=9999-12-31T23:59:59-11:00``) is a 422 naming the query parameter and the range,
as the CLI's answer does; a date within the range is answered as usual (the control)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from integration.web.conftest import API, error_of, sqlite_only

Headers = dict[str, str]
BEYOND = "9999-12-31T23:59:59-11:00"
BEFORE_YEAR_1 = "0001-01-01T00:00:00+14:00"


@sqlite_only
@pytest.mark.parametrize("value", [BEYOND, BEFORE_YEAR_1], ids=["after 9999", "before 1"])
@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/runs", "since"),
        ("/runs", "until"),
        ("/audit", "since"),
        ("/audit", "until"),
        ("/jobs/nightly/slots", "before"),
    ],
)
def test_an_out_of_range_date_names_its_parameter_and_the_range(
    app: App, client: TestClient, as_admin: Headers, path: str, parameter: str, value: str
) -> None:
    jobs.add_job(app, Actor("admin", "admin"), "nightly", JobSpec("0 2 * * *", "true"), bulk=True)

    refused = client.get(f"{API}{path}", params={parameter: value}, headers=as_admin)

    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["field"] == parameter
    message = str(error["message"])
    assert message.startswith(f"{parameter}: "), message
    assert "years 1-9999" in message and value in message, message

    within_range = {parameter: "2026-03-08T02:00:00-11:00"}
    within = client.get(f"{API}{path}", params=within_range, headers=as_admin)
    assert within.status_code == 200, within.text
