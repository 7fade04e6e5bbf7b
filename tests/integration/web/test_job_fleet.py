"""One job across its targets, on SQLite and PostgreSQL: the targets view (state, strip,
streak, filters, sort, paging), per-job counts, slots, targeted runs and pause/resume of a
selection, through the service, the API and the CLI.

The history is real: a scheduler ticks a bulk job (``* * * * *``) on three local targets
for three minutes; the command fails on ``bravo`` only. The fixture clock starts at
2026-03-02 09:00:30 UTC. It is recorded once per module and database (``sqlite_history``,
``postgres_history``), and each test that takes ``history`` starts from a copy of it, its
clock moved past those three minutes, as if it had recorded it itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from cli_env import point_the_cli_at
from fixtures.app import CLOCK_START, FakeClock, derived_postgres, derived_sqlite, make_settings
from fixtures.postgres import PostgresServer
from fleetcron.app import SYSTEM, Actor, App
from fleetcron.cli.main import cli
from fleetcron.cli.output import run_cli
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import InvalidInput, NotFound, PermissionDenied
from fleetcron.scheduler.service import Scheduler
from fleetcron.services.fleet import grid as fleet_grid
from fleetcron.services.fleet import job_page as job_fleet
from fleetcron.services.fleet.job_page import TargetQuery
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs import selection as fleet_selection
from fleetcron.services.jobs import slots as job_slots
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.jobs.selection import Selection
from fleetcron.services.runs import reads as runs
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import AuditEvent, Run
from integration.web.conftest import API, error_of

Headers = dict[str, str]
JOB = "reload"
FLEET = (("alpha", "env=prod"), ("bravo", "env=prod"), ("charlie", "env=staging"))
FAILS_ON_BRAVO = 'test "$FLEETCRON_TARGET" != bravo'


async def tick_minutes(app: App, clock: FakeClock, minutes: int) -> list[datetime]:
    scheduler = Scheduler(app, clock=clock)
    await scheduler.start()
    times = []
    for _ in range(minutes):
        times.append(clock.advance(minutes=1))
        await scheduler.tick()
        await scheduler.idle()
    await scheduler.shutdown()
    return times


#: The minutes of history, each a run on every target.
MINUTES = 3


async def record(app: App, clock: FakeClock) -> list[datetime]:
    """Three paired local targets, the bulk job, three minutes of real runs; the slots."""
    for name, label in FLEET:
        targets.add_target(app, SYSTEM, TargetSpec(name, TargetKind.LOCAL, labels=[label]))
    jobs.add_job(app, SYSTEM, JOB, JobSpec(schedule="* * * * *", command=FAILS_ON_BRAVO), bulk=True)
    slots = await tick_minutes(app, clock, MINUTES)
    return [slot.replace(second=0, microsecond=0) for slot in slots]


def record_into(database_url: str, directory: Path) -> None:
    """:func:`record` into a database, with a clock that starts where a test's starts."""
    clock = FakeClock(CLOCK_START)
    app = App.open(make_settings(directory / "data", database_url), clock=clock)
    try:
        asyncio.run(record(app, clock))
        assert run_count(app) == MINUTES * len(FLEET)
    finally:
        app.close()


