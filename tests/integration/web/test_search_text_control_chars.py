"""The text of a search (``q=`` of the targets list and of the runs search, API and pages)
is checked in one place: a NUL or another control character is a 422 naming ``q``, on
SQLite and on PostgreSQL alike. Before, ``/targets?q=%00`` answered 200 on SQLite (the NUL
ended the LIKE pattern: every target matched) and 422 on PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.core.validation import validate_search_text
from fleetcron.errors import InvalidInput
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of, log_in

Headers = dict[str, str]
CONTROLS = ["\x00", "pbx\x00", "\x1b[31m", "a\nb", "a\tb", "\x7f", "a\x85b"]


@pytest.fixture
def fleet(app: App) -> None:
    for name in ("pbx1", "pbx2", "web1"):
        targets.add_target(app, Actor("admin", "admin"), TargetSpec(name, TargetKind.LOCAL))


@pytest.mark.parametrize("text", CONTROLS)
def test_every_search_refuses_a_control_character_naming_q(
    client: TestClient, as_viewer: Headers, fleet: None, text: str
) -> None:
    for route in (f"{API}/targets", f"{API}/runs"):
        refused = client.get(route, params={"q": text}, headers=as_viewer)
        assert refused.status_code == 422, (route, refused.text)
        error = error_of(refused)
        assert error["field"] == "q", (route, error)
        assert "control character" in str(error["message"]), (route, error)
    log_in(client, "viewer")
    for route in ("/targets", "/runs"):
        page = client.get(route, params={"q": text})
        assert page.status_code == 422, (route, page.text[:300])
        assert "control character" in page.text and "Traceback" not in page.text


def test_the_pages_say_so_in_html(client: TestClient, fleet: None) -> None:
    log_in(client, "viewer")
    for route in ("/targets", "/runs"):
        page = client.get(route, params={"q": "pbx\x00"})
        assert page.status_code == 422, route
        assert "NUL" in page.text and "Traceback" not in page.text


def test_the_same_search_without_it_answers(
    client: TestClient, as_viewer: Headers, fleet: None
) -> None:
    """Negative control: the text without the control character is searched."""
    found = client.get(f"{API}/targets", params={"q": "PBX"}, headers=as_viewer)
    assert found.status_code == 200
    assert [t["name"] for t in found.json()] == ["pbx1", "pbx2"]
    assert client.get(f"{API}/runs", params={"q": "pbx"}, headers=as_viewer).status_code == 200


def test_the_rule_names_the_character_and_lets_other_text_through() -> None:
    for text in ("", "pbx-1", "ünïcode ✓", "100%_done", "a b"):
        assert validate_search_text(text, field="q") == text
    with pytest.raises(InvalidInput) as raised:
        validate_search_text("x\x1by", field="q")
    assert raised.value.field == "q" and "escape" in raised.value.message
