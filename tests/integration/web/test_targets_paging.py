"""The targets list in pages (SQLite and PostgreSQL): the page shows 100 targets at a time
with the name filter kept in its links, the API answers ``limit``/``offset`` with the same
list shape plus ``X-Total-Count`` and a ``Link: rel="next"`` header. A page costs the same
statements and carries the same rows however large the fleet (one response carried all
5,000 targets, 3 MB, 2-4 s; docs/benchmarks.md)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import insert

from fleetcron.app import App
from fleetcron.store.schema import Target
from fleetcron.web.pages.targets import TARGETS_PAGE
from integration.web.conftest import error_of
from sql_statements import statements

_ROW = re.compile(r'<tr data-target="([^"]+)">')
_NEXT = re.compile(r'<a href="([^"]+)" rel="next">')
_LINK = re.compile(r'^<([^>]+)>; rel="next"$')


def add_targets(app: App, names: list[str]) -> None:
    now = app.now()
    with app.db.engine.begin() as conn:
        conn.execute(
            insert(Target.__table__),  # type: ignore[arg-type]
            [
                {"name": n, "kind": "local", "paired": True, "labels": {}, "notes": ""}
                | {"created_at": now, "updated_at": now}
                for n in names
            ],
        )


def names(start: int, stop: int, prefix: str = "node") -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(start, stop)]


def test_the_api_pages_the_targets_by_name_with_a_next_link(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    add_targets(app, names(0, 250))
    whole = client.get("/api/v1/targets", headers=as_viewer)
    assert whole.status_code == 200, whole.text
    assert [t["name"] for t in whole.json()] == names(0, 250)  # no limit: the whole list
    assert whole.headers["X-Total-Count"] == "250" and "Link" not in whole.headers
    seen: list[str] = []
    url: str | None = "/api/v1/targets?limit=100"
    pages = 0
    while url is not None:
        response = client.get(url, headers=as_viewer)
        assert response.status_code == 200, response.text
        assert response.headers["X-Total-Count"] == "250"
        seen += [t["name"] for t in response.json()]
        link = response.headers.get("Link")
        url = _LINK.match(link).group(1) if link else None  # type: ignore[union-attr]
        pages += 1
    assert pages == 3 and seen == names(0, 250)
    middle = client.get("/api/v1/targets?limit=10&offset=95", headers=as_viewer).json()
    assert [t["name"] for t in middle] == names(95, 105)


def test_the_api_filters_by_name_ignoring_case(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    add_targets(app, [*names(0, 30), "db-1", "DB-2", "web_1", "webx1"])
    response = client.get("/api/v1/targets?q=db-&limit=5", headers=as_viewer)
    assert sorted(t["name"] for t in response.json()) == ["DB-2", "db-1"]
    assert response.headers["X-Total-Count"] == "2"
    # The filter is a plain substring: "_" is not a wildcard.
    underscore = client.get("/api/v1/targets?q=web_", headers=as_viewer)
    assert [t["name"] for t in underscore.json()] == ["web_1"]


def test_a_bad_page_is_refused_naming_the_field(
    client: TestClient, as_viewer: dict[str, str]
) -> None:
    for query, field in [("limit=0", "limit"), ("limit=1001", "limit"), ("offset=-1", "offset")]:
        response = client.get(f"/api/v1/targets?{query}", headers=as_viewer)
        assert response.status_code == 422, (query, response.text)
        assert field in str(error_of(response)["field"]), (query, response.text)


def test_an_api_page_costs_the_same_at_any_fleet_size(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    add_targets(app, names(0, 120))
    client.get("/api/v1/targets?limit=100", headers=as_viewer)  # warm-up: caches
    with statements(app) as small:
        small_page = client.get("/api/v1/targets?limit=100", headers=as_viewer)
    small_whole = client.get("/api/v1/targets", headers=as_viewer)
    add_targets(app, names(120, 480))
    with statements(app) as large:
        large_page = client.get("/api/v1/targets?limit=100", headers=as_viewer)
    large_whole = client.get("/api/v1/targets", headers=as_viewer)
    assert len(small_page.json()) == len(large_page.json()) == 100
    assert len(large) == len(small), (small, large)
    # Negative control: without a limit the answer grows with the fleet.
    assert len(small_whole.json()) == 120 and len(large_whole.json()) == 480
    assert len(large_whole.content) > 3 * len(small_whole.content)


def page_rows(
    client: TestClient, headers: dict[str, str], url: str
) -> tuple[list[str], str | None]:
    """The targets of one page and its "Next" link, if any."""
    response = client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    following = _NEXT.search(response.text)
    link = following.group(1).replace("&amp;", "&") if following else None
    return _ROW.findall(response.text), link


def test_the_page_shows_the_targets_a_hundred_at_a_time_keeping_the_filter(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    assert TARGETS_PAGE == 100
    add_targets(app, [*names(0, 130), *names(0, 210, prefix="edge")])
    rows, following = page_rows(client, as_viewer, "/targets")
    assert rows == names(0, 100, prefix="edge") and following == "?offset=100"
    seen: list[str] = []
    url: str | None = "/targets?q=EDGE"
    while url is not None:
        rows, following = page_rows(client, as_viewer, url)
        seen += rows
        assert following is None or "q=EDGE" in following, following
        url = f"/targets{following}" if following else None
    assert seen == names(0, 210, prefix="edge")
    response = client.get("/targets?q=EDGE&offset=200", headers=as_viewer)
    assert "Targets 201–210 of 210" in response.text
    assert 'href="?q=EDGE&amp;offset=100" rel="prev"' in response.text
    nothing = client.get("/targets?q=nosuch", headers=as_viewer)
    assert nothing.status_code == 200 and "No target's name contains “nosuch”" in nothing.text


def test_a_page_of_the_list_costs_the_same_at_any_fleet_size(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    add_targets(app, names(0, 110))
    client.get("/targets", headers=as_viewer)  # warm-up: caches
    with statements(app) as small:
        assert len(page_rows(client, as_viewer, "/targets")[0]) == 100
    add_targets(app, names(110, 400))
    with statements(app) as large:
        rows, _ = page_rows(client, as_viewer, "/targets?offset=200")
    assert rows == names(200, 300)
    assert len(large) == len(small), (small, large)