@pytest.fixture(scope="module")
def sqlite_history(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return derived_sqlite(sqlite_template, tmp_path_factory.mktemp("history"), record_into)


@pytest.fixture(scope="module")
def postgres_history(
    postgres_server: PostgresServer,
    postgres_template: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    name = f"history_{uuid.uuid4().hex[:12]}"
    directory = tmp_path_factory.mktemp("history")
    try:
        yield derived_postgres(postgres_server, postgres_template, name, directory, record_into)
    finally:
        postgres_server.drop_database(name)


@pytest.fixture
def sqlite_source(request: pytest.FixtureRequest, sqlite_template: Path) -> Path:
    """A test that takes ``history`` starts from a copy of the recorded one."""
    if "history" not in request.fixturenames:
        return sqlite_template
    recorded: Path = request.getfixturevalue("sqlite_history")
    return recorded


@pytest.fixture
def postgres_source(request: pytest.FixtureRequest, postgres_template: str) -> str:
    if "history" not in request.fixturenames:
        return postgres_template
    recorded: str = request.getfixturevalue("postgres_history")
    return recorded


@pytest.fixture
def history(app: App, clock: FakeClock) -> list[datetime]:
    """The recorded history, in this test's own copy of the database (:func:`record`); the
    clock moved past it as recording it moved it; the slots."""
    assert clock.now == CLOCK_START, "the history is recorded from the clock's start"
    assert run_count(app) == MINUTES * len(FLEET), "the database is not a copy of the history"
    slots = [clock.advance(minutes=1) for _ in range(MINUTES)]
    return [slot.replace(second=0, microsecond=0) for slot in slots]


def run_count(app: App) -> int:
    with app.db.read() as session:
        return session.scalar(select(func.count(Run.id))) or 0


def queued_targets(app: App) -> list[str]:
    with app.db.read() as session:
        return sorted(session.scalars(select(Run.target_name).where(Run.status == "queued")))


# --- the targets view ---------------------------------------------------------------------


def test_each_target_shows_its_state_strip_and_the_failure_streak_since_its_first_failure(
    app: App, viewer: Actor, history: list[datetime]
) -> None:
    page = job_fleet.job_targets(app, viewer, JOB)

    by = {row.target: row for row in page.items}
    assert [row.target for row in page.items] == ["alpha", "bravo", "charlie"]
    assert {name: row.state for name, row in by.items()} == {
        "alpha": "ok",
        "bravo": "failed",
        "charlie": "ok",
    }
    assert [m.status for m in by["bravo"].strip] == ["failed"] * 3
    assert [m.scheduled_for for m in by["alpha"].strip] == history  # oldest first
    assert (by["bravo"].streak, by["bravo"].streak_since) == (3, history[0])
    assert (by["alpha"].streak, by["alpha"].streak_since) == (0, None)
    assert by["bravo"].last is not None and by["bravo"].last.exit_code == 1
    assert by["alpha"].last is not None and by["alpha"].last.exit_code == 0
    assert by["alpha"].last.duration_ms is not None
    assert all(
        row.next_fire_at is not None and row.next_fire_at > history[-1] for row in by.values()
    )
    assert page.counts.as_dict() == {
        "total": 3,
        "ok": 2,
        "failed": 1,
        "running": 0,
        "waiting": 0,
        "missed": 0,
        "skipped": 0,
        "never": 0,
        "paused": 0,
    }


async def test_the_streak_restarts_after_a_success(
    app: App, clock: FakeClock, viewer: Actor, history: list[datetime]
) -> None:
    jobs.edit_job(app, SYSTEM, JOB, command="true")
    await tick_minutes(app, clock, 1)
    jobs.edit_job(app, SYSTEM, JOB, command=FAILS_ON_BRAVO)
    later = await tick_minutes(app, clock, 2)

    bravo = job_fleet.job_targets(app, viewer, JOB, TargetQuery(statuses=["failed"])).items
    assert [row.target for row in bravo] == ["bravo"]
    assert (bravo[0].streak, bravo[0].streak_since) == (2, later[0].replace(second=0))
    assert [m.state for m in bravo[0].strip] == ["failed"] * 3 + ["ok"] + ["failed"] * 2


def test_filters_by_state_pause_and_label_narrow_together(
    app: App, viewer: Actor, history: list[datetime]
) -> None:
    jobs.set_enabled(app, SYSTEM, JOB, False, target="alpha")
    targets.pause_target(app, SYSTEM, "charlie", reason="maintenance")

    def names(**query: object) -> list[str]:
        page = job_fleet.job_targets(app, viewer, JOB, TargetQuery(**query))  # type: ignore[arg-type]
        return [row.target for row in page.items]

    assert names(statuses=["failed"]) == ["bravo"]
    assert names(statuses=["ok"]) == ["alpha", "charlie"]  # paused targets keep their state
    assert names(statuses=["paused"]) == ["alpha", "charlie"]
    assert names(statuses=["active"]) == ["bravo"]
    assert names(statuses=["ok", "active"]) == []
    assert names(statuses=["ok,failed"]) == ["alpha", "bravo", "charlie"]
    assert names(labels=["env=prod"]) == ["alpha", "bravo"]
    assert names(labels=["env=prod"], statuses=["paused"]) == ["alpha"]
    page = job_fleet.job_targets(app, viewer, JOB)
    assert page.counts.paused == 2 and page.counts.ok == 2
    by = {row.target: row for row in page.items}
    assert (by["alpha"].enabled, by["alpha"].target_paused) == (False, False)
    assert (by["charlie"].enabled, by["charlie"].target_paused) == (True, True)


def test_sorting_and_paging(app: App, viewer: Actor, history: list[datetime]) -> None:
    def names(**query: object) -> list[str]:
        page = job_fleet.job_targets(app, viewer, JOB, TargetQuery(**query))  # type: ignore[arg-type]
        return [row.target for row in page.items]

    assert names(sort="status") == ["bravo", "alpha", "charlie"]
    assert names(sort="-target") == ["charlie", "bravo", "alpha"]
    assert names(sort="streak") == ["bravo", "alpha", "charlie"]
    assert names(sort="next") == names(sort="last") == ["alpha", "bravo", "charlie"]  # ties
    assert names(sort="-next") == ["alpha", "bravo", "charlie"]  # ties stay in name order
    assert names(limit=2) == ["alpha", "bravo"]
    assert names(limit=2, offset=2) == ["charlie"]
    page = job_fleet.job_targets(app, viewer, JOB, TargetQuery(limit=1, offset=1, strip=2))
    assert (page.matched, len(page.items), len(page.items[0].strip)) == (3, 1, 2)


def test_sorting_by_duration_reads_each_targets_newest_run(
    app: App, viewer: Actor, history: list[datetime]
) -> None:
    """The page reads the newest runs' times only for the sorts that need them; those
    sorts still order by the newest run's own duration."""
    took = {"alpha": 100, "bravo": 3000, "charlie": 2000}
    with app.db.session() as session:
        for run in session.scalars(select(Run).where(Run.scheduled_for == history[-1])):
            run.duration_ms = took[run.target_name]

    def names(sort: str) -> list[str]:
        page = job_fleet.job_targets(app, viewer, JOB, TargetQuery(sort=sort))
        return [row.target for row in page.items]

    assert names("duration") == ["bravo", "charlie", "alpha"]  # longest first
    assert names("-duration") == ["alpha", "charlie", "bravo"]
    assert names("target") == ["alpha", "bravo", "charlie"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (TargetQuery(statuses=["broken"]), "status"),
        (TargetQuery(sort="colour"), "sort"),
        (TargetQuery(labels=["env"]), "label"),
        (TargetQuery(limit=0), "limit"),
        (TargetQuery(strip=1000), "strip"),
    ],
)
def test_a_bad_query_names_the_field(
    app: App, viewer: Actor, history: list[datetime], query: TargetQuery, field: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        job_fleet.job_targets(app, viewer, JOB, query)
    assert raised.value.field == field


def test_per_job_counts_and_the_grid(app: App, viewer: Actor, history: list[datetime]) -> None:
    jobs.add_job(app, SYSTEM, "quiet", JobSpec(schedule="0 3 * * *", command="true"), bulk=True)

    counts = fleet_grid.job_counts(app, viewer)
    grid = fleet_grid.fleet_grid(app, viewer, limit=2)

    assert (counts[JOB].ok, counts[JOB].failed, counts[JOB].total) == (2, 1, 3)
    assert (counts["quiet"].never, counts["quiet"].total) == (3, 3)
    assert grid.jobs == ["quiet", JOB] and grid.targets == ["alpha", "bravo"]
    assert grid.cells[("bravo", JOB)].state == "failed"
    assert grid.cells[("alpha", "quiet")].state == "never"
    assert grid.more_targets == 1


def test_slots_group_the_runs_of_one_fire_with_counts_and_page_by_time(
    app: App, viewer: Actor, history: list[datetime]
) -> None:
    first = job_slots.job_slots(app, viewer, JOB, limit=2, run_ids=True)

    assert [s.scheduled_for for s in first.items] == history[::-1][:2]
    slot = first.items[0]
    assert (slot.runs, slot.by_status, slot.failed, slot.trigger) == (
        3,
        {"succeeded": 2, "failed": 1},
        1,
        "schedule",
    )
    assert len(slot.run_ids) == 3
    assert first.next_before == history[1]
    rest = job_slots.job_slots(app, viewer, JOB, limit=2, before=first.next_before)
    assert [s.scheduled_for for s in rest.items] == [history[0]]
    assert rest.next_before is None


# --- targeted runs ------------------------------------------------------------------------


def test_run_failed_queues_only_the_failed_target_and_audits_the_selection(
    app: App, operator: Actor, history: list[datetime]
) -> None:
    run_ids = runs.request_run(app, operator, JOB, selection=Selection(failed=True))

    assert queued_targets(app) == ["bravo"] and len(run_ids) == 1
    with app.db.read() as session:
        event = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "job.run").order_by(AuditEvent.id.desc())
        ).first()
    assert event is not None and event.success
    assert event.detail["selection"] == {"failed": True}


