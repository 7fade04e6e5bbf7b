"""``GET /api/v1/runs/{id}/output`` of a run that has ended answers its recorded output
(``source: recorded``) from byte ``since`` of what a follower saw while it ran, as
``runs tail`` of an ended run shows it; before, it answered ``source: none`` and no text
(SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store import run_newest
from fleetcron.store.schema import Run
from integration.web.conftest import API

Headers = dict[str, str]


@pytest.fixture
def run_id(app: App, operator: Actor) -> int:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, operator, "job", JobSpec(schedule="0 0 1 1 *", command="true"), target="box")
    [queued] = runs.request_run(app, operator, "job")
    return queued


def record(app: App, run_id: int, **values: Any) -> None:
    """Record the run as ended with this output (as the run store's finish does)."""
    with app.db.session() as session:
        session.execute(
            update(Run).where(Run.id == run_id).values(status="succeeded", exit_code=0, **values)
        )
        run_newest.refresh_for_runs(session, [run_id])  # as the run store does


def output(client: TestClient, headers: Headers, run_id: int, since: int) -> dict[str, Any]:
    response = client.get(f"{API}/runs/{run_id}/output?since={since}", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_an_ended_run_answers_its_recorded_output_from_since(
    app: App, client: TestClient, as_viewer: Headers, run_id: int
) -> None:
    queued = output(client, as_viewer, run_id, 0)
    assert (queued["source"], queued["text"], queued["running"]) == ("none", "", True)
    record(app, run_id, stdout_head="hello\nworld\n", stdout_bytes=12)

    whole = output(client, as_viewer, run_id, 0)
    rest = output(client, as_viewer, run_id, 6)
    done = output(client, as_viewer, run_id, 12)
    beyond = output(client, as_viewer, run_id, 99)

    assert (whole["source"], whole["running"], whole["status"]) == ("recorded", False, "succeeded")
    assert (whole["text"], whole["offset"], whole["total"], whole["gap"]) == (
        "hello\nworld\n", 12, 12, 0
    )  # fmt: skip
    assert (rest["text"], rest["offset"]) == ("world\n", 12)
    assert (done["text"], done["offset"]) == ("", 12)
    assert (beyond["text"], beyond["offset"]) == ("", 12)


def test_the_omitted_middle_of_a_long_output_is_the_gap(
    app: App, client: TestClient, as_viewer: Headers, run_id: int
) -> None:
    record(
        app, run_id, stdout_head="AAAA", stdout_tail="ZZZZ", stdout_bytes=100,
        stdout_truncated=True,
    )  # fmt: skip

    whole = output(client, as_viewer, run_id, 0)
    in_head = output(client, as_viewer, run_id, 2)
    in_gap = output(client, as_viewer, run_id, 50)
    in_tail = output(client, as_viewer, run_id, 98)

    assert (whole["text"], whole["gap"], whole["gap_at"], whole["offset"]) == (
        "AAAAZZZZ", 92, 4, 100
    )  # fmt: skip
    assert (in_head["text"], in_head["gap"], in_head["gap_at"]) == ("AAZZZZ", 92, 2)
    assert (in_gap["text"], in_gap["gap"], in_gap["gap_at"]) == ("ZZZZ", 46, 0)
    assert (in_tail["text"], in_tail["gap"]) == ("ZZ", 0)


def test_a_run_that_wrote_both_streams_answers_both_from_zero_only(
    app: App, client: TestClient, as_viewer: Headers, run_id: int
) -> None:
    record(app, run_id, stdout_head="out\n", stdout_bytes=4, stderr_head="err\n", stderr_bytes=4)

    whole = output(client, as_viewer, run_id, 0)
    later = output(client, as_viewer, run_id, 3)

    assert (whole["source"], whole["text"], whole["offset"], whole["gap"]) == (
        "recorded", "out\nerr\n", 8, 0
    )  # fmt: skip
    # Which of the 8 bytes the follower saw in the interleaved stream is not recorded.
    assert (later["text"], later["gap"], later["offset"]) == ("", 5, 8)


def test_a_running_run_still_answers_its_snapshot(
    app: App, client: TestClient, as_viewer: Headers, run_id: int
) -> None:
    """Negative control: only an ended run answers from the recorded columns."""
    with app.db.session() as session:
        session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(
                status="running", node="node-b", started_at=app.now(), stdout_head="recorded\n",
                stdout_bytes=9, live_output="live\n", live_bytes=5, live_at=app.now(),
            )
        )  # fmt: skip
        run_newest.refresh_for_runs(session, [run_id])

    body = output(client, as_viewer, run_id, 0)

    assert (body["source"], body["text"], body["running"]) == ("snapshot", "live\n", True)
