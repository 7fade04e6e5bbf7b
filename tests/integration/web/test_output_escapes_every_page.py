"""Every page that shows a command's output, a run's error or its reason prints it through
the one filter ``shown_output``: terminal sequences a target wrote (OSC 52 clipboard
writes, window titles, OSC 8 links) are shown as ``\\x1b`` text, and no page carries a raw
ESC or BEL byte, for viewers and operators alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.executors.base import ExecResult, OutputExcerpt
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import Run
from fleetcron.web.pages import render
from integration.web.conftest import log_in, new_client

ADMIN = Actor("admin", "admin")
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
TITLE = "\x1b]0;owned\x07"
LINK = "\x1b]8;;javascript:alert(9)\x1b\\link\x1b]8;;\x1b\\"
EVIL = f"{OSC52} {TITLE} {LINK}\n"
RAW = ("\x1b", "\x07")


def _excerpt(text: str) -> OutputExcerpt:
    return OutputExcerpt(head=f"head {text}", tail=f"tail {text}", total_bytes=9000, truncated=True)


@pytest.fixture
def evil_runs(app: App, clock: FakeClock) -> list[int]:
    """A failed run whose stdout, stderr, error and reason hold escapes, and a connection
    error whose error does (the dashboard lists it as unreachable)."""
    targets.add_target(app, ADMIN, TargetSpec("pbx1", TargetKind.LOCAL))
    targets.add_target(app, ADMIN, TargetSpec("pbx2", TargetKind.LOCAL))
    jobs.add_job(app, ADMIN, "evil", JobSpec("* * * * *", "printf x"), target="pbx1")
    jobs.add_job(app, ADMIN, "evil2", JobSpec("* * * * *", "printf y"), target="pbx2")
    store = RunStore(app.db, node=app.node_name, clock=clock)
    clock.advance(minutes=1)
    dispatches = {d.job_name: d.run_id for d in store.claim_due(clock.now).dispatches}
    end = clock.now + timedelta(seconds=1)
    failed = ExecResult(
        "failed", 1, _excerpt(EVIL), _excerpt(EVIL), clock.now, end, 1000, f"boom {TITLE}"
    )
    unreachable = ExecResult(
        "connect_error", None, _excerpt(""), _excerpt(""), clock.now, end, 1000, f"no {OSC52}"
    )
    assert store.finish([(dispatches["evil"], failed), (dispatches["evil2"], unreachable)]) == []
    with app.db.session() as session:
        session.execute(
            update(Run).where(Run.id == dispatches["evil"]).values(reason=f"why {LINK}")
        )
    return [dispatches["evil"], dispatches["evil2"]]


def _pages(runs: list[int]) -> list[str]:
    return [
        "/",
        "/runs",
        "/runs?status=failed",
        "/runs?q=head",
        *(f"/runs/{run_id}" for run_id in runs),
        "/targets",
        "/targets/pbx1",
        "/targets/pbx2",
        "/jobs",
        "/jobs/evil",
        "/jobs/evil2",
        "/upcoming",
        "/audit",
    ]


def _raw_in(client: TestClient, pages: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in pages:
        page = client.get(path)
        assert page.status_code == 200, (path, page.status_code)
        raw = [repr(c) for c in RAW if c in page.text]
        if raw:
            found[path] = raw
    return found


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_no_page_carries_a_raw_escape_of_a_runs_output(
    app: App, evil_runs: list[int], role: str
) -> None:
    with new_client(app) as client:
        log_in(client, role)
        found = _raw_in(client, _pages(evil_runs))
        target_page = client.get("/targets/pbx1").text
        run_page = client.get(f"/runs/{evil_runs[0]}").text

    assert found == {}
    # the text is shown, as text: the excerpt on the target page, the error, the reason
    assert "head \\x1b]52;c;cHduZWQ=\\x07" in target_page
    assert "tail \\x1b]52;c;" in target_page and "\\x1b]0;owned\\x07" in target_page
    assert "boom \\x1b]0;owned\\x07" in target_page
    assert "why \\x1b]8;;javascript:alert(9)" in run_page


def test_the_walk_finds_raw_escapes_when_the_filter_lets_them_through(
    app: App, evil_runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with the filter replaced by one that passes text through, the same
    walk finds raw escapes on the run pages, the target pages and the lists."""
    monkeypatch.setitem(render.templates.env.filters, "shown_output", lambda text: text)
    with new_client(app) as client:
        log_in(client, "viewer")
        found = _raw_in(client, _pages(evil_runs))

    assert {f"/runs/{evil_runs[0]}", "/targets/pbx1", "/runs", "/"} <= set(found)