def test_run_failed_again_while_the_rerun_is_queued_queues_nothing(
    app: App, operator: Actor, history: list[datetime]
) -> None:
    runs.request_run(app, operator, JOB, selection=Selection(failed=True))
    before = run_count(app)

    with pytest.raises(InvalidInput) as raised:
        runs.request_run(app, operator, JOB, selection=Selection(failed=True))

    assert raised.value.field == "failed"
    assert run_count(app) == before


async def test_run_failed_after_everything_succeeded_queues_nothing(
    app: App, clock: FakeClock, operator: Actor, history: list[datetime]
) -> None:
    """The negative control of the selection: with every newest run a success, --failed
    selects nothing (so the selection above is not "everything")."""
    jobs.edit_job(app, SYSTEM, JOB, command="true")
    await tick_minutes(app, clock, 1)
    before = run_count(app)

    with pytest.raises(InvalidInput, match="nothing queued"):
        runs.request_run(app, operator, JOB, selection=Selection(failed=True))

    assert run_count(app) == before


def test_run_by_selector_and_by_several_targets(
    app: App, operator: Actor, history: list[datetime]
) -> None:
    runs.request_run(app, operator, JOB, selection=Selection(selector="env=staging"))
    assert queued_targets(app) == ["charlie"]
    jobs.set_enabled(app, SYSTEM, JOB, False, target="alpha")
    runs.request_run(app, operator, JOB, selection=Selection(targets=("alpha", "bravo")))
    # named targets run even where the job is paused, as --target always did
    assert queued_targets(app) == ["alpha", "bravo", "charlie"]
    with pytest.raises(InvalidInput) as raised:
        runs.request_run(app, operator, JOB, selection=Selection(selector="env=prod,role=db"))
    assert raised.value.field == "selector"
    with pytest.raises(NotFound):
        runs.request_run(app, operator, JOB, selection=Selection(targets=("nosuch",)))
    assert queued_targets(app) == ["alpha", "bravo", "charlie"]


