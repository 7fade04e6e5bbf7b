"""The runs search's output text through the API and the runs page, on SQLite and
PostgreSQL: a NUL in it is a 422 naming ``q`` (it matched every run on SQLite and was a
database error on PostgreSQL); the same search without it answers."""

from __future__ import annotations

from fastapi.testclient import TestClient

from fleetcron.app import App
from integration.web.conftest import API, error_of, log_in


def test_a_nul_in_the_search_text_is_a_422_naming_q(
    app: App, client: TestClient, as_viewer: dict[str, str]
) -> None:
    for q in ("\x00", "a\x00b"):
        refused = client.get(f"{API}/runs", params={"q": q}, headers=as_viewer)
        assert refused.status_code == 422, refused.text
        error = error_of(refused)
        assert error["field"] == "q" and "NUL" in str(error["message"])

    answered = client.get(f"{API}/runs", params={"q": "a b"}, headers=as_viewer)
    assert answered.status_code == 200 and answered.json()["total"] == 0


def test_the_runs_page_says_so_too(app: App, client: TestClient) -> None:
    log_in(client, "viewer")

    page = client.get("/runs", params={"q": "a\x00b"})

    assert page.status_code == 422
    assert "NUL" in page.text and "Traceback" not in page.text
