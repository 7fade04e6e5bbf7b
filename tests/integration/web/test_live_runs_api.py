"""GET /api/v1/runs/{id}/output and POST /api/v1/runs/{id}/stop, and the run page's Stop
form, on SQLite and PostgreSQL: a follower of a run this process runs reads it from
memory, a process that does not run it reads the run row's snapshot; a stop is for
operators, CSRF-protected, audited, immediate when this process runs the run and queued
to its owner otherwise; an ended run answers 409."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from fixtures.app import FakeClock
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.runs import reads as runs
from fleetcron.services.runs.views import show_run
from fleetcron.services.targets import edit as targets
from fleetcron.store import run_newest
from fleetcron.store.schema import AuditEvent, Run
from integration.executors.procs import kill_all, marker_seconds, sleeping
from integration.web.conftest import API, error_of, log_in, web_app
from waiting import eventually_async


@pytest.fixture
def job(app: App, operator: Actor) -> str:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, operator, "slow", JobSpec(schedule="0 0 1 1 *", command="true"), target="box")
    return "slow"


def set_run(app: App, run_id: int, **values: object) -> None:
    """Put a queued run into a state by hand (as the owner on another node would)."""
    with app.db.session() as session:
        session.execute(update(Run).where(Run.id == run_id).values(**values))
        run_newest.refresh_for_runs(session, [run_id])  # as the owner's store does


def test_another_nodes_run_is_followed_through_its_snapshot(
    app: App, client: TestClient, job: str, operator: Actor, as_viewer: dict[str, str],
    clock: FakeClock,
) -> None:  # fmt: skip
    [run_id] = runs.request_run(app, operator, job)
    set_run(
        app, run_id, status="running", node="node-b", started_at=clock.now,
        live_output="line 7\nline 8\n", live_bytes=1000, live_at=clock.now,
    )  # fmt: skip
    clock.advance(seconds=12)

    fresh = client.get(f"{API}/runs/{run_id}/output", headers=as_viewer)
    caught_up = client.get(f"{API}/runs/{run_id}/output?since=993", headers=as_viewer)
    ahead = client.get(f"{API}/runs/{run_id}/output?since=1000", headers=as_viewer)

    body = fresh.json()
    assert fresh.status_code == 200
    assert (body["source"], body["node"], body["here"], body["running"]) == (
        "snapshot", "node-b", False, True
    )  # fmt: skip
    assert (body["text"], body["gap"], body["offset"]) == ("line 7\nline 8\n", 986, 1000)
    assert body["elapsed_s"] == 12.0
    assert caught_up.json()["text"] == "line 8\n" and caught_up.json()["gap"] == 0
    assert (ahead.json()["text"], ahead.json()["offset"]) == ("", 1000)


def test_bad_offsets_and_unknown_runs_are_refused_with_json_errors(
    app: App, client: TestClient, job: str, operator: Actor, as_viewer: dict[str, str]
) -> None:
    [run_id] = runs.request_run(app, operator, job)

    negative = client.get(f"{API}/runs/{run_id}/output?since=-1", headers=as_viewer)
    text = client.get(f"{API}/runs/{run_id}/output?since=abc", headers=as_viewer)
    missing = client.get(f"{API}/runs/987654/output", headers=as_viewer)

    assert negative.status_code == 422 and "since" in str(error_of(negative))
    assert text.status_code == 422
    assert missing.status_code == 404 and "run 987654 does not exist" in str(error_of(missing))


def test_stop_is_for_operators_and_an_ended_run_answers_409(
    app: App, client: TestClient, job: str, operator: Actor,
    as_operator: dict[str, str], as_viewer: dict[str, str], clock: FakeClock,
) -> None:  # fmt: skip
    [queued] = runs.request_run(app, operator, job)
    clock.advance(seconds=1)
    [ended] = runs.request_run(app, operator, job)
    set_run(app, ended, status="succeeded")

    refused = client.post(f"{API}/runs/{queued}/stop", headers=as_viewer)
    cancelled = client.post(f"{API}/runs/{queued}/stop", headers=as_operator)
    again = client.post(f"{API}/runs/{queued}/stop", headers=as_operator)
    finished = client.post(f"{API}/runs/{ended}/stop", headers=as_operator)

    assert refused.status_code == 403
    assert cancelled.status_code == 202
    body = cancelled.json()
    assert {k: body[k] for k in ("run_id", "status", "node", "immediate")} == {
        "run_id": queued, "status": "cancelled", "node": app.node_name, "immediate": False
    }  # fmt: skip
    assert (body["run"]["job"], body["run"]["target"], body["run"]["stop_requested_by"]) == (
        job, "box", "olivia"
    )  # fmt: skip
    assert "never starts" in body["run"]["effect"]
    assert again.status_code == 409
    assert "has already ended (cancelled)" in str(error_of(again))
    assert finished.status_code == 409 and error_of(finished)["field"] == "run"
    with app.db.read() as session:
        events = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "run.stop").order_by(AuditEvent.id)
        ).all()
        # The viewer was turned away by the route, before the service (as on every route);
        # the route audits the refusal (aggregated, with the count so far).
        assert [(e.actor, e.success) for e in events] == [
            ("victor", False), ("olivia", True), ("olivia", False), ("olivia", False)
        ]  # fmt: skip
        assert events[0].detail["refused"] == 1 and events[0].detail["reason"] == "role"


def test_the_stop_form_needs_the_csrf_token(
    app: App, browser: TestClient, job: str, operator: Actor
) -> None:
    [run_id] = runs.request_run(app, operator, job)

    forged = browser.post(f"/runs/{run_id}/stop", data={})
    assert forged.status_code == 403
    assert show_run(app, operator, run_id).status == "queued"

    page = browser.get(f"/runs/{run_id}")
    assert 'method="get" action="/runs/' in page.text and ">Cancel…</button>" in page.text
    confirm = browser.get(f"/runs/{run_id}/stop")
    assert show_run(app, operator, run_id).status == "queued"  # asking changes nothing
    token = confirm.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    assert f">Cancel run #{run_id}</button>" in confirm.text
    done = browser.post(f"/runs/{run_id}/stop", data={"csrf_token": token})
    assert done.status_code == 303
    assert show_run(app, operator, run_id).status == "cancelled"
    assert "Stopped by" in browser.get(f"/runs/{run_id}").text


def test_the_facts_of_a_stop_are_shown_before_it_and_an_ended_run_answers_409(
    app: App, client: TestClient, job: str, operator: Actor,
    as_operator: dict[str, str], as_viewer: dict[str, str], clock: FakeClock,
) -> None:  # fmt: skip
    [run_id] = runs.request_run(app, operator, job)
    set_run(app, run_id, status="running", node="node-b", started_at=clock.now)

    asked = client.get(f"{API}/runs/{run_id}/stop", headers=as_operator)
    refused = client.get(f"{API}/runs/{run_id}/stop", headers=as_viewer)

    assert asked.status_code == 200
    facts = asked.json()
    assert (facts["job"], facts["target"], facts["node"], facts["status"]) == (
        job, "box", "node-b", "running"
    )  # fmt: skip
    assert facts["started_at"] is not None and facts["stop_requested_by"] is None
    assert "SIGTERM" in facts["effect"] and "SIGKILL" in facts["effect"]
    assert "5 s later" in facts["effect"]
    assert refused.status_code == 403
    # Asking wrote nothing: the run still runs, with no stop requested.
    assert show_run(app, operator, run_id).stop_requested_by is None
    # Control: the same check sees a stop once one is made.
    assert client.post(f"{API}/runs/{run_id}/stop", headers=as_operator).status_code == 202
    assert show_run(app, operator, run_id).stop_requested_by == "olivia"
    again = client.get(f"{API}/runs/{run_id}/stop", headers=as_operator)
    assert again.json()["stop_requested_by"] == "olivia"
    set_run(app, run_id, status="cancelled")
    ended = client.get(f"{API}/runs/{run_id}/stop", headers=as_operator)
    assert ended.status_code == 409 and error_of(ended)["field"] == "run"


async def test_a_run_of_this_process_is_followed_from_memory_and_stopped_at_once(
    app: App, job: str, operator: Actor, clock: FakeClock
) -> None:
    marker = marker_seconds()
    jobs.edit_job(app, operator, job, command=f"echo from memory; sleep {marker}")
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    web = web_app(app)
    web.state.scheduler = scheduler
    try:
        [run_id] = runs.request_run(app, operator, job)
        await scheduler.tick()
        entry = scheduler.live.get(run_id)
        assert entry is not None
        # The requests below block this event loop: the output must be read before them.
        await eventually_async(
            lambda: sleeping(marker) and entry.output.total_bytes == len("from memory\n"),
            10,
            "the command to run and its first line to be read",
        )
        with TestClient(web, raise_server_exceptions=False, follow_redirects=False) as client:
            log_in(client, "operator")
            body = client.get(f"{API}/runs/{run_id}/output").json()
            page = client.get(f"/runs/{run_id}").text
            token = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
            stop = client.post(f"{API}/runs/{run_id}/stop", headers={"X-CSRF-Token": token})
        await scheduler.idle()
    finally:
        kill_all(marker)
        await scheduler.shutdown()

    assert (body["source"], body["here"], body["text"]) == ("live", True, "from memory\n")
    assert "from memory" in page and "(this node)" in page
    assert stop.status_code == 202 and stop.json()["immediate"] is True
    assert sleeping(marker) == []
    run = show_run(app, operator, run_id)
    assert (run.status, run.stop_requested_by, run.stdout_head) == (
        "cancelled", "olivia", "from memory\n"
    )  # fmt: skip


def test_pages_that_class_runs_show_a_cancelled_one_as_not_run_to_an_outcome(
    app: App, browser: TestClient, operator: Actor
) -> None:
    targets.add_target(app, Actor("admin", "admin"), TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, operator, "wide", JobSpec(schedule="0 0 1 1 *", command="true"), bulk=True)
    [run_id] = runs.request_run(app, operator, "wide")
    runs.stop_run(app, operator, run_id)

    listing = browser.get("/jobs")
    job_page = browser.get("/jobs/wide")
    dashboard = browser.get("/")

    assert show_run(app, operator, run_id).status == "cancelled"
    assert (listing.status_code, job_page.status_code, dashboard.status_code) == (200, 200, 200)
    assert "cancelled" in browser.get(f"/runs/{run_id}").text


def test_another_nodes_run_page_names_the_node_and_the_age_of_its_output(
    app: App, browser: TestClient, job: str, operator: Actor, clock: FakeClock
) -> None:
    [run_id] = runs.request_run(app, operator, job)
    set_run(
        app, run_id, status="running", node="node-b", started_at=clock.now,
        live_output="from node b\n", live_bytes=12, live_at=clock.now,
    )  # fmt: skip
    clock.advance(seconds=3)

    page = browser.get(f"/runs/{run_id}").text

    assert "node-b" in page and f"this page is served by {app.node_name}" in page
    assert "output as of 3 s ago" in page
    assert "from node b" in page
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in page
    set_run(app, run_id, status="succeeded", finished_at=clock.now)
    assert 'http-equiv="refresh"' not in browser.get(f"/runs/{run_id}").text


def test_a_pending_row_of_a_rollout_is_cancelled_before_it_starts(
    app: App, client: TestClient, job: str, operator: Actor, as_operator: dict[str, str]
) -> None:
    [run_id] = runs.request_run(app, operator, job)
    set_run(app, run_id, status="pending")

    stopped = client.post(f"{API}/runs/{run_id}/stop", headers=as_operator)

    assert stopped.status_code == 202 and stopped.json()["status"] == "cancelled"
    run = show_run(app, operator, run_id)
    assert (run.status, run.started_at) == ("cancelled", None)