def test_a_viewer_may_read_the_job_page_but_not_run_or_pause(
    app: App, viewer: Actor, history: list[datetime]
) -> None:
    assert job_fleet.job_targets(app, viewer, JOB).counts.total == 3
    with pytest.raises(PermissionDenied):
        runs.request_run(app, viewer, JOB, selection=Selection(failed=True))
    with pytest.raises(PermissionDenied):
        fleet_selection.set_enabled_on(app, viewer, JOB, ["alpha"], False)
    assert queued_targets(app) == []


def test_pause_and_resume_a_selection(app: App, operator: Actor, history: list[datetime]) -> None:
    assert fleet_selection.set_enabled_on(app, operator, JOB, ["alpha", "bravo"], False) == 2
    assert fleet_selection.set_enabled_on(app, operator, JOB, ["alpha", "bravo"], False) == 0
    view = jobs.show_job(app, operator, JOB)
    assert {a.target: a.enabled for a in view.assignments} == {
        "alpha": False,
        "bravo": False,
        "charlie": True,
    }
    with pytest.raises(NotFound):
        fleet_selection.set_enabled_on(app, operator, JOB, ["charlie", "nosuch"], False)
    assert fleet_selection.set_enabled_on(app, operator, JOB, ["bravo"], True) == 1
    assert jobs.show_job(app, operator, JOB).enabled == 2


# --- API ----------------------------------------------------------------------------------


