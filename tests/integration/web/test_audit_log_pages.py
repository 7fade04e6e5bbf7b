"""The audit log pages by offset as the targets list does (one pager for both): the count
shown, an older page while there are more events, a newer one back to the first page
(which carries no offset), the filters kept in both links."""

from __future__ import annotations

import html
import re

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from fleetcron.web.pages.runs import PAGE_SIZE
from integration.web.conftest import log_in, new_client

ADMIN = Actor("admin", "admin")
_PREV = re.compile(r'<a href="([^"]*)" rel="prev">')
_NEXT = re.compile(r'<a href="([^"]*)" rel="next">')
_SPAN = re.compile(r"<span>(\d+)–(\d+) of (\d+) events</span>")


def test_the_audit_log_pages_keep_the_filter_and_return_to_the_first(app: App) -> None:
    for index in range(PAGE_SIZE + 5):
        targets.add_target(app, ADMIN, TargetSpec(f"t{index:03d}", TargetKind.LOCAL))
    with new_client(app) as client:
        log_in(client, "admin")
        first = client.get("/audit", params={"action": "target.add"})
        assert first.status_code == 200, first.text
        assert _SPAN.findall(first.text) == [("1", str(PAGE_SIZE), str(PAGE_SIZE + 5))]
        assert _PREV.findall(first.text) == []
        (older,) = _NEXT.findall(first.text)
        assert html.unescape(older) == f"?action=target.add&offset={PAGE_SIZE}"

        second = client.get("/audit" + html.unescape(older))
        assert _SPAN.findall(second.text) == [
            (str(PAGE_SIZE + 1), str(PAGE_SIZE + 5), str(PAGE_SIZE + 5))
        ]
        assert _NEXT.findall(second.text) == []
        (newer,) = _PREV.findall(second.text)
        assert html.unescape(newer) == "?action=target.add"
