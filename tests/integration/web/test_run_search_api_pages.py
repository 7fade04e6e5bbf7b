"""The runs search through /api/v1/runs and the Runs page (SQLite and PostgreSQL): the
cursor of the next page, the text filter, and a bad cursor as a 422 naming the field."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from integration.history.runs_helper import fire_minutes
from integration.web.conftest import API, error_of

ADMIN = Actor("admin", "admin")


@pytest.fixture
def history(app: App, clock: FakeClock) -> None:
    targets.add_target(app, ADMIN, TargetSpec("a", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "sweep", JobSpec("* * * * *", "true"), bulk=True)
    fire_minutes(
        app,
        clock,
        [[("succeeded", 10)]] * 7,
        stdout=[[f"line {m}"] for m in range(7)],
    )


def test_the_api_pages_by_cursor_until_the_last_page(
    client: TestClient, as_viewer: dict[str, str], history: None
) -> None:
    ids: list[int] = []
    params: dict[str, str | int] = {"limit": 3}
    for _ in range(3):
        body = client.get(f"{API}/runs", params=params, headers=as_viewer).json()
        ids.extend(item["id"] for item in body["items"])
        if body["next_cursor"] is None:
            break
        params = {"limit": 3, "cursor": body["next_cursor"]}

    assert len(ids) == 7 == len(set(ids))
    assert ids == sorted(ids, reverse=True)
    assert body["total"] == 7 and body["total_capped"] is False


def test_the_api_searches_the_output_and_refuses_a_bad_cursor(
    client: TestClient, as_viewer: dict[str, str], history: None
) -> None:
    found = client.get(f"{API}/runs", params={"q": "line 3"}, headers=as_viewer).json()
    bad = client.get(f"{API}/runs", params={"cursor": "%%%"}, headers=as_viewer)

    assert [i["id"] for i in found["items"]] and found["total"] == 1
    assert bad.status_code == 422 and error_of(bad)["field"] == "cursor"


def test_the_runs_page_links_to_older_runs_by_cursor(
    browser: TestClient, history: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fleetcron.web.pages.runs as runs_page

    monkeypatch.setattr(runs_page, "PAGE_SIZE", 4)
    first = browser.get("/runs")
    older = re.search(r'<a href="\?([^"]*cursor=[^"]*)" rel="next">', first.text)
    assert older is not None, first.text
    second = browser.get("/runs?" + older.group(1).replace("&amp;", "&"))

    assert "1–4 of 7 runs" in first.text
    assert "5–7 of 7 runs" in second.text
    assert 'rel="next"' not in second.text and 'rel="prev"' in second.text
    shown = re.findall(r'<tr data-run="(\d+)"', first.text + second.text)
    assert len(shown) == 7 == len(set(shown))