def test_api_targets_filters_and_links_each_last_run(
    client: TestClient, as_viewer: Headers, history: list[datetime]
) -> None:
    response = client.get(
        f"{API}/jobs/{JOB}/targets",
        params={"status": "failed", "strip": 2},
        headers=as_viewer,
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["counts"]["failed"] == 1 and body["matched"] == 1
    (row,) = body["items"]
    assert (row["target"], row["state"], row["streak"]) == ("bravo", "failed", 3)
    assert [m["state"] for m in row["strip"]] == ["failed", "failed"]
    run = client.get(row["last"]["url"], headers=as_viewer).json()
    assert (run["target"], run["status"]) == ("bravo", "failed")


def test_api_targets_refuses_a_bad_status_with_a_json_error(
    client: TestClient, as_viewer: Headers, history: list[datetime]
) -> None:
    response = client.get(f"{API}/jobs/{JOB}/targets?status=broken", headers=as_viewer)

    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "status" and "broken" in str(error["message"])


def test_api_slots_link_to_the_runs_of_each_slot(
    client: TestClient, as_viewer: Headers, history: list[datetime]
) -> None:
    body = client.get(f"{API}/jobs/{JOB}/slots?limit=1", headers=as_viewer).json()

    (slot,) = body["items"]
    assert slot["by_status"] == {"succeeded": 2, "failed": 1}
    listed = client.get(slot["runs_url"], headers=as_viewer).json()
    assert listed["total"] == 3
    assert {r["scheduled_for"] for r in listed["items"]} == {slot["scheduled_for"]}


def test_api_run_failed_selector_and_targets(
    app: App, client: TestClient, as_operator: Headers, history: list[datetime]
) -> None:
    response = client.post(f"{API}/jobs/{JOB}/run", json={"failed": True}, headers=as_operator)
    assert response.status_code == 202, response.text
    assert queued_targets(app) == ["bravo"]

    response = client.post(
        f"{API}/jobs/{JOB}/run", json={"selector": "env=staging"}, headers=as_operator
    )
    assert response.status_code == 202 and queued_targets(app) == ["bravo", "charlie"]

    response = client.post(
        f"{API}/jobs/{JOB}/run", json={"targets": ["alpha"]}, headers=as_operator
    )
    assert response.status_code == 202 and queued_targets(app) == ["alpha", "bravo", "charlie"]


def test_api_a_selection_matching_nothing_is_a_4xx_and_queues_nothing(
    app: App, client: TestClient, as_operator: Headers, history: list[datetime]
) -> None:
    before = run_count(app)

    nothing = client.post(
        f"{API}/jobs/{JOB}/run", json={"selector": "env=nowhere"}, headers=as_operator
    )
    unknown = client.post(f"{API}/jobs/{JOB}/run", json={"targets": ["ghost"]}, headers=as_operator)
    typo = client.post(f"{API}/jobs/{JOB}/run", json={"failled": True}, headers=as_operator)

    assert (nothing.status_code, error_of(nothing)["field"]) == (422, "selector")
    assert unknown.status_code == 404 and error_of(unknown)["code"] == "not_found"
    assert typo.status_code == 422
    assert run_count(app) == before


def test_api_an_empty_targets_list_or_selector_queues_nothing(
    app: App, client: TestClient, as_operator: Headers, history: list[datetime]
) -> None:
    before = run_count(app)

    empty = client.post(f"{API}/jobs/{JOB}/run", json={"targets": []}, headers=as_operator)
    blank = client.post(f"{API}/jobs/{JOB}/run", json={"selector": " "}, headers=as_operator)

    assert (empty.status_code, error_of(empty)["field"]) == (422, "targets")
    assert (blank.status_code, error_of(blank)["field"]) == (422, "selector")
    assert run_count(app) == before
    # Negative control: no selection at all is a run on every target.
    every = client.post(f"{API}/jobs/{JOB}/run", json={}, headers=as_operator)
    assert every.status_code == 202 and queued_targets(app) == ["alpha", "bravo", "charlie"]


def test_api_pause_and_resume_selected(
    app: App, client: TestClient, as_operator: Headers, as_viewer: Headers, history: list[datetime]
) -> None:
    body = {"targets": ["alpha", "charlie"]}
    refused = client.post(f"{API}/jobs/{JOB}/pause", json=body, headers=as_viewer)
    paused = client.post(f"{API}/jobs/{JOB}/pause", json=body, headers=as_operator)

    assert refused.status_code == 403
    assert paused.status_code == 200 and paused.json()["changed"] == 2
    assert jobs.show_job(app, SYSTEM, JOB).enabled == 1
    resumed = client.post(
        f"{API}/jobs/{JOB}/resume", json={"targets": ["alpha"]}, headers=as_operator
    )
    assert resumed.json()["changed"] == 1
    empty = client.post(f"{API}/jobs/{JOB}/pause", json={"targets": []}, headers=as_operator)
    assert empty.status_code == 422


# --- CLI ----------------------------------------------------------------------------------


@pytest.fixture
def cli_env(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    point_the_cli_at(app, monkeypatch)
    monkeypatch.setenv("FLEETCRON_ALLOW_LOCAL_TARGETS", "true")


def fleetcron(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run_cli(cli, list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_job_status_json_and_table(
    cli_env: None, capsys: pytest.CaptureFixture[str], history: list[datetime]
) -> None:
    code, out, _ = fleetcron(capsys, "job", "status", JOB, "--json", "--status", "failed")
    assert code == 0
    body = json.loads(out)
    assert [row["target"] for row in body["items"]] == ["bravo"]
    assert body["items"][0]["streak"] == 3 and body["counts"]["ok"] == 2

    code, out, _ = fleetcron(
        capsys, "job", "status", JOB, "--label", "env=prod", "--sort", "status"
    )
    assert code == 0
    assert "2 ok, 1 failed, 0 running, 0 paused" in out
    lines = [line for line in out.splitlines() if "alpha" in line or "bravo" in line]
    assert "bravo" in lines[0] and "XXX" in lines[0] and "+++" in lines[1]
    # Durations of these quick commands read in milliseconds (they read "0.0s" before).
    assert all(re.search(r"\b\d+ ms\b", line) for line in lines), lines
    assert "charlie" not in out


def test_cli_job_status_bad_input_exits_2(
    cli_env: None, capsys: pytest.CaptureFixture[str], history: list[datetime]
) -> None:
    code, _, err = fleetcron(capsys, "job", "status", JOB, "--sort", "colour")
    assert code == 2 and "sort" in err and "Traceback" not in err
    code, _, err = fleetcron(capsys, "job", "status", "nosuch")
    assert code == 2


def test_cli_job_status_names_the_slots_option_it_was_given(
    cli_env: None, capsys: pytest.CaptureFixture[str], history: list[datetime]
) -> None:
    code, _, err = fleetcron(capsys, "job", "status", JOB, "--slots", "100000")
    assert code == 2 and "'--slots'" in err and "0<=x<=100" in err
    assert "strip" not in err and "Traceback" not in err
    code, out, _ = fleetcron(capsys, "job", "status", JOB, "--slots", "2", "--json")
    assert code == 0 and {len(row["strip"]) for row in json.loads(out)["items"]} == {2}


def test_cli_job_run_with_an_empty_selector_queues_nothing(
    app: App, cli_env: None, capsys: pytest.CaptureFixture[str], history: list[datetime]
) -> None:
    before = run_count(app)
    for blank in ("", " "):
        code, _, err = fleetcron(capsys, "job", "run", JOB, "--selector", blank)
        assert code == 2 and "selector" in err and "nothing queued" in err
    assert run_count(app) == before


def test_cli_job_slots(
    cli_env: None, capsys: pytest.CaptureFixture[str], history: list[datetime]
) -> None:
    code, out, _ = fleetcron(capsys, "job", "slots", JOB, "--json", "--limit", "2")
    assert code == 0
    body = json.loads(out)
    assert [s["by_status"] for s in body["items"]] == [{"succeeded": 2, "failed": 1}] * 2
    assert body["next_before"] is not None


def test_cli_job_run_failed_and_a_selection_matching_nothing(
    app: App, cli_env: None, capsys: pytest.CaptureFixture[str], history: list[datetime]
) -> None:
    code, out, _ = fleetcron(capsys, "job", "run", JOB, "--failed")
    assert code == 0 and out.startswith("queued 1 run(s)")
    assert queued_targets(app) == ["bravo"]

    before = run_count(app)
    code, _, err = fleetcron(capsys, "job", "run", JOB, "--selector", "env=nowhere")
    assert code == 2 and "selector" in err and "nothing queued" in err
    code, _, err = fleetcron(capsys, "job", "run", JOB, "--target", "alpha", "--target", "ghost")
    assert code == 2
    assert run_count(app) == before

    code, _, _ = fleetcron(capsys, "job", "run", JOB, "--target", "alpha", "--target", "charlie")
    assert code == 0 and queued_targets(app) == ["alpha", "bravo", "charlie"]
